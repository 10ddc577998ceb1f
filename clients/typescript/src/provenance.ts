/**
 * Who is writing: the provenance headers, by the rules of synapse_client/provenance.py
 * (docs/agents.md, "Provenance"), so a Node agent and the Python CLI on one machine agree:
 *
 * - `X-Synapse-Agent`: 1-64 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or a
 *   digit. `SYNAPSE_AGENT`; by default the program (`synapse-ts`).
 * - `X-Synapse-Agent-Instance`: a stable, non-secret id of this installation, 1-64 of
 *   `A-Z a-z 0-9 . _ -`. `SYNAPSE_AGENT_INSTANCE_ID`; otherwise 16 lower-case hex characters
 *   made on first use and kept in `agent_instance_id` of the config folder
 *   (`$SYNAPSE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/synapse`, else `~/.config/synapse`;
 *   folder 0700, file 0600): the same file the Python client reads and writes, never
 *   regenerated. When that folder cannot be used, no instance header is sent and one
 *   warning goes to stderr.
 * - `X-Synapse-Device`: `<host>; <OS> <release>; <program>/<version>`, at most 200 printable
 *   ASCII characters. `SYNAPSE_DEVICE` replaces it; set empty, no device header is sent.
 *
 * Invalid values throw ConfigurationError (code `provenance`).
 */

import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync,
         writeSync } from "node:fs";
import { homedir, hostname, release, type } from "node:os";
import { join } from "node:path";

import { ConfigurationError } from "./errors.js";
import { COMBINING } from "./combining.js";

export const AGENT_HEADER = "X-Synapse-Agent";
export const INSTANCE_HEADER = "X-Synapse-Agent-Instance";
export const DEVICE_HEADER = "X-Synapse-Device";
export const MAX_NAME = 64;
export const MAX_DEVICE = 200;
export const INSTANCE_FILE = "agent_instance_id";
export const DEFAULT_PROGRAM = "synapse-ts";
export const CLIENT_VERSION = "0.1.0";

const AGENT_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${MAX_NAME - 1}}$`);
const INSTANCE_PATTERN = new RegExp(`^[A-Za-z0-9._-]{1,${MAX_NAME}}$`);

export type Environment = Record<string, string | undefined>;

/** The three header values; null leaves a header out. */
export interface Provenance {
  agent: string;
  instance: string | null;
  device: string | null;
}

function provenanceError(message: string): ConfigurationError {
  return new ConfigurationError(message, "provenance");
}

/** A Python-like `repr` of a string, for messages that match the Python client's. */
export function pyRepr(value: unknown): string {
  if (typeof value === "string") {
    return value.includes("'") && !value.includes('"') ? `"${value}"` : `'${value.replace(/'/g, "\\'")}'`;
  }
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

export function checkAgent(value: string, setting = "SYNAPSE_AGENT"): string {
  if (!AGENT_PATTERN.test(value)) {
    throw provenanceError(`${setting} must be 1-${MAX_NAME} characters of A-Z, a-z, 0-9, '.', '_' `
      + `and '-', starting with a letter or a digit, not ${pyRepr(value)}.`);
  }
  return value;
}

export function checkInstance(value: string, setting = "SYNAPSE_AGENT_INSTANCE_ID"): string {
  if (!INSTANCE_PATTERN.test(value)) {
    throw provenanceError(`${setting} must be 1-${MAX_NAME} characters of A-Z, a-z, 0-9, '.', '_' `
      + `and '-', not ${pyRepr(value)}.`);
  }
  return value;
}

/** Any name (`Claude Desktop`) made to fit the agent header: each run of other characters
 * becomes one `-`, leading `.`, `_` and `-` go, cut to 64. null when nothing is left. */
export function agentNameFrom(name: unknown): string | null {
  if (typeof name !== "string") {
    return null;
  }
  const cleaned = name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[._-]+/, "")
    .slice(0, MAX_NAME).replace(/-+$/, "");
  return cleaned || null;
}

/** Whether a code point has a non-zero canonical combining class (Python's
 * `unicodedata.combining`). */
export function isCombining(point: number): boolean {
  let low = 0;
  let high = COMBINING.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [start, end] = COMBINING[middle]!;
    if (point < start) high = middle - 1;
    else if (point > end) low = middle + 1;
    else return true;
  }
  return false;
}

/** Python's `str.isspace()` for one character. */
export function isPySpace(char: string): boolean {
  return /^[\s\x1c-\x1f\x85]$/u.test(char) && char !== "\ufeff";
}

/** Python's `str.split()` joined by single spaces. */
export function collapseSpaces(text: string): string {
  return Array.from(text).map((char) => (isPySpace(char) ? " " : char)).join("")
    .split(" ").filter(Boolean).join(" ");
}

/** Free text as a header value: accents dropped (`é` → `e`), any other character outside
 * printable ASCII replaced by `?`, whitespace collapsed, cut to 200. */
export function cleanDevice(text: string): string {
  const kept = Array.from(text.normalize("NFKD")).map((char) => {
    if (char >= " " && char <= "~") return char;
    if (isCombining(char.codePointAt(0)!)) return "";
    return isPySpace(char) ? " " : "?";
  }).join("");
  return collapseSpaces(kept).slice(0, MAX_DEVICE);
}

