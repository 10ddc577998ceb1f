/**
 * The Synapse REST API from Node 20+ (its built-in fetch; no runtime dependencies): every
 * memory route of docs/api.md, with the Python client's (synapse_client/rest.py) rules for
 * credentials, provenance headers and errors, plus retries on 429 and 503.
 */

import { randomUUID } from "node:crypto";

import {
  ConfigurationError,
  NetworkError,
  SynapseError,
  errorFromResponse,
} from "./errors.js";
import { normalizeAgentEvent, toMemoryCandidate } from "./events.js";
import {
  AGENT_HEADER,
  DEFAULT_PROGRAM,
  INSTANCE_HEADER,
  CLIENT_VERSION,
  type Environment,
  type Provenance,
  checkAgent,
  checkInstance,
  cleanDevice,
  provenanceFromEnv,
  provenanceHeaders,
} from "./provenance.js";
import type {
  AuditEvent, AuditParams, BulkVersionItem, CompactInput, DiffParams, ExportParams, JsonObject,
  ListParams, Memory, NeighboursResult, Page, PageParams, PlaceFilters, RecallParams,
  RecallResult, ResetInput, SearchParams, SearchResult, SemanticSearchParams, StoreInput,
  StoreOptions, StoreResult, SyncDiff, SyncInput, SyncResult, TimeInput, TimelineParams,
  TimelineResult, UpdateInput, VersionDetail, VersionDiff, VersionList, VersionsParams,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8000";
export const USER_AGENT = `synapse-ts/${CLIENT_VERSION}`;

export interface RetryOptions {
  /** Retries after the first attempt (default 2; 0 turns retrying off). */
  maxRetries?: number;
  /** The longest wait the client accepts, in seconds (default 30): a `Retry-After` beyond
   * it is not waited for, the error is thrown at once. */
  maxDelaySeconds?: number;
  /** The wait when a 429/503 sends no `Retry-After`: 1 s, doubled on each retry. */
  baseDelaySeconds?: number;
  /** The statuses retried (default 429 and 503: nothing was done, the server says when to
   * come back). */
  statuses?: number[];
}

export interface SynapseClientOptions {
  /** The server, default `SYNAPSE_URL` or http://127.0.0.1:8000. */
  url?: string;
  /** A Mind Key (`mk_…`) or an OAuth access token, sent as `Authorization: Bearer …`;
   * default `SYNAPSE_MIND_KEY`. */
  key?: string;
  /** `X-Synapse-Agent`; default `SYNAPSE_AGENT`, else `program`. */
  agent?: string;
  /** `X-Synapse-Agent-Instance`; default `SYNAPSE_AGENT_INSTANCE_ID`, else the id stored in
   * the config folder (made once, shared with the Python client). null sends none. */
  instance?: string | null;
  /** `X-Synapse-Device`; default `SYNAPSE_DEVICE`, else `<host>; <OS> <release>;
   * <program>/<version>`. null or "" sends none. */
  device?: string | null;
  /** Names the default agent and the device line (default `synapse-ts`). */
  program?: string;
  /** Where the `SYNAPSE_…` variables are read (default `process.env`). */
  env?: Environment;
  /** `?mind=` on every memory route: for human credentials (a JWT) naming the mind. */
  mind?: string;
  /** Sent with every request (after the client's own). */
  headers?: Record<string, string>;
  /** Per attempt, in milliseconds (default 60,000). */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Another fetch (tests, proxies). */
  fetch?: typeof fetch;
  /** How the client waits between retries (tests replace it). */
  sleep?: (milliseconds: number) => Promise<void>;
}

type Query = Record<string, string | number | boolean | null | undefined>;

interface RequestOptions {
  query?: Query;
  body?: unknown;
  rawBody?: string | Uint8Array;
  contentType?: string;
  headers?: Record<string, string>;
  accept?: string;
}

/** Operation ids of the OpenAPI schema (tests/synapse/data/openapi_operations.txt) → the
 * method that calls each; the tests check that every memory operation is here. */
export const OPERATIONS: Readonly<Record<string, keyof SynapseClient>> = {
  memory_list: "list",
  memory_store: "store",
  memory_get: "get",
  memory_citation: "get",
  memory_update: "update",
  memory_delete: "trash",
  memory_restore: "restore",
  memory_recall: "recall",
  memory_search: "search",
  memory_semantic_search: "semanticSearch",
  memory_by_tag: "byTag",
  memory_related: "related",
  memory_related_alias: "related",
  memory_embed_batch: "embedBatch",
  memory_embed_batch_status: "embedStatus",
  memory_timeline: "timeline",
  memory_neighbours: "neighbours",
  memory_unverified: "unverified",
  memory_verify: "verify",
  memory_unverify: "unverify",
  memory_bulk_verify: "bulkVerify",
  memory_bulk_unverify: "bulkUnverify",
  memory_bulk_trash: "bulkTrash",
  memory_bulk_delete: "bulkDelete",
  memory_versions: "versions",
  memory_version: "version",
  memory_version_diff: "versionDiff",
  memory_revert: "revert",
  memory_trash: "listTrash",
  memory_expiring: "expiring",
  memory_reset: "reset",
  memory_diff: "diff",
  memory_sync: "sync",
  memory_export: "export",
  memory_import: "import",
  memory_audit: "audit",
  memory_stats: "stats",
  memory_contradictions: "contradictions",
  memory_compact: "compact",
  memory_uncompact: "uncompact",
  memory_health: "health",
};

const MEMORY_ID = /^mem_[A-Za-z0-9]+$/;
const CITATION = /^(mem_[A-Za-z0-9]+)@v([1-9][0-9]*)$/;

/** A memory id as a path segment; anything that is not an id is refused here. */
export function memoryPath(memoryId: string): string {
  const id = memoryId.trim();
  if (!MEMORY_ID.test(id)) {
    throw new ConfigurationError(`'${id}' is not a memory id (mem_…).`, "invalid");
  }
  return id;
}

function defaultSleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

function queryString(query: Query | undefined): string {
  const parts = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) parts.append(name, String(value));
  }
  const text = parts.toString();
  return text ? `?${text}` : "";
}

