/** The instance id and the other provenance headers, by synapse_client/provenance.py's rules. */

import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { ConfigurationError, configDir, instanceId, provenanceFromEnv, SynapseClient } from "../src/index.js";
import { tempFolder } from "./folders.js";

const folder = tempFolder;

test("the instance id is made once, kept 0600 in a 0700 folder, and never regenerated", () => {
  const config = join(folder(), "nested", "synapse");
  const first = instanceId({ SYNAPSE_CONFIG_DIR: config });
  assert.match(first!, /^[0-9a-f]{16}$/);
  assert.equal(instanceId({ SYNAPSE_CONFIG_DIR: config }), first);
  const file = join(config, "agent_instance_id");
  assert.equal(readFileSync(file, "ascii"), `${first}\n`);
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(statSync(config).mode & 0o777, 0o700);
  assert.deepStrictEqual(readdirSync(config), ["agent_instance_id"]);
});

test("an id the Python client stored is the one sent", () => {
  const config = folder();
  writeFileSync(join(config, "agent_instance_id"), "0123456789abcdef\n", { mode: 0o600 });
  assert.equal(instanceId({ SYNAPSE_CONFIG_DIR: config }), "0123456789abcdef");
});

test("the folder follows SYNAPSE_CONFIG_DIR, then XDG_CONFIG_HOME", () => {
  assert.equal(configDir({ SYNAPSE_CONFIG_DIR: "/a", XDG_CONFIG_HOME: "/b" }), "/a");
  assert.equal(configDir({ XDG_CONFIG_HOME: "/b" }), "/b/synapse");
  assert.match(configDir({}), /\.config\/synapse$/);
});

test("SYNAPSE_AGENT_INSTANCE_ID wins and is checked", () => {
  assert.equal(instanceId({ SYNAPSE_AGENT_INSTANCE_ID: "desk-1", SYNAPSE_CONFIG_DIR: "/nonexistent/x" }), "desk-1");
  assert.throws(() => instanceId({ SYNAPSE_AGENT_INSTANCE_ID: "has space" }), ConfigurationError);
});

test("a folder that cannot be used means no instance header, not a failure", () => {
  const blocker = join(folder(), "file");
  writeFileSync(blocker, "not a folder");
  assert.equal(instanceId({ SYNAPSE_CONFIG_DIR: join(blocker, "synapse") }), null);
});

test("agent and device come from the environment, checked", () => {
  const config = folder();
  const provenance = provenanceFromEnv("synapse-ts", { SYNAPSE_CONFIG_DIR: config, SYNAPSE_AGENT: "codex",
                                                       SYNAPSE_DEVICE: "Café  box\u00a01" });
  assert.deepStrictEqual([provenance.agent, provenance.device], ["codex", "Cafe box 1"]);
  assert.equal(provenanceFromEnv("synapse-ts", { SYNAPSE_CONFIG_DIR: config, SYNAPSE_DEVICE: "" }).device, null);
  assert.match(provenanceFromEnv("synapse-ts", { SYNAPSE_CONFIG_DIR: config }).device!, /; synapse-ts\/0\.1\.0$/);
  assert.equal(provenanceFromEnv("synapse-ts", { SYNAPSE_CONFIG_DIR: config }).agent, "synapse-ts");
  assert.throws(() => provenanceFromEnv("x", { SYNAPSE_CONFIG_DIR: config, SYNAPSE_AGENT: "-bad" }), /SYNAPSE_AGENT/);
  assert.throws(() => provenanceFromEnv("x", { SYNAPSE_CONFIG_DIR: config, SYNAPSE_DEVICE: "a\u0007b" }), /control/);
  assert.throws(() => provenanceFromEnv("x", { SYNAPSE_CONFIG_DIR: config, SYNAPSE_DEVICE: "d".repeat(201) }), /200/);
});

test("options replace the environment, and null leaves a header out", () => {
  const config = folder();
  mkdirSync(join(config, "unused"));
  const synapse = new SynapseClient({ key: "mk_x", agent: "my-agent", instance: null, device: null,
                                      env: { SYNAPSE_CONFIG_DIR: join(config, "unused"), SYNAPSE_AGENT: "-invalid" } });
  assert.deepStrictEqual(synapse.provenance, { agent: "my-agent", instance: null, device: null });
  assert.deepStrictEqual(readdirSync(join(config, "unused")), []);
  const headers = synapse.headers();
  assert.deepStrictEqual(Object.keys(headers).filter((name) => name.startsWith("X-Synapse")), ["X-Synapse-Agent"]);
});