/** `host; Linux 6.8.0; synapse-ts/0.1.0`. */
export function defaultDevice(program: string): string {
  const system = [type(), release()].filter(Boolean).join(" ");
  return cleanDevice(`${hostname() || "unknown"}; ${system || "unknown"}; ${program}/${CLIENT_VERSION}`);
}

/** `$SYNAPSE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/synapse`, else `~/.config/synapse`. */
export function configDir(env: Environment = process.env): string {
  const expand = (path: string) => (path === "~" || path.startsWith("~/") ? homedir() + path.slice(1) : path);
  if (env["SYNAPSE_CONFIG_DIR"]) return expand(env["SYNAPSE_CONFIG_DIR"]);
  if (env["XDG_CONFIG_HOME"]) return join(expand(env["XDG_CONFIG_HOME"]), "synapse");
  return join(homedir(), ".config", "synapse");
}

function sleepSync(milliseconds: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, milliseconds);
}

function readId(path: string): string {
  // An empty file is another process between creating and writing it (only where hard
  // links are missing): wait a moment for it.
  for (let attempt = 0; attempt < 50; attempt++) {
    const text = readFileSync(path, "latin1").trim();
    if (text) return checkInstance(text, path);
    sleepSync(20);
  }
  throw provenanceError(`${path} is empty.`);
}

function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null ? (error as { code?: string }).code : undefined;
}

/** Create `path` holding `value`, or leave it alone when it exists: written to a private
 * temporary file and hard-linked into place, so every process reads the same id; where
 * hard links are missing, created with O_EXCL. */
function writeNew(path: string, value: string): void {
  const temporary = join(path, "..", `.${INSTANCE_FILE}.${process.pid}.${randomBytes(4).toString("hex")}`);
  const descriptor = openSync(temporary, "wx", 0o600);
  try {
    try {
      writeSync(descriptor, value + "\n");
      fsyncSync(descriptor);
    } finally {
      closeSync(descriptor);
    }
    try {
      linkSync(temporary, path);
      return;
    } catch (error) {
      if (errorCode(error) === "EEXIST") return;
      // no hard links here (some network or FAT file systems)
    }
  } finally {
    try { unlinkSync(temporary); } catch { /* already gone */ }
  }
  let direct: number;
  try {
    direct = openSync(path, "wx", 0o600);
  } catch (error) {
    if (errorCode(error) === "EEXIST") return;
    throw error;
  }
  try {
    writeSync(direct, value + "\n");
  } finally {
    closeSync(direct);
  }
}

/** The id kept in `folder/agent_instance_id`, made (16 hex characters) on first use. */
export function storedInstanceId(folder: string): string {
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    isFolder = false;
  }
  if (!isFolder) mkdirSync(folder, { recursive: true, mode: 0o700 });
  const path = join(folder, INSTANCE_FILE);
  let exists = true;
  try {
    statSync(path);
  } catch {
    exists = false;
  }
  if (!exists) writeNew(path, randomBytes(8).toString("hex"));
  return readId(path);
}

let warned = false;

/** `SYNAPSE_AGENT_INSTANCE_ID` (checked; empty counts as unset), else the stored id; null
 * (and one warning on stderr) when the config folder cannot be used. */
export function instanceId(env: Environment = process.env): string | null {
  const given = env["SYNAPSE_AGENT_INSTANCE_ID"];
  if (given) return checkInstance(given);
  const folder = configDir(env);
  try {
    return storedInstanceId(folder);
  } catch (error) {
    if (!warned) {
      warned = true;
      const reason = error instanceof Error ? error.message : String(error);
      process.stderr.write(`synapse: warning: no agent instance id sent: cannot use ${join(folder, INSTANCE_FILE)} `
        + `(${reason}); set SYNAPSE_AGENT_INSTANCE_ID or SYNAPSE_CONFIG_DIR.\n`);
    }
    return null;
  }
}

/** For `program`: the environment's values, else the defaults. */
export function provenanceFromEnv(program: string = DEFAULT_PROGRAM, env: Environment = process.env): Provenance {
  const agent = env["SYNAPSE_AGENT"] ? checkAgent(env["SYNAPSE_AGENT"]) : checkAgent(program, "program");
  let device: string;
  const given = env["SYNAPSE_DEVICE"];
  if (given !== undefined) {
    if (/\p{Cc}/u.test(given)) throw provenanceError("SYNAPSE_DEVICE must not contain control characters.");
    device = cleanDevice(given);
    if (Array.from(collapseSpaces(given)).length > MAX_DEVICE) {
      throw provenanceError(`SYNAPSE_DEVICE has at most ${MAX_DEVICE} characters.`);
    }
  } else {
    device = defaultDevice(program);
  }
  return { agent, instance: instanceId(env), device: device || null };
}

export function provenanceHeaders(provenance: Provenance): Record<string, string> {
  const headers: Record<string, string> = { [AGENT_HEADER]: provenance.agent };
  if (provenance.instance) headers[INSTANCE_HEADER] = provenance.instance;
  if (provenance.device) headers[DEVICE_HEADER] = provenance.device;
  return headers;
}