/** One Mind Key (or OAuth access token) talking to one Synapse server. */
export class SynapseClient {
  readonly url: string;
  readonly provenance: Provenance;
  private readonly key: string;
  private readonly mind: string | undefined;
  private readonly extraHeaders: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  private readonly fetchImpl: typeof fetch;
  private readonly sleep: (milliseconds: number) => Promise<void>;

  constructor(options: SynapseClientOptions = {}) {
    const env = options.env ?? process.env;
    const url = (options.url ?? env["SYNAPSE_URL"] ?? "") || DEFAULT_URL;
    const key = (options.key ?? env["SYNAPSE_MIND_KEY"] ?? "").trim();
    if (!key) {
      throw new ConfigurationError("No Mind Key: set SYNAPSE_MIND_KEY to a key (mk_…) of the mind to use, "
        + "or pass `key` (a Mind Key or an OAuth access token).");
    }
    if (!/^https?:\/\//.test(url)) {
      throw new ConfigurationError(`SYNAPSE_URL must start with http:// or https://, not '${url}'.`);
    }
    this.url = url.replace(/\/+$/, "");
    this.key = key;
    this.mind = options.mind;
    this.extraHeaders = options.headers ?? {};
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.retry = {
      maxRetries: options.retry?.maxRetries ?? 2,
      maxDelaySeconds: options.retry?.maxDelaySeconds ?? 30,
      baseDelaySeconds: options.retry?.baseDelaySeconds ?? 1,
      statuses: options.retry?.statuses ?? [429, 503],
    };
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.sleep = options.sleep ?? defaultSleep;
    this.provenance = SynapseClient.provenanceOf(options, env);
  }

  private static provenanceOf(options: SynapseClientOptions, env: Environment): Provenance {
    const program = options.program ?? DEFAULT_PROGRAM;
    // Only what the options leave open is read from the environment (and the config
    // folder, for the instance id).
    const fromEnv = provenanceFromEnv(program, {
      ...env,
      ...(options.agent !== undefined ? { SYNAPSE_AGENT: undefined } : {}),
      ...(options.instance !== undefined ? { SYNAPSE_AGENT_INSTANCE_ID: "unused" } : {}),
      ...(options.device !== undefined ? { SYNAPSE_DEVICE: "" } : {}),
    });
    return {
      agent: options.agent !== undefined ? checkAgent(options.agent, "agent") : fromEnv.agent,
      instance: options.instance === undefined ? fromEnv.instance
        : options.instance === null ? null : checkInstance(options.instance, "instance"),
      device: options.device === undefined ? fromEnv.device
        : options.device ? cleanDevice(options.device) || null : null,
    };
  }

  /** The headers sent with every request. */
  headers(): Record<string, string> {
    return {
      Authorization: `Bearer ${this.key}`,
      "User-Agent": USER_AGENT,
      Accept: "application/json",
      ...provenanceHeaders(this.provenance),
      ...this.extraHeaders,
    };
  }

  // -- Transport ----------------------------------------------------------------------------

