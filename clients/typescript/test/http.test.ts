/** The client against a local HTTP server: errors as typed exceptions, retries on 429 and
 * 503 with Retry-After, and the headers it sends. */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  AuthenticationError, ConflictError, NotFoundError, PermissionDeniedError, QuotaExceededError,
  RateLimitedError, ServerError, SynapseClient, SynapseError, ValidationError, type SynapseClientOptions,
} from "../src/index.js";
import { tempFolder } from "./folders.js";
import { errorBody, withServer } from "./server.js";

const STORED = { id: "mem_abc123", status: "stored", version: 1, citation: "mem_abc123@v1" };

function client(url: string, waits: number[] = [], options: SynapseClientOptions = {}) {
  return new SynapseClient({
    url, key: "mk_test", env: { SYNAPSE_CONFIG_DIR: tempFolder() },
    sleep: async (milliseconds) => { waits.push(milliseconds); }, ...options,
  });
}

describe("errors as typed exceptions", () => {
  const cases: Array<[number, string, new (...args: never[]) => SynapseError]> = [
    [400, "invalid", ValidationError], [401, "authentication_failed", AuthenticationError],
    [403, "permission_denied", PermissionDeniedError], [403, "quota_exceeded", QuotaExceededError],
    [404, "not_found", NotFoundError], [409, "conflict", ConflictError],
    [429, "throttled", RateLimitedError], [500, "server_error", ServerError],
    [503, "unavailable", ServerError], [413, "too_large", SynapseError],
  ];
  for (const [status, code, kind] of cases) {
    test(`${status} ${code} is a ${kind.name}`, async () => {
      await withServer([{ status, body: errorBody(status, code, "No.", { quota: { name: "memories" } }) }], async (url) => {
        const error = await client(url, [], { retry: { maxRetries: 0 } }).stats().catch((caught: unknown) => caught);
        assert.ok(error instanceof kind, String(error));
        assert.ok(error instanceof SynapseError);
        assert.equal(error.constructor, kind);
        assert.deepStrictEqual([error.status, error.code, error.message], [status, code, "No."]);
        if (error instanceof QuotaExceededError) assert.deepStrictEqual(error.quota, { name: "memories" });
      });
    });
  }

  test("the fields of a validation error are kept and printed", async () => {
    const body = errorBody(400, "invalid", "content: Too long.", { fields: { content: ["Too long."], tags: ["Too many."] } });
    await withServer([{ status: 400, body }], async (url) => {
      const error = await client(url).store({ category: "fact", content: "x" }).catch((caught: unknown) => caught);
      assert.ok(error instanceof ValidationError);
      assert.deepStrictEqual(error.fields["tags"], ["Too many."]);
      assert.equal(String(error), "content: Too long. (tags: Too many.) [HTTP 400 invalid]");
    });
  });

  test("an answer without the error shape still reads plainly", async () => {
    await withServer([{ status: 502, text: "<html>Bad gateway</html>" }], async (url) => {
      const error = await client(url).stats().catch((caught: unknown) => caught);
      assert.ok(error instanceof ServerError);
      assert.equal(String(error), "502 Bad Gateway from /memory/stats [HTTP 502 http_error]");
    });
  });

  test("the key never appears in an error", async () => {
    await withServer([{ status: 401, body: errorBody(401, "authentication_failed", "Invalid Mind Key.") }], async (url) => {
      const error = await client(url).list().catch((caught: unknown) => caught);
      assert.ok(error instanceof AuthenticationError);
      assert.ok(!String(error).includes("mk_test") && !JSON.stringify(error).includes("mk_test"));
    });
  });
});

describe("retries", () => {
  test("a 429 is retried after Retry-After, with the same Idempotency-Key", async () => {
    const throttled = { status: 429, body: errorBody(429, "throttled", "Too many requests."), headers: { "Retry-After": "3" } };
    await withServer([throttled, { status: 201, body: STORED }], async (url, received) => {
      const waits: number[] = [];
      const answer = await client(url, waits).store({ category: "fact", content: "x" });
      assert.equal(answer.id, "mem_abc123");
      assert.deepStrictEqual(waits, [3000]);
      assert.equal(received.length, 2);
      const keys = received.map((request) => request.headers["idempotency-key"]);
      assert.ok(keys[0] && keys[0] === keys[1] && keys[0] === answer.idempotencyKey);
      assert.deepStrictEqual(received.map((request) => request.body), Array(2).fill('{"category":"fact","content":"x"}'));
    });
  });

  test("a 503 is retried too; without Retry-After the wait doubles", async () => {
    const down = { status: 503, body: errorBody(503, "unavailable", "The database is unavailable.") };
    await withServer([down, down, { status: 200, body: { status: "ok" } }], async (url, received) => {
      const waits: number[] = [];
      assert.deepStrictEqual(await client(url, waits).health(), { status: "ok" });
      assert.deepStrictEqual(waits, [1000, 2000]);
      assert.equal(received.length, 3);
    });
  });

  test("retries are bounded: the last 429 is thrown with retryAfter", async () => {
    const throttled = { status: 429, body: errorBody(429, "throttled", "Too many requests."), headers: { "Retry-After": "1" } };
    await withServer([throttled], async (url, received) => {
      const waits: number[] = [];
      const error = await client(url, waits, { retry: { maxRetries: 3 } }).list().catch((caught: unknown) => caught);
      assert.ok(error instanceof RateLimitedError);
      assert.equal(error.retryAfter, 1);
      assert.equal(error.message, "Too many requests. Retry after 1 seconds.");
      assert.deepStrictEqual(waits, [1000, 1000, 1000]);
      assert.equal(received.length, 4);
    });
  });

  test("a Retry-After longer than the client accepts is thrown at once", async () => {
    const throttled = { status: 429, body: errorBody(429, "throttled", "Too many."), headers: { "Retry-After": "3600" } };
    await withServer([throttled], async (url, received) => {
      const waits: number[] = [];
      const error = await client(url, waits, { retry: { maxDelaySeconds: 60 } }).search({ q: "x" }).catch((caught: unknown) => caught);
      assert.ok(error instanceof RateLimitedError);
      assert.equal(error.retryAfter, 3600);
      assert.deepStrictEqual(waits, []);
      assert.equal(received.length, 1);
    });
  });

  test("other errors are not retried", async () => {
    await withServer([{ status: 404, body: errorBody(404, "not_found", "No such memory.") }], async (url, received) => {
      await assert.rejects(client(url).get("mem_missing1"), NotFoundError);
      assert.equal(received.length, 1);
    });
  });
});

