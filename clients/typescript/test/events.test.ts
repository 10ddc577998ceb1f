/** normalizeAgentEvent / toMemoryCandidate against tests/fixtures/agent_events.json, the
 * fixture that drives the Python client's tests too (tests/synapse_client/test_events.py). */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  AgentEventError, EVENT_TYPES, cut, cutOutput, normalizeAgentEvent, timestamp, toMemoryCandidate,
} from "../src/index.js";
import { repoFile } from "./repo.js";

interface Case {
  name: string;
  event: unknown;
  source: string;
  default_agent_id: string | null;
  candidate?: unknown;
  error?: string;
}

const CASES = JSON.parse(repoFile("tests/fixtures/agent_events.json")) as Case[];
const STORED = CASES.filter((item) => "candidate" in item);
const REFUSED = CASES.filter((item) => "error" in item);

describe("each event becomes its candidate", () => {
  for (const item of STORED) {
    test(item.name, () => {
      const event = normalizeAgentEvent(item.event, item.source, item.default_agent_id);
      assert.deepStrictEqual(toMemoryCandidate(event), item.candidate);
    });
  }
});

describe("each bad event is refused saying why", () => {
  for (const item of REFUSED) {
    test(item.name, () => {
      assert.throws(() => normalizeAgentEvent(item.event, item.source, item.default_agent_id),
                    (error: unknown) => error instanceof AgentEventError
                      && new RegExp(item.error!).test(error.message));
    });
  }
});

describe("each canonical event normalises to itself", () => {
  for (const item of STORED) {
    test(item.name, () => {
      const canonical = normalizeAgentEvent(item.event, item.source, item.default_agent_id);
      assert.deepStrictEqual(normalizeAgentEvent(canonical, canonical.source), canonical);
    });
  }
});

test("the fixture covers every event type and is well formed", () => {
  assert.ok(STORED.length >= 20 && REFUSED.length >= 5);
  const kinds = new Set(STORED.map((item) => normalizeAgentEvent(item.event, item.source).type));
  assert.deepStrictEqual([...kinds].sort(), [...EVENT_TYPES].sort());
  assert.equal(new Set(CASES.map((item) => item.name)).size, CASES.length);
});

test("the canonical event keeps the type fields and where it came from", () => {
  const event = { event: "command-completed", cmd: "pytest -q", exit_code: 3, output: "1 failed",
                  project: "Memory OS", ts: "2026-05-01T12:00:00+02:00", agent: "claude-code",
                  instance_id: "desk-1", tags: ["CI"] };
  assert.deepStrictEqual(normalizeAgentEvent(event, "claude-code"), {
    type: "command_failed", source: "claude-code", agent_id: "claude-code", instance_id: "desk-1",
    occurred_at: "2026-05-01T10:00:00Z", path: "projects/memory-os", command: "pytest -q", exit_code: 3,
    output: "1 failed", tags: ["ci"] });
});

test("episodes differ by moment and repeat as one memory", () => {
  const key = (event: object) => toMemoryCandidate(normalizeAgentEvent(event)).key;
  const first = { type: "command_completed", command: "pytest", occurred_at: 1777629600 };
  assert.equal(key(first), key({ ...first }));
  assert.notEqual(key(first), key({ ...first, occurred_at: 1777629660 }));
});

test("long text is cut in code points, as in Python", () => {
  const text = "h".repeat(1000) + "m".repeat(600) + "t".repeat(2900);
  assert.equal(cutOutput(text), "h".repeat(1000) + "\n[… 600 characters cut …]\n" + "t".repeat(2900));
  assert.equal(cut("x".repeat(4003)), "x".repeat(3979) + " […24 characters cut]");
  assert.equal(Array.from(cut("😀".repeat(5000))).length, 4000);
});

test("times come back as Python writes them", () => {
  const cases: Array<[unknown, string]> = [
    ["2026-05-01T10:00:00.1234567Z", "2026-05-01T10:00:00.123Z"],
    ["2026-05-01 10:00", "2026-05-01T10:00:00Z"],
    ["2026-05-01T10:00:00+0200", "2026-05-01T08:00:00Z"],
    ["2026-05-01T10:00:00+02:60", "2026-05-01T07:00:00Z"],
    ["0999-05-01T10:00:00Z", "999-05-01T10:00:00Z"],
    [1777629600123, "2026-05-01T10:00:00.123Z"],
    [1e11, "5138-11-16T09:46:40Z"],
    [-0.0005, "1969-12-31T23:59:59.999Z"],
    [1777629600.9999995, "2026-05-01T10:00:01Z"],
    [-62135596800, "1-01-01T00:00:00Z"],
  ];
  for (const [given, expected] of cases) assert.equal(timestamp(given), expected, String(given));
  for (const bad of ["2026-02-29T10:00:00Z", "2026-05-01T24:00:00Z", "2026-05-01T10:00:00+24:00",
                     -62135596801, true, "yesterday"]) {
    assert.throws(() => timestamp(bad), AgentEventError, String(bad));
  }
});

test("malformed events are errors", () => {
  for (const event of [["not", "an", "object"], { type: 7 },
                       { type: "command_completed", command: "ls", exit_code: true },
                       { type: "decision", decision: { nested: "object" } },
                       { type: "decision", decision: "x", tags: "x".repeat(51) },
                       { type: "decision", decision: "x", path: Array(9).fill("a").join("/") },
                       { type: "decision", decision: "x", project: "!!!" }]) {
    assert.throws(() => normalizeAgentEvent(event), AgentEventError, JSON.stringify(event));
  }
  assert.throws(() => normalizeAgentEvent({ type: "handoff", note: "x" }, "my source"), /source/);
});
