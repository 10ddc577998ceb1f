/** Every memory operation of the server's schema has its method. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { OPERATIONS, SynapseClient } from "../src/index.js";
import { repoFile } from "./repo.js";

test("every memory operation of the OpenAPI schema has a client method", () => {
  const operations = repoFile("tests/synapse/data/openapi_operations.txt").split("\n")
    .map((line) => line.trim().split(" ")).filter((parts) => parts.length === 3 && parts[1]!.startsWith("/memory"))
    .map((parts) => parts[2]!);
  assert.ok(operations.length > 30);
  const missing = operations.filter((operation) => !(operation in OPERATIONS));
  assert.deepStrictEqual(missing, []);
  for (const method of Object.values(OPERATIONS)) {
    assert.equal(typeof SynapseClient.prototype[method], "function", method);
  }
});
