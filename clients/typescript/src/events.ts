/**
 * Agent events (a command ran, a decision was made, …) as memories: a line-for-line port of
 * synapse_client/events.py, whose rules are the contract (docs/agents.md, "Agent events").
 * Both are pure and deterministic; tests/fixtures/agent_events.json drives the tests of
 * both clients.
 *
 * `normalizeAgentEvent` turns an event as a hook sends it into a canonical event;
 * `toMemoryCandidate` turns that into a body for `POST /memory` plus the provenance to
 * send with it. Lengths are counted in Unicode code points, as in Python.
 */

import { createHash } from "node:crypto";

import { agentNameFrom, checkAgent, checkInstance, isCombining, isPySpace, pyRepr } from "./provenance.js";
import { SynapseError } from "./errors.js";

/** An event the rules refuse (Python's ValueError). */
export class AgentEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AgentEventError";
  }
}

export type EventType =
  | "command_completed" | "command_failed" | "file_edited" | "decision_made" | "error_fixed"
  | "preference_stated" | "task_started" | "task_progressed" | "task_completed" | "handoff_note";

type Mapping = readonly [memoryType: string, category: string, priority: string, prefix: string,
                         tags: readonly string[]];

export const MAPPING: Readonly<Record<EventType, Mapping>> = {
  command_completed: ["episodic", "context", "low", "command", ["command"]],
  command_failed: ["episodic", "context", "high", "command", ["command", "error"]],
  file_edited: ["episodic", "context", "low", "edit", ["file"]],
  decision_made: ["semantic", "project", "high", "decision", ["decision"]],
  error_fixed: ["procedural", "mistake", "high", "fix", ["error", "fix"]],
  preference_stated: ["semantic", "preference", "high", "preference", ["preference"]],
  task_started: ["working", "context", "normal", "task", ["task"]],
  task_progressed: ["working", "context", "normal", "task", ["task"]],
  task_completed: ["episodic", "context", "normal", "task", ["task", "done"]],
  handoff_note: ["working", "context", "high", "handoff", ["handoff"]],
};
export const EVENT_TYPES = Object.keys(MAPPING) as EventType[];
export const TYPE_ALIASES: Readonly<Record<string, EventType>> = {
  command: "command_completed", command_run: "command_completed",
  command_finished: "command_completed", command_succeeded: "command_completed",
  command_error: "command_failed",
  file_edit: "file_edited", file_changed: "file_edited",
  file_modified: "file_edited", file_written: "file_edited",
  decision: "decision_made",
  fix: "error_fixed", bug_fixed: "error_fixed", mistake_fixed: "error_fixed",
  preference: "preference_stated", user_preference: "preference_stated",
  preference_expressed: "preference_stated",
  task_start: "task_started", task_begun: "task_started",
  task_progress: "task_progressed", task_updated: "task_progressed",
  progress: "task_progressed",
  task_done: "task_completed", task_finished: "task_completed",
  agent_turn_complete: "task_completed",
  handoff: "handoff_note", handover: "handoff_note", handoff_created: "handoff_note",
};
const EDIT_TOOLS = new Set(["edit", "multiedit", "write", "notebookedit"]);

export const OUTPUT_LIMIT = 4000;
export const OUTPUT_HEAD = 1000;
export const OUTPUT_TAIL = 2900;
export const TEXT_LIMIT = 4000;
export const COMMAND_LIMIT = 1000;
const SLUG_LIMIT = 48;
const MAX_TAGS = 20;
const MAX_TAG_LENGTH = 50;
const MAX_PATH_DEPTH = 8;
const MAX_SEGMENT = 64;
const SEGMENT = new RegExp(`^[a-z0-9][a-z0-9._-]{0,${MAX_SEGMENT - 1}}$`);
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

