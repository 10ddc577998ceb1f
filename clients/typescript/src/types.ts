/**
 * The API's shapes, typed by hand from docs/api.md and the serializers (memories/api/
 * serializers): field names are the API's own (snake_case), so docs/api.md reads directly.
 * Answers carry more than is typed here only where the docs say "…"; index signatures keep
 * such fields reachable.
 */

export type Priority = "low" | "normal" | "high" | "critical";
export type MemoryType = "semantic" | "episodic" | "procedural" | "working" | "identity";
export type Source = "user" | "agent" | "tool" | "system";
export type SearchMode = "keyword" | "semantic" | "hybrid";
/** A timestamp in a request: RFC 3339 with an offset, or Unix epoch seconds. */
export type TimeInput = string | number;

/** The memory object (docs/api.md, "The memory object"). */
export interface Memory {
  id: string;
  mind_id: string;
  category: string;
  key: string;
  content: string;
  tags: string[];
  priority: Priority;
  source: Source;
  memory_type: MemoryType;
  path: string;
  occurred_at: string | null;
  verified: boolean;
  verified_at: string | null;
  confidence: number;
  expires_at: string | null;
  version: number;
  /** This version, to cite: `mem_…@vN`. */
  citation: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  superseded_at: string | null;
  superseded_by: string | null;
  [field: string]: unknown;
}

export interface Page<T> {
  count: number;
  limit: number;
  offset: number;
  results: T[];
}

export interface PageParams {
  limit?: number;
  offset?: number;
}

/** Where and what: the filters most routes share. */
export interface PlaceFilters {
  category?: string;
  tag?: string;
  path?: string;
  memory_type?: MemoryType;
}

export interface ListParams extends PageParams, PlaceFilters {
  priority?: Priority;
  source?: Source;
  verified?: boolean;
  updated_since?: TimeInput;
  include_expired?: boolean;
  ordering?: string;
}

/** The body of `POST /memory`. */
export interface StoreInput {
  category: string;
  content: string;
  key?: string;
  tags?: string[];
  priority?: Priority;
  confidence?: number;
  expires_at?: TimeInput | null;
  source?: Exclude<Source, "user">;
  memory_type?: MemoryType;
  path?: string;
  occurred_at?: TimeInput;
}

export interface StoreOptions {
  /** Sent as `Idempotency-Key`; one is generated per store (and kept across retries)
   * when left out. */
  idempotencyKey?: string;
  /** Another agent than the client's own for this one write (`X-Synapse-Agent`). */
  agent?: string;
  /** `X-Synapse-Agent-Instance` for this one write. */
  agentInstance?: string;
}

export interface StoreResult {
  id: string;
  status: "stored" | "updated" | "unchanged";
  version: number;
  citation: string;
  /** The Idempotency-Key sent. */
  idempotencyKey: string;
  /** True when the server answered a retry from its idempotency record
   * (`Idempotent-Replayed: true`): nothing was written. */
  replayed: boolean;
}

/** `PUT /memory/{id}`: at least one field. */
export type UpdateInput = Partial<StoreInput>;

export interface RecallParams extends PlaceFilters {
  q?: string;
  budget?: number;
}

export interface RecallResult {
  mind: { id: string; name: string };
  total: number;
  verified: number;
  unverified: number;
  tokens: number;
  omitted: number;
  left_out_low: { count: number; keys: string[]; not_scanned: number };
  memories: Memory[];
}

export interface SearchParams extends PlaceFilters {
  q: string;
  mode?: SearchMode;
  limit?: number;
  include_expired?: boolean;
  explain?: boolean;
}

export interface SemanticSearchParams extends PlaceFilters {
  q: string;
  threshold?: number;
  limit?: number;
  include_expired?: boolean;
}

export interface SearchHit extends Memory {
  score: number;
  snippet: string | null;
  /** Keyword and hybrid mode: whether it holds every word of the query; null in semantic mode. */
  matched_all: boolean | null;
  explain?: Record<string, number>;
}

export interface SearchResult {
  query: string;
  mode: SearchMode;
  matched: "all" | "some" | "none";
  ignored_terms: string[];
  count: number;
  results: SearchHit[];
}

export interface TimelineParams {
  path?: string;
  /** An episode id (`mem_…`) or a timestamp. */
  after?: TimeInput;
  before?: TimeInput;
  limit?: number;
}

export interface TimelineResult {
  path: string;
  count: number;
  has_more: boolean;
  results: Memory[];
}

export interface NeighboursResult {
  memory: string;
  before: Memory[];
  after: Memory[];
}

export interface Actor {
  type: "key" | "user" | "system" | "legacy";
  id: string | null;
  label: string;
}

/** One version of a memory (`GET /memory/{id}/versions`). */
export interface Version {
  version: number;
  category: string;
  key: string;
  content: string;
  tags: string[];
  priority: Priority;
  source: Source;
  confidence: number;
  expires_at: string | null;
  memory_type: MemoryType;
  path: string;
  occurred_at: string | null;
  recorded_by: Actor;
  actor: string;
  claimed_source: string;
  claimed_actor: string;
  /** What the writing request claimed in `X-Synapse-Agent` (blank when none). */
  agent: string;
  agent_instance: string;
  device: string;
  parent: number | null;
  reverted_from: number | null;
  created_at: string;
}

export interface VersionDetail extends Version {
  id: string;
  current_version: number;
}

export interface VersionsParams extends PageParams {
  agent?: string;
  instance?: string;
}

export interface VersionList {
  id: string;
  current_version: number;
  count: number;
  limit: number;
  offset: number;
  versions: Version[];
}

export interface VersionDiff {
  id: string;
  from: number;
  to: number;
  changes: Array<Record<string, unknown> & { field: string }>;
}

export interface DiffParams {
  /** The `cursor` of the previous diff (`tx…`) or a timestamp. */
  since?: TimeInput;
  limit?: number;
  path?: string;
  include_credentials?: boolean;
}

export interface SyncDiff {
  added: Record<string, unknown>[];
  updated: Record<string, unknown>[];
  deleted: Record<string, unknown>[];
  cursor: string;
  has_more: boolean;
}

export type SyncInput = Partial<SyncDiff> | { memories: Record<string, unknown>[] };

export interface SyncResult {
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
  stale: number;
  skipped_redacted: number;
  conflicts: Array<{ id: string | null; category: string; key: string; reason: string; message?: string }>;
}

export interface ExportParams {
  format?: "json" | "csv";
  path?: string;
  include_credentials?: boolean;
}

export interface AuditParams extends PageParams {
  action?: string;
  since?: TimeInput;
  memory?: string;
  agent?: string;
  instance?: string;
}

export interface AuditEvent {
  id: number | string;
  action: string;
  actor: Actor;
  recorded_by: Actor;
  memory_id: string | null;
  details: Record<string, unknown>;
  agent: string;
  agent_instance: string;
  device: string;
  created_at: string;
}

export interface BulkVersionItem {
  id: string;
  version: number;
}

export interface CompactInput {
  dry_run?: boolean;
  older_than?: string | number | null;
  category?: string | null;
  max_clusters?: number;
  min_cluster_size?: number;
}

export interface ResetInput {
  path: string;
  confirm: string;
  memory_type?: MemoryType;
  category?: string;
}

/** An answer this client does not type field by field. */
export type JsonObject = Record<string, unknown>;