  /** One request with the retry rule; an error answer becomes its SynapseError. */
  private async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const query = this.mind && path.startsWith("/memory") ? { mind: this.mind, ...options.query } : options.query;
    const target = `${this.url}${path}${queryString(query)}`;
    const headers: Record<string, string> = { ...this.headers(), ...(options.headers ?? {}) };
    if (options.accept) headers["Accept"] = options.accept;
    let body: string | Uint8Array | undefined;
    if (options.rawBody !== undefined) {
      body = options.rawBody;
      headers["Content-Type"] = options.contentType ?? "application/json";
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetchImpl(target, {
          method, headers, body, redirect: "manual", signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (error) {
        const name = error instanceof Error ? error.name : "";
        if (name === "TimeoutError" || name === "AbortError") {
          throw new NetworkError({ status: 0, code: "timeout", message: `Synapse at ${this.url} did not answer in time.` });
        }
        const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
        const reason = cause instanceof Error ? ((cause as { code?: string }).code ?? cause.name) : String(cause);
        throw new NetworkError({ status: 0, code: "unreachable", message: `Cannot reach Synapse at ${this.url}: ${reason}.` });
      }
      if (response.status >= 300 && response.status < 400) {
        await response.body?.cancel();
        // Typically http:// to a server that insists on https://: say where to point.
        throw new SynapseError({ status: response.status, code: "redirect", message: "Synapse answered with a "
          + `redirect to ${response.headers.get("Location")}; set SYNAPSE_URL to that server address.` });
      }
      if (response.status < 400) return response;
      const error = errorFromResponse(response.status, response.statusText, response.headers,
                                      await response.text(), path);
      const wait = this.retryDelay(error, attempt);
      if (wait === null) throw error;
      await this.sleep(wait * 1000);
    }
  }

  /** Seconds to wait before retrying, or null to give up. */
  private retryDelay(error: SynapseError, attempt: number): number | null {
    if (!this.retry.statuses.includes(error.status) || attempt >= this.retry.maxRetries) return null;
    const wait = error.retryAfter ?? this.retry.baseDelaySeconds * 2 ** attempt;
    return wait <= this.retry.maxDelaySeconds ? wait : null;
  }

  private async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.parse<T>(await this.send(method, path, options), path);
  }