/** Where each canonical field may come from, first found wins. */
const FIELDS: Readonly<Record<string, readonly string[]>> = {
  command: ["command", "cmd", "command_line", "commandLine"],
  exit_code: ["exit_code", "exitCode", "returncode", "return_code", "exit_status"],
  output: ["output", "stdout", "result"],
  stderr: ["stderr"],
  file: ["file", "file_path", "filePath", "filename"],
  summary: ["summary", "description", "message", "change"],
  diff: ["diff", "patch"],
  subject: ["subject", "topic"],
  decision: ["decision", "text", "summary", "message"],
  rationale: ["rationale", "reason", "why"],
  error: ["error", "problem", "message"],
  fix: ["fix", "solution", "resolution"],
  preference: ["preference", "text", "statement", "message"],
  task: ["task", "title", "name", "goal"],
  task_id: ["task_id", "taskId"],
  note: ["note", "progress", "result", "summary", "details", "message", "text"],
};
/** The fields each type reads (beside the common ones) and the ones it needs. */
const TYPE_FIELDS: Readonly<Record<EventType, readonly [readonly string[], readonly string[]]>> = {
  command_completed: [["command", "exit_code", "output", "stderr"], ["command"]],
  command_failed: [["command", "exit_code", "output", "stderr"], ["command"]],
  file_edited: [["file", "summary", "diff"], ["file"]],
  decision_made: [["subject", "decision", "rationale"], ["decision"]],
  error_fixed: [["subject", "error", "fix"], ["error", "fix"]],
  preference_stated: [["subject", "preference"], ["preference"]],
  task_started: [["task", "task_id", "note"], ["task"]],
  task_progressed: [["task", "task_id", "note"], ["task"]],
  task_completed: [["task", "task_id", "note"], ["task"]],
  handoff_note: [["task", "note"], ["note"]],
};

/** A canonical event: `type`, `source` and the fields that have a value. */
export interface CanonicalEvent {
  type: EventType;
  source: string;
  agent_id?: string | null;
  instance_id?: string;
  occurred_at?: string;
  path?: string;
  priority?: string;
  tags?: string[];
  exit_code?: number;
  [field: string]: unknown;
}

/** The body of `POST /memory`, plus (apart) what the provenance headers should say. */
export interface MemoryCandidate {
  category: string;
  key?: string;
  content: string;
  memory_type: string;
  path?: string;
  priority: string;
  tags: string[];
  occurred_at?: string;
  provenance: { agent?: string; instance?: string; source?: string };
}

type Json = Record<string, unknown>;

// -- Python semantics JavaScript does not have ---------------------------------------------

function isDict(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Python's truthiness. */
function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (isDict(value)) return Object.keys(value).length > 0;
  return Boolean(value);
}

/** `a or b` in Python. */
function or(...values: unknown[]): unknown {
  for (const value of values.slice(0, -1)) {
    if (truthy(value)) return value;
  }
  return values[values.length - 1];
}

/** `dict.get(name)`: undefined and null are both None. */
function get(event: Json, name: string): unknown {
  return Object.prototype.hasOwnProperty.call(event, name) ? event[name] ?? null : null;
}

function has(event: Json, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(event, name);
}

/** Python's `str()` of a JSON value. */
function pyStr(value: unknown): string {
  return typeof value === "string" ? value : pyRepr(value);
}

/** Python's `str.strip()` (no arguments). */
function strip(value: string): string {
  const points = Array.from(value);
  let start = 0;
  let end = points.length;
  while (start < end && isPySpace(points[start]!)) start++;
  while (end > start && isPySpace(points[end - 1]!)) end--;
  return points.slice(start, end).join("");
}

/** Python's `str.strip(chars)`, `lstrip`, `rstrip` with a set of characters. */
function stripChars(text: string, chars: string, side: "both" | "left" | "right" = "both"): string {
  const points = Array.from(text);
  let start = 0;
  let end = points.length;
  if (side !== "right") while (start < end && chars.includes(points[start]!)) start++;
  if (side !== "left") while (end > start && chars.includes(points[end - 1]!)) end--;
  return points.slice(start, end).join("");
}

