/**
 * For tests/synapse_client/test_typescript_client.py: reads JSON lines `[event, source,
 * defaultAgentId]` on stdin and writes one JSON line each, `{"candidate": …}` or
 * `{"error": message}` (an AgentEventError), so the Python test can compare every answer
 * with synapse_client.events. Anything else thrown is a bug and stops the script.
 */

import { createInterface } from "node:readline";

import { AgentEventError, normalizeAgentEvent, toMemoryCandidate } from "../src/index.js";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const out: string[] = [];
for await (const line of lines) {
  if (!line.trim()) continue;
  const [event, source, defaultAgentId] = JSON.parse(line) as [unknown, string, string | null];
  try {
    out.push(JSON.stringify({ candidate: toMemoryCandidate(normalizeAgentEvent(event, source, defaultAgentId)) }));
  } catch (error) {
    if (!(error instanceof AgentEventError)) throw error;
    out.push(JSON.stringify({ error: error.message }));
  }
}
process.stdout.write(out.join("\n") + "\n");
