/**
 * Against a live Synapse server: SYNAPSE_URL and SYNAPSE_MIND_KEY (a write key of a mind of
 * its own), as tests/synapse_client/test_typescript_client.py runs it in `make test`.
 * Without them these tests are reported as skipped, never passed.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import {
  AuthenticationError, ConflictError, NotFoundError, PermissionDeniedError, SynapseClient, ValidationError,
  type Memory, type VersionDetail,
} from "../src/index.js";

const LIVE = Boolean(process.env["SYNAPSE_URL"] && process.env["SYNAPSE_MIND_KEY"]);
const skip = LIVE ? false : "set SYNAPSE_URL and SYNAPSE_MIND_KEY to run the live tests";
const run = randomUUID().slice(0, 8);
const path = `projects/ts-${run}`;

describe("a live server", () => {
  // Each test skips on its own: a skipped suite is not counted as skipped.
  const live = (name: string, body: () => Promise<void>) => test(name, { skip }, body);
  const synapse = LIVE ? new SynapseClient() : (undefined as unknown as SynapseClient);

  live("store → get by citation → recall → search → update → versions → trash → restore", async () => {
    const stored = await synapse.store({ category: "fact", key: `editor_${run}`, content: "Alice edits with vim",
                                         tags: ["editor"], path });
    assert.equal(stored.status, "stored");
    assert.equal(stored.replayed, false);
    assert.equal(stored.citation, `${stored.id}@v1`);

    const cited = (await synapse.get(stored.citation)) as VersionDetail;
    assert.deepStrictEqual([cited.id, cited.version, cited.content], [stored.id, 1, "Alice edits with vim"]);

    const recall = await synapse.recall({ path, budget: 2000 });
    assert.deepStrictEqual(recall.memories.map((memory) => memory.id), [stored.id]);
    const text = await synapse.recallText({ path, budget: 2000 });
    assert.ok(text.includes(`Path: ${path}`) && text.includes(stored.citation), text);

    const found = await synapse.search({ q: "vim", path });
    assert.deepStrictEqual(found.results.map((hit) => hit.id), [stored.id]);
    assert.match(found.results[0]!.snippet!, /<mark>vim<\/mark>/);

    const updated = await synapse.update(stored.id, { content: "Alice edits with helix" });
    assert.deepStrictEqual([updated.version, updated.citation], [2, `${stored.id}@v2`]);
    assert.equal(((await synapse.get(stored.citation)) as VersionDetail).content, "Alice edits with vim");

    const versions = await synapse.versions(stored.id);
    assert.deepStrictEqual(versions.versions.map((version) => [version.version, version.content]),
                           [[1, "Alice edits with vim"], [2, "Alice edits with helix"]]);
    const diff = await synapse.versionDiff(stored.id, 1, 2);
    assert.deepStrictEqual(diff.changes.map((change) => change.field), ["content"]);

    const trashed = await synapse.trash(stored.id);
    assert.ok(trashed.deleted_at);
    await assert.rejects(synapse.get(stored.id), NotFoundError);
    assert.ok((await synapse.listTrash()).results.some((memory) => memory.id === stored.id));
    const restored = await synapse.restore(stored.id);
    assert.equal(restored.deleted_at, null);
    assert.equal(((await synapse.get(stored.id)) as Memory).content, "Alice edits with helix");
  });

  live("provenance headers are recorded on each version and audit event", async () => {
    const stored = await synapse.store({ category: "fact", key: `who_${run}`, content: "written from Node", path });
    const [version] = (await synapse.versions(stored.id)).versions;
    const expected = synapse.provenance;
    assert.equal(version!.agent, process.env["SYNAPSE_AGENT"] ?? "synapse-ts");
    assert.deepStrictEqual([version!.agent, version!.agent_instance, version!.device],
                           [expected.agent, expected.instance, expected.device]);
    if (!process.env["SYNAPSE_AGENT_INSTANCE_ID"]) {
      assert.match(version!.agent_instance, /^[0-9a-f]{16}$/); // made and kept in the config folder
    }
    assert.equal(version!.recorded_by.type, "key");
    const audit = await synapse.audit({ memory: stored.id, agent: expected.agent });
    assert.deepStrictEqual(audit.results.map((event) => [event.action, event.agent_instance, event.device]),
                           [["store", expected.instance, expected.device]]);
  });

  live("an Idempotency-Key replays the first answer and refuses another body", async () => {
    const idempotencyKey = `replay-${run}`;
    const body = { category: "fact", key: `once_${run}`, content: "stored once", path };
    const first = await synapse.store(body, { idempotencyKey });
    const again = await synapse.store(body, { idempotencyKey });
    assert.deepStrictEqual([again.id, again.version, again.status, again.replayed],
                           [first.id, first.version, "stored", true]);
    assert.equal((await synapse.versions(first.id)).count, 1);
    await assert.rejects(synapse.store({ ...body, content: "another body" }, { idempotencyKey }),
                         (error: unknown) => error instanceof ConflictError && error.status === 409);
  });

  live("a missing memory is a NotFoundError, a wrong key an AuthenticationError, bad input a ValidationError", async () => {
    await assert.rejects(synapse.get("mem_doesnotexist0000000000"),
                         (error: unknown) => error instanceof NotFoundError && error.code === "not_found");
    await assert.rejects(synapse.get("mem_doesnotexist0000000000@v1"), NotFoundError);
    const stranger = new SynapseClient({ key: "mk_not_a_real_key_at_all" });
    await assert.rejects(stranger.list(), (error: unknown) => error instanceof AuthenticationError
      && error.status === 401 && !error.message.includes("mk_not_a_real_key"));
    await assert.rejects(synapse.store({ category: "fact", content: "x", tags: Array(21).fill("t") }),
                         (error: unknown) => error instanceof ValidationError && "tags" in error.fields);
  });

  const readKey = process.env["SYNAPSE_TEST_READ_KEY"];
  test("a read-only key may read but not write", {
    skip: skip || (readKey ? false : "set SYNAPSE_TEST_READ_KEY to a read key of the same mind"),
  }, async () => {
    const reader = new SynapseClient({ key: readKey });
    assert.ok((await reader.list({ path })).count >= 1);
    await assert.rejects(reader.store({ category: "fact", content: "not allowed" }),
                         (error: unknown) => error instanceof PermissionDeniedError && error.status === 403);
  });

  live("episodes: timeline and neighbours", async () => {
    const talk = `${path}/talk`;
    const ids: string[] = [];
    for (const minute of [1, 2, 3]) {
      const answer = await synapse.store({ category: "context", key: `turn_${run}_${minute}`, content: `turn ${minute}`,
                                           memory_type: "episodic", path: talk, occurred_at: `2026-05-01T12:0${minute}:00Z` });
      ids.push(answer.id);
    }
    const page = await synapse.timeline({ path: talk, limit: 2 });
    assert.deepStrictEqual([page.results.map((memory) => memory.id), page.has_more], [ids.slice(0, 2), true]);
    const next = await synapse.timeline({ path: talk, after: ids[1] });
    assert.deepStrictEqual(next.results.map((memory) => memory.id), [ids[2]]);
    const around = await synapse.neighbours(ids[1]!, { n: 1 });
    assert.deepStrictEqual([around.before.map((m) => m.id), around.after.map((m) => m.id)], [[ids[0]], [ids[2]]]);
  });

  live("an agent event is stored as its candidate, naming its agent", async () => {
    const answer = await synapse.storeEvent({ type: "decision_made", subject: `Editor ${run}`, decision: "Use helix",
                                              agent: "Claude Code", path }, { source: "claude-code" });
    const memory = (await synapse.get(answer.id)) as Memory;
    assert.deepStrictEqual([memory.category, memory.memory_type, memory.priority, memory.content],
                           ["project", "semantic", "high", `Decision (Editor ${run}): Use helix`]);
    const [version] = (await synapse.versions(answer.id)).versions;
    assert.equal(version!.agent, "Claude-Code");
  });

  live("diff, sync, export and import", async () => {
    const diff = await synapse.diff({ path });
    assert.ok(diff.cursor.startsWith("tx") && diff.added.length + diff.updated.length >= 1);
    const now = new Date().toISOString();
    const synced = await synapse.sync({ memories: [{ category: "fact", key: `synced_${run}`,
                                                     content: "from another instance", updated_at: now, path }] });
    assert.deepStrictEqual([synced.added, synced.conflicts], [1, []]);
    const backup = JSON.parse(await synapse.export({ path })) as { format: string; memories: Array<{ key: string }> };
    assert.equal(backup.format, "synapse.mind-export");
    assert.ok(backup.memories.some((memory) => memory.key === `synced_${run}`));
    const merged = await synapse.import(backup);
    assert.equal(merged["mode"], "merge");
    assert.equal(merged["added"], 0);
    const stats = await synapse.stats({ path });
    assert.ok(Number(stats["total"]) >= 5);
  });
});