describe("requests", () => {
  test("credentials, provenance and idempotency headers are sent", async () => {
    await withServer([{ status: 201, body: STORED }, { status: 200, body: STORED, headers: { "Idempotent-Replayed": "true" } }],
      async (url, received) => {
        const synapse = client(url, [], { env: { SYNAPSE_AGENT: "ts-agent", SYNAPSE_AGENT_INSTANCE_ID: "desk-1",
                                                 SYNAPSE_DEVICE: "Büro  laptop" } });
        const first = await synapse.store({ category: "fact", content: "x" }, { idempotencyKey: "k-1" });
        const again = await synapse.store({ category: "fact", content: "x" }, { idempotencyKey: "k-1", agent: "other" });
        assert.deepStrictEqual([first.replayed, again.replayed], [false, true]);
        const headers = received[0]!.headers;
        assert.equal(headers["authorization"], "Bearer mk_test");
        assert.equal(headers["x-synapse-agent"], "ts-agent");
        assert.equal(headers["x-synapse-agent-instance"], "desk-1");
        assert.equal(headers["x-synapse-device"], "Buro laptop");
        assert.equal(headers["idempotency-key"], "k-1");
        assert.equal(received[1]!.headers["x-synapse-agent"], "other");
      });
  });

  test("a store generates a new Idempotency-Key each time", async () => {
    await withServer([{ status: 201, body: STORED }], async (url, received) => {
      const synapse = client(url);
      await synapse.store({ category: "fact", content: "x" });
      await synapse.store({ category: "fact", content: "x" });
      const [first, second] = received.map((request) => request.headers["idempotency-key"]);
      assert.ok(first && second && first !== second);
    });
  });

  test("citations, query parameters and ?mind= go where the API expects them", async () => {
    await withServer([{ status: 200, body: {} }], async (url, received) => {
      const synapse = client(url, [], { mind: "m_1" });
      await synapse.get("mem_abc@v2");
      await synapse.search({ q: "vim modal", mode: "hybrid", limit: 5, include_expired: true });
      await synapse.versionDiff("mem_abc", 1, 2);
      assert.deepStrictEqual(received.map((request) => request.url), [
        "/memory/mem_abc@v2?mind=m_1",
        "/memory/search?mind=m_1&q=vim+modal&mode=hybrid&limit=5&include_expired=true",
        "/memory/mem_abc/diff?mind=m_1&from=1&to=2",
      ]);
    });
  });

  test("what is not a memory id is refused before any request", async () => {
    await withServer([{ status: 200, body: {} }], async (url, received) => {
      await assert.rejects(client(url).get("../minds"), /not a memory id/);
      await assert.rejects(client(url).trash("mem_a/b"), /not a memory id/);
      assert.equal(received.length, 0);
    });
  });

  test("a redirect is reported, not followed", async () => {
    await withServer([{ status: 301, body: {}, headers: { Location: "https://synapse.example/memory" } }], async (url) => {
      await assert.rejects(client(url).list(), (error: unknown) => error instanceof SynapseError
        && error.code === "redirect" && error.message.includes("https://synapse.example/memory"));
    });
  });
});

test("an unreachable server is a NetworkError with status 0", async () => {
  let url = "";
  await withServer([], async (address) => { url = address; });
  const error = await client(url).list().catch((caught: unknown) => caught);
  assert.ok(error instanceof SynapseError);
  assert.deepStrictEqual([error.name, error.status, error.code], ["NetworkError", 0, "unreachable"]);
});

test("without a key the client says what to set", () => {
  assert.throws(() => new SynapseClient({ env: {} }), /SYNAPSE_MIND_KEY/);
  assert.throws(() => new SynapseClient({ key: "mk_x", url: "ftp://x", env: {} }), /http:\/\//);
});