function length(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** `text[start:end]` in code points. */
function slice(text: string, start: number, end?: number): string {
  return Array.from(text).slice(start, end).join("");
}

function sha(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function fail(message: string): never {
  throw new AgentEventError(message);
}

// -- Small pieces ---------------------------------------------------------------------------

function typeName(value: unknown): string {
  if (typeof value !== "string" || !strip(value)) {
    fail(`An event needs a type (\`type\` or \`event\`), one of: ${EVENT_TYPES.join(", ")}.`);
  }
  const snake = strip(value).replace(/(?<=[a-z0-9])(?=[A-Z])/g, "_");
  return stripChars(snake.toLowerCase().replace(/[^a-z0-9]+/g, "_"), "_");
}

function first(event: Json, names: readonly string[]): unknown {
  for (const name of names) {
    const value = get(event, name);
    if (value !== null && value !== "") return value;
  }
  return null;
}

function text(value: unknown, name: string): string | null {
  if (value === null) return null;
  if (typeof value === "boolean" || (typeof value !== "string" && typeof value !== "number")) {
    fail(`${name} must be text.`);
  }
  const stripped = strip(pyStr(value));
  return stripped || null;
}

/** `text` in at most `limit` characters: the longest start that fits beside the marker
 * ` […N characters cut]` (so cutting again changes nothing). */
export function cut(value: string, limit: number = TEXT_LIMIT): string {
  const total = length(value);
  if (total <= limit) return value;
  let kept = limit;
  for (;;) {
    const marker = ` […${total - kept} characters cut]`;
    if (kept + length(marker) <= limit) return slice(value, 0, kept) + marker;
    kept = limit - length(marker);
  }
}

/** Command output or a diff: the start and the end (where results and errors are). */
export function cutOutput(value: string): string {
  const total = length(value);
  if (total <= OUTPUT_LIMIT) return value;
  const cutCount = total - OUTPUT_HEAD - OUTPUT_TAIL;
  return `${slice(value, 0, OUTPUT_HEAD)}\n[… ${cutCount} characters cut …]\n${slice(value, total - OUTPUT_TAIL)}`;
}

/** Python's round-half-even of a float. */
function roundHalfEven(value: number): number {
  const away = (x: number) => Math.sign(x) * Math.round(Math.abs(x));
  let rounded = away(value);
  if (Math.abs(value - rounded) === 0.5) rounded = 2 * away(value / 2);
  return rounded;
}

const MIN_MS = -62_135_596_800_000; // 0001-01-01T00:00:00Z (Date.UTC reads year 1 as 1901)
const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

function formatMoment(milliseconds: number, original: unknown, outOfRange: string): string {
  if (!(milliseconds >= MIN_MS && milliseconds <= MAX_MS)) fail(outOfRange.replace("%s", pyRepr(original)));
  const date = new Date(milliseconds);
  const two = (n: number) => String(n).padStart(2, "0");
  const textual = `${date.getUTCFullYear()}-${two(date.getUTCMonth() + 1)}-${two(date.getUTCDate())}`
    + `T${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())}`;
  const ms = date.getUTCMilliseconds();
  return ms ? `${textual}.${String(ms).padStart(3, "0")}Z` : `${textual}Z`;
}

function daysIn(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}

/** RFC 3339 or epoch seconds (milliseconds above 10^11) → `YYYY-MM-DDTHH:MM:SS[.fff]Z`. */
export function timestamp(value: unknown): string {
  if (typeof value === "boolean") fail("occurred_at must be an RFC 3339 time or epoch seconds.");
  if (typeof value === "number") {
    const seconds = Math.abs(value) > 1e11 ? value / 1000 : value;
    // datetime.fromtimestamp: whole seconds, then microseconds rounded half to even.
    let whole = Math.trunc(seconds);
    let micro = roundHalfEven((seconds - whole) * 1e6);
    if (micro >= 1e6) {
      micro -= 1e6;
      whole += 1;
    } else if (micro < 0) {
      micro += 1e6;
      whole -= 1;
    }
    return formatMoment(whole * 1000 + Math.floor(micro / 1000), value, "occurred_at %s is out of range.");
  }
  const match = typeof value === "string" ? RFC3339.exec(strip(value)) : null;
  if (match === null) {
    fail(`occurred_at must be an RFC 3339 time (2026-05-01T10:00:00Z) or epoch seconds, not ${pyRepr(value)}.`);
  }
  const [year, month, day, hour, minute] = match.slice(1, 6).map(Number) as [number, number, number, number, number];
  const second = match[6] ? Number(match[6]) : 0;
  const fraction = match[7] ? Number((match[7] + "00").slice(0, 3)) : 0;
  const offset = match[9] ? (match[9] === "-" ? -1 : 1) * (Number(match[10]) * 60 + Number(match[11])) : 0;
  const invalid = `occurred_at ${pyRepr(value)} is not a valid time.`;
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23
      || minute > 59 || second > 59 || Math.abs(offset) >= 24 * 60) {
    fail(invalid);
  }
  const moment = new Date(0);
  moment.setUTCFullYear(year, month - 1, day);
  moment.setUTCHours(hour, minute, second, fraction);
  return formatMoment(moment.getTime() - offset * 60_000, value, "date value out of range");
}

/** The server's normal form of a path (memories/paths.py), or AgentEventError. */
export function normalizePath(value: unknown): string {
  if (typeof value !== "string") fail("path must be text.");
  const path = stripChars(strip(value), "/").toLowerCase();
  if (!path) return "";
  const segments = path.split("/");
  if (segments.length > MAX_PATH_DEPTH) fail(`A path has at most ${MAX_PATH_DEPTH} segments.`);
  for (const segment of segments) {
    if (!SEGMENT.test(segment)) {
      fail(`path ${pyRepr(value)}: segments use a-z, 0-9, '.', '_' and '-', start with a letter `
        + `or a digit and have at most ${MAX_SEGMENT} characters.`);
    }
  }
  return path;
}

function ascii(value: string): string {
  return Array.from(value.normalize("NFKD")).filter((char) => !isCombining(char.codePointAt(0)!)).join("");
}

/** A project's name → `projects/<segment>`: lower-cased, each run of other characters one
 * `-`; a name with `/` is taken as a path. */
export function projectPath(name: unknown): string {
  if (typeof name !== "string") fail("project must be text.");
  if (stripChars(strip(name), "/").includes("/")) return normalizePath(name);
  let segment = slice(stripChars(ascii(name).toLowerCase().replace(/[^a-z0-9._-]+/g, "-"), ".-_"), 0, MAX_SEGMENT);
  segment = stripChars(segment, ".-_", "right");
  if (!segment) fail(`project ${pyRepr(name)} has no letters or digits to make a path of.`);
  return `projects/${segment}`;
}

/** `Editor Setup` → `editor_setup`; accents dropped; a text with no letter or digit of
 * a-z 0-9 → the first 8 hex of its SHA-256. */
export function slug(value: string): string {
  let words = stripChars(ascii(value).toLowerCase().replace(/[^a-z0-9]+/g, "_"), "_");
  words = stripChars(slice(words, 0, SLUG_LIMIT), "_", "right");
  return words || sha(value).slice(0, 8);
}

function tagsOf(value: unknown): string[] {
  if (value === null) return [];
  const list = typeof value === "string" ? [value] : value;
  if (!Array.isArray(list) || !list.every((tag) => typeof tag === "string")) fail("tags must be a list of text.");
  const tags: string[] = [];
  for (const tag of list as string[]) {
    const cleaned = strip(tag).toLowerCase();
    if (length(cleaned) > MAX_TAG_LENGTH) fail(`A tag has at most ${MAX_TAG_LENGTH} characters: ${pyRepr(tag)}.`);
    if (cleaned && !tags.includes(cleaned)) tags.push(cleaned);
  }
  return tags;
}

// -- Hook payloads as they come --------------------------------------------------------------

/** Claude Code's PostToolUse and Codex's agent-turn-complete → plain events. */
function fromHook(event: Json): Json {
  const hook = get(event, "hook_event_name");
  if (typeof hook === "string" && hook.replace(/_/g, "").toLowerCase() === "posttooluse") {
    const tool = pyStr(has(event, "tool_name") ? event["tool_name"] : "");
    const given = isDict(get(event, "tool_input")) ? (event["tool_input"] as Json) : {};
    const response = get(event, "tool_response");
    const answer: Json = isDict(response) ? response : { output: response };
    const base: Json = {};
    for (const name of ["agent", "agent_id", "occurred_at", "timestamp", "path", "project", "tags"]) {
      if (has(event, name)) base[name] = event[name];
    }
    if (tool.toLowerCase() === "bash") {
      const exitCode = get(answer, "exit_code");
      const failed = get(answer, "interrupted") === true || exitCode === true
        || (typeof exitCode === "number" && Number.isInteger(exitCode) && exitCode !== 0);
      return { ...base, type: failed ? "command_failed" : "command_completed",
               command: get(given, "command"), exit_code: exitCode,
               output: or(get(answer, "stdout"), get(answer, "output")), stderr: get(answer, "stderr") };
    }
    if (EDIT_TOOLS.has(tool.toLowerCase())) {
      return { ...base, type: "file_edited", file: or(get(given, "file_path"), get(given, "notebook_path")) };
    }
    fail(`A PostToolUse event of tool ${pyRepr(tool)} is not an agent event Synapse remembers `
      + "(Bash, Edit, MultiEdit, Write, NotebookEdit are).");
  }
  if (typeName(or(get(event, "type"), "x")) === "agent_turn_complete") {
    const messages = or(get(event, "input-messages"), get(event, "input_messages"), []);
    const firstMessage = Array.isArray(messages) && messages.length ? messages[0] : null;
    return { ...event, type: "task_completed", task: firstMessage,
             note: or(get(event, "last-assistant-message"), get(event, "last_assistant_message")) };
  }
  return event;
}

// -- The two steps ----------------------------------------------------------------------------

/**
 * One event from a hook or agent → the canonical event: `{type, source, agent_id?,
 * instance_id?, occurred_at?, path?, tags?, priority?, …the type's text fields}`; fields
 * without a value are left out. `source` names where events come from (`claude-code`,
 * `codex`, `generic`); `defaultAgentId` is the agent when the event names none. Throws
 * AgentEventError for an event that is not one of EVENT_TYPES or lacks what its type needs.
 */
export function normalizeAgentEvent(input: unknown, source = "generic",
                                    defaultAgentId: string | null = null): CanonicalEvent {
  if (!isDict(input)) fail("An event is a JSON object.");
  const event = fromHook(input);
  const named = typeName(first(event, ["type", "event", "event_type", "kind"]));
  const kind = (TYPE_ALIASES[named] ?? named) as EventType;
  if (!Object.prototype.hasOwnProperty.call(MAPPING, kind)) {
    fail(`Unknown event type ${pyRepr(kind)}; known: ${EVENT_TYPES.join(", ")}.`);
  }
  checkOrFail(() => checkAgent(source, "source"));

  let exitCode = first(event, FIELDS["exit_code"]!);
  let type: EventType = kind;
  if (exitCode !== null) {
    if (typeof exitCode === "string" && /^-?\d{1,4}$/.test(strip(exitCode))) {
      exitCode = Number.parseInt(strip(exitCode), 10);
    }
    if (typeof exitCode !== "number" || !Number.isInteger(exitCode)) fail("exit_code must be a whole number.");
  }
  if (type === "command_completed" && exitCode !== null && exitCode !== 0) type = "command_failed";

  const canonical: CanonicalEvent = { type, source };
  const agent = first(event, ["agent", "agent_id", "agentId", "agent_name"]);
  if (agent !== null) {
    canonical.agent_id = agentNameFrom(agent);
    if (canonical.agent_id === null) fail(`agent ${pyRepr(agent)} has no letters or digits.`);
  } else if (defaultAgentId) {
    canonical.agent_id = agentNameFrom(defaultAgentId);
  }
  const instance = first(event, ["agent_instance", "agent_instance_id", "instance_id"]);
  if (instance !== null) {
    canonical.instance_id = checkOrFail(() => checkInstance(pyStr(instance), "agent_instance"));
  }
  const moment = first(event, ["occurred_at", "timestamp", "time", "ts"]);
  if (moment !== null) canonical.occurred_at = timestamp(moment);
  const path = get(event, "path");
  const project = get(event, "project");
  if (path !== null && path !== "") canonical.path = normalizePath(path);
  else if (project !== null && project !== "") canonical.path = projectPath(project);
  if (!canonical.path) delete canonical.path;
  const priority = get(event, "priority");
  if (priority !== null) {
    if (typeof priority !== "string" || !["low", "normal", "high", "critical"].includes(priority)) {
      fail("priority must be low, normal, high or critical.");
    }
    canonical.priority = priority;
  }

  const [wanted, needed] = TYPE_FIELDS[type];
  for (const name of wanted) {
    let value: unknown;
    if (name === "exit_code") {
      value = exitCode;
    } else {
      let found = text(first(event, FIELDS[name]!), name);
      if (found !== null) {
        found = name === "command" ? cut(found, COMMAND_LIMIT)
          : ["output", "stderr", "diff"].includes(name) ? cutOutput(found) : cut(found);
      }
      value = found;
    }
    if (value !== null) canonical[name] = value;
  }
  const missing = needed.filter((name) => !has(canonical, name));
  if (missing.length) fail(`A ${type} event needs ${missing.join(" and ")}.`);
  const tags = tagsOf(get(event, "tags"));
  if (tags.length) canonical.tags = tags;
  return canonical;
}

function checkOrFail<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof SynapseError) fail(error.message);
    throw error;
  }
}