  private async parse<T>(response: Response, path: string): Promise<T> {
    const text = await response.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new SynapseError({ status: response.status, code: "bad_response",
                               message: `Synapse answered ${path} with something that is not JSON.` });
    }
  }

  // -- Core -----------------------------------------------------------------------------------

  /** `POST /memory`: store a memory, or update the one with the same (category, key). An
   * `Idempotency-Key` is sent with every store (generated unless given) and kept across
   * retries, so a retried store is written once. */
  async store(input: StoreInput, options: StoreOptions = {}): Promise<StoreResult> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const headers: Record<string, string> = { "Idempotency-Key": idempotencyKey };
    if (options.agent) headers[AGENT_HEADER] = checkAgent(options.agent, "agent");
    if (options.agentInstance) headers[INSTANCE_HEADER] = checkInstance(options.agentInstance, "agent instance");
    const response = await this.send("POST", "/memory", { body: input, headers });
    const answer = await this.parse<Omit<StoreResult, "idempotencyKey" | "replayed">>(response, "/memory");
    return { ...answer, idempotencyKey, replayed: response.headers.get("Idempotent-Replayed") === "true" };
  }

  /** An agent event (a hook's payload) stored as a memory: normalizeAgentEvent, then
   * toMemoryCandidate, then a store sending the candidate's provenance. */
  async storeEvent(event: unknown, options: { source?: string; defaultAgentId?: string | null;
                                              idempotencyKey?: string } = {}): Promise<StoreResult> {
    const candidate = toMemoryCandidate(normalizeAgentEvent(event, options.source ?? "generic",
                                                            options.defaultAgentId ?? null));
    const { provenance, ...body } = candidate;
    return this.store(body as StoreInput, { idempotencyKey: options.idempotencyKey,
                                            agent: provenance.agent, agentInstance: provenance.instance });
  }

  /** `GET /memory/{id}`, or exactly one version: `get("mem_…@v2")` (a citation) or
   * `get(id, {version: 2})`. */
  async get(idOrCitation: string, options: { version?: number } = {}): Promise<Memory | VersionDetail> {
    const cited = CITATION.exec(idOrCitation.trim());
    if (cited) return this.json("GET", `/memory/${cited[1]}@v${cited[2]}`);
    return this.json("GET", `/memory/${memoryPath(idOrCitation)}`, { query: { version: options.version } });
  }

  /** `GET /memory`: current memories, filtered, one page. */
  async list(params: ListParams = {}): Promise<Page<Memory>> {
    return this.json("GET", "/memory", { query: { ...params } });
  }

  /** `PUT /memory/{id}`: a partial update; a change writes a new version. */
  async update(memoryId: string, fields: UpdateInput): Promise<Memory> {
    return this.json("PUT", `/memory/${memoryPath(memoryId)}`, { body: fields });
  }

  /** `DELETE /memory/{id}`: to the trash (restorable). */
  async trash(memoryId: string): Promise<Memory> {
    return this.json("DELETE", `/memory/${memoryPath(memoryId)}`);
  }

  /** The same as trash (`DELETE /memory/{id}`), by the HTTP method's name. */
  async delete(memoryId: string): Promise<Memory> {
    return this.trash(memoryId);
  }

  /** `POST /memory/{id}/restore`: out of the trash. */
  async restore(memoryId: string): Promise<Memory> {
    return this.json("POST", `/memory/${memoryPath(memoryId)}/restore`);
  }

  /** `GET /memory/recall?format=json`: the memories within the budget, most important first. */
  async recall(params: RecallParams = {}): Promise<RecallResult> {
    return this.json("GET", "/memory/recall", { query: { ...params, format: "json" } });
  }

  /** `GET /memory/recall` as text, the form an agent reads at session start. */
  async recallText(params: RecallParams = {}): Promise<string> {
    const response = await this.send("GET", "/memory/recall", { query: { ...params }, accept: "text/plain" });
    return response.text();
  }

  async health(): Promise<JsonObject> {
    return this.json("GET", "/memory/health");
  }

  // -- Search -----------------------------------------------------------------------------------

  /** `GET /memory/search`: keyword (default), semantic or hybrid. */
  async search(params: SearchParams): Promise<SearchResult> {
    return this.json("GET", "/memory/search", { query: { ...params } });
  }

  async semanticSearch(params: SemanticSearchParams): Promise<SearchResult> {
    return this.json("GET", "/memory/semantic-search", { query: { ...params } });
  }

  async byTag(params: { tag: string } & PlaceFilters & PageParams): Promise<Page<Memory> & { tag: string }> {
    return this.json("GET", "/memory/by-tag", { query: { ...params } });
  }

  async related(memoryId: string, params: { limit?: number } = {}): Promise<{ id: string; count: number; results: Memory[] }> {
    return this.json("GET", `/memory/${memoryPath(memoryId)}/related`, { query: { ...params } });
  }

  async embedBatch(params: { limit?: number } = {}): Promise<JsonObject> {
    return this.json("POST", "/memory/embed-batch", { body: params });
  }

  async embedStatus(): Promise<JsonObject> {
    return this.json("GET", "/memory/embed-batch-status");
  }

  // -- Episodes -------------------------------------------------------------------------------

  /** `GET /memory/timeline`: one page of the episodes at exactly `path`, in order. */
  async timeline(params: TimelineParams = {}): Promise<TimelineResult> {
    return this.json("GET", "/memory/timeline", { query: { ...params } });
  }

  /** `GET /memory/{id}/neighbours`: the episodes just before and after one episode. */
  async neighbours(memoryId: string, params: { n?: number } = {}): Promise<NeighboursResult> {
    return this.json("GET", `/memory/${memoryPath(memoryId)}/neighbours`, { query: { ...params } });
  }

  // -- Verification (verify and the bulk routes are for humans: a Mind Key gets 403) ----------

  async unverified(params: PageParams & { path?: string; memory_type?: string } = {}): Promise<Page<Memory>> {
    return this.json("GET", "/memory/unverified", { query: { ...params } });
  }

  async verify(memoryId: string, version?: number): Promise<Memory> {
    return this.json("POST", `/memory/${memoryPath(memoryId)}/verify`, { body: version === undefined ? {} : { version } });
  }

  async unverify(memoryId: string): Promise<Memory> {
    return this.json("POST", `/memory/${memoryPath(memoryId)}/unverify`, { body: {} });
  }

  async bulkVerify(memories: BulkVersionItem[]): Promise<{ count: number; verified: string[] }> {
    return this.json("POST", "/memory/bulk-verify", { body: { memories } });
  }

  async bulkUnverify(memories: BulkVersionItem[]): Promise<{ count: number; unverified: string[] }> {
    return this.json("POST", "/memory/bulk-unverify", { body: { memories } });
  }

  async bulkTrash(memories: BulkVersionItem[]): Promise<{ count: number; trashed: string[] }> {
    return this.json("POST", "/memory/bulk-trash", { body: { memories } });
  }

  async bulkDelete(ids: string[]): Promise<{ count: number; deleted: string[]; not_found: string[] }> {
    return this.json("POST", "/memory/bulk-delete", { body: { ids } });
  }

  // -- Lifecycle ------------------------------------------------------------------------------

  /** `GET /memory/{id}/versions`: every version, oldest first, with who wrote each
   * (`recorded_by`) and what its request claimed (`agent`, `agent_instance`, `device`). */
  async versions(memoryId: string, params: VersionsParams = {}): Promise<VersionList> {
    return this.json("GET", `/memory/${memoryPath(memoryId)}/versions`, { query: { ...params } });
  }

  async version(memoryId: string, version: number): Promise<VersionDetail> {
    return this.json("GET", `/memory/${memoryPath(memoryId)}/versions/${Math.trunc(version)}`);
  }

  /** `GET /memory/{id}/diff?from=&to=`: what changed between two versions. */
  async versionDiff(memoryId: string, from: number, to: number): Promise<VersionDiff> {
    return this.json("GET", `/memory/${memoryPath(memoryId)}/diff`, { query: { from, to } });
  }

  async revert(memoryId: string, version: number): Promise<Memory> {
    return this.json("POST", `/memory/${memoryPath(memoryId)}/revert`, { body: { version } });
  }

  async listTrash(params: PageParams = {}): Promise<Page<Memory>> {
    return this.json("GET", "/memory/trash", { query: { ...params } });
  }

  async expiring(params: PageParams & { within?: string | number; path?: string; memory_type?: string } = {}
  ): Promise<{ count: number; within: number; results: Memory[] }> {
    return this.json("GET", "/memory/expiring", { query: { ...params } });
  }

  /** `POST /memory/reset`: purge a path for good (the owner, or a key they allowed). */
  async reset(input: ResetInput): Promise<JsonObject> {
    return this.json("POST", "/memory/reset", { body: input });
  }

  // -- Sync, export, import ---------------------------------------------------------------------

  /** `GET /memory/diff`: what changed since a cursor, for another instance. */
  async diff(params: DiffParams = {}): Promise<SyncDiff> {
    return this.json("GET", "/memory/diff", { query: { ...params } });
  }

  /** `POST /memory/sync`: apply a diff (or `{memories: […]}`) with the later-wins rule. */
  async sync(changes: SyncInput): Promise<SyncResult> {
    return this.json("POST", "/memory/sync", { body: changes });
  }

  /** `GET /memory/mind-export` as a stream (a full JSON backup, or CSV). */
  async exportStream(params: ExportParams = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.send("GET", "/memory/mind-export", { query: { ...params },
      accept: params.format === "csv" ? "text/csv" : "application/json" });
    if (response.body === null) {
      throw new NetworkError({ status: 0, code: "interrupted", message: "The export had no body." });
    }
    return response.body;
  }

  /** `GET /memory/mind-export` read whole: the backup's text (JSON or CSV). */
  async export(params: ExportParams = {}): Promise<string> {
    const stream = await this.exportStream(params);
    try {
      return await new Response(stream).text();
    } catch (error) {
      throw new NetworkError({ status: 0, code: "interrupted", message: `The export from ${this.url} broke off: `
        + `${error instanceof Error ? error.message : String(error)}; nothing complete was received.` });
    }
  }

  /** `POST /memory/mind-import` with a backup made by export (its text, bytes or parsed
   * object): a restore into an empty mind, a merge otherwise. */
  async import(backup: string | Uint8Array | JsonObject): Promise<JsonObject> {
    const rawBody = typeof backup === "string" || backup instanceof Uint8Array ? backup : JSON.stringify(backup);
    return this.json("POST", "/memory/mind-import", { rawBody, contentType: "application/json" });
  }

  // -- Insight --------------------------------------------------------------------------------

  async audit(params: AuditParams = {}): Promise<Page<AuditEvent>> {
    return this.json("GET", "/memory/audit", { query: { ...params } });
  }

  async stats(params: { path?: string; memory_type?: string } = {}): Promise<JsonObject> {
    return this.json("GET", "/memory/stats", { query: { ...params } });
  }

  async contradictions(params: { within?: TimeInput; limit?: number } = {}): Promise<{ count: number; results: JsonObject[] }> {
    return this.json("GET", "/memory/contradictions", { query: { ...params } });
  }

  async compact(input: CompactInput = {}): Promise<JsonObject> {
    return this.json("POST", "/memory/compact", { body: input });
  }

  async uncompact(memoryId: string): Promise<Memory[]> {
    return this.json("POST", `/memory/${memoryPath(memoryId)}/uncompact`);
  }
}