function content(event: CanonicalEvent): string {
  const kind = event.type;
  const field = (name: string) => String(event[name]);
  if (kind === "command_completed" || kind === "command_failed") {
    const code = has(event, "exit_code") ? ` (exit ${field("exit_code")})` : "";
    const verb = kind === "command_completed" ? "Ran" : "Failed";
    const lines = [`${verb}: ${field("command")}${code}`];
    if (has(event, "output")) lines.push(`Output:\n${field("output")}`);
    if (has(event, "stderr")) lines.push(`Errors:\n${field("stderr")}`);
    return lines.join("\n");
  }
  if (kind === "file_edited") {
    const lines = [`Edited ${field("file")}` + (has(event, "summary") ? `: ${field("summary")}` : "")];
    if (has(event, "diff")) lines.push(`Change:\n${field("diff")}`);
    return lines.join("\n");
  }
  if (kind === "decision_made") {
    const about = has(event, "subject") ? ` (${field("subject")})` : "";
    return `Decision${about}: ${field("decision")}` + (has(event, "rationale") ? `\nWhy: ${field("rationale")}` : "");
  }
  if (kind === "error_fixed") {
    const about = has(event, "subject") ? ` (${field("subject")})` : "";
    return `Error${about}: ${field("error")}\nFix: ${field("fix")}`;
  }
  if (kind === "preference_stated") {
    return (has(event, "subject") ? `${field("subject")}: ` : "") + field("preference");
  }
  if (kind === "handoff_note") {
    return `Handoff: ${field("note")}` + (has(event, "task") ? `\nTask: ${field("task")}` : "");
  }
  const heading = { task_started: "Task started", task_progressed: "Task in progress",
                    task_completed: "Task completed" }[kind];
  return `${heading}: ${field("task")}` + (has(event, "note") ? `\n${field("note")}` : "");
}

function keyOf(event: CanonicalEvent, body: string, prefix: string, memoryType: string): string | null {
  const kind = event.type;
  const path = has(event, "path") ? String(event.path) : "";
  if (memoryType === "episodic") {
    const occurred = has(event, "occurred_at") ? String(event.occurred_at) : "";
    return `${prefix}_${sha([kind, path, occurred, body].join("\n")).slice(0, 12)}`;
  }
  let stem: string;
  if (kind === "task_started" || kind === "task_progressed") {
    stem = slug(String(or(get(event, "task_id"), event["task"])));
  } else if (kind === "handoff_note") {
    stem = "";
  } else if (has(event, "subject")) {
    stem = slug(String(event["subject"]));
  } else {
    return null;
  }
  const key = stem ? `${prefix}_${stem}` : prefix;
  return path ? `${key}_${sha(path).slice(0, 8)}` : key;
}

/**
 * A canonical event (from normalizeAgentEvent) → `{category, key?, content, memory_type,
 * path?, priority, tags, occurred_at?, provenance: {agent?, instance?, source}}`: the body
 * of `POST /memory` and, apart, what the provenance headers should say.
 */
export function toMemoryCandidate(event: CanonicalEvent): MemoryCandidate {
  const [memoryType, category, priority, prefix, tags] = MAPPING[event.type];
  const body = content(event);
  const key = keyOf(event, body, prefix, memoryType);
  const extra = (Array.isArray(event.tags) ? event.tags : []).filter((tag) => !tags.includes(tag));
  // The same fields in the same order as the Python client's.
  const candidate = {
    category,
    ...(key ? { key } : {}),
    content: body,
    memory_type: memoryType,
    ...(event.path ? { path: event.path } : {}),
    priority: has(event, "priority") ? String(event.priority) : priority,
    tags: [...tags, ...extra].slice(0, MAX_TAGS),
    ...(memoryType === "episodic" && event.occurred_at ? { occurred_at: event.occurred_at } : {}),
    provenance: {},
  } as MemoryCandidate;
  const provenance: MemoryCandidate["provenance"] = {};
  if (event.agent_id) provenance.agent = event.agent_id;
  if (event.instance_id) provenance.instance = event.instance_id;
  if (event.source) provenance.source = event.source;
  candidate.provenance = provenance;
  return candidate;
}
