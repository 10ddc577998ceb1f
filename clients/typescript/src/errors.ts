/**
 * Errors as typed exceptions, built from the API's one error shape (docs/api.md, "Errors"):
 *
 *     {"error": {"status": 400, "code": "invalid", "message": "…", "fields": {"tags": ["…"]}}}
 *
 * `SynapseError` is the base; each status family has its subclass, so callers write
 * `catch (error) { if (error instanceof NotFoundError) … }`. The key or token never
 * appears in a message.
 */

/** The fields of the error shape, plus what the answer's headers said. */
export interface ErrorDetails {
  status: number;
  code: string;
  message: string;
  fields?: Record<string, unknown>;
  /** Seconds the server asked to wait (`Retry-After` on 429 and 503). */
  retryAfter?: number;
  /** The whole `error` object as the server sent it (e.g. `quota` on `quota_exceeded`). */
  body?: Record<string, unknown>;
}

/** The API refused a request, or could not be reached (`status` 0). */
export class SynapseError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fields: Record<string, unknown>;
  readonly retryAfter: number | undefined;
  readonly body: Record<string, unknown>;

  constructor(details: ErrorDetails) {
    super(details.message);
    this.name = new.target.name;
    this.status = details.status;
    this.code = details.code;
    this.fields = details.fields ?? {};
    this.retryAfter = details.retryAfter;
    this.body = details.body ?? {};
  }

  /** The message, the other fields' problems, and `[HTTP status code]`, as the Python
   * client prints it. */
  override toString(): string {
    const details = Object.entries(this.fields).map(([name, problems]) =>
      Array.isArray(problems) ? `${name}: ${problems.map(String).join("; ")}` : `${name}: ${String(problems)}`);
    const extra = details.filter((detail) => !this.message.includes(detail));
    const text = extra.length ? `${this.message} (${extra.join("; ")})` : this.message;
    return this.status ? `${text} [HTTP ${this.status} ${this.code}]` : text;
  }
}

/** 400: a field or parameter breaks a rule (`fields` names each), or the body is not JSON. */
export class ValidationError extends SynapseError {}

/** 401: no credentials, or a key/token that is malformed, unknown, revoked or expired. */
export class AuthenticationError extends SynapseError {}

/** 403: these credentials may not do this (a read key writing, a path outside a
 * path-scoped key, a human-only route). */
export class PermissionDeniedError extends SynapseError {}

/** 403 `quota_exceeded`: the write would take the mind over a quota; not a credentials
 * problem. `quota` is `{name, limit, used, adding}`. */
export class QuotaExceededError extends SynapseError {
  get quota(): Record<string, unknown> | undefined {
    const quota = this.body["quota"];
    return quota && typeof quota === "object" ? (quota as Record<string, unknown>) : undefined;
  }
}

/** 404: no such memory (or version, or episode) within reach of these credentials. */
export class NotFoundError extends SynapseError {}

/** 409: a key taken, a memory in the trash, an `Idempotency-Key` reused with another body,
 * a verification pinned to an old version. */
export class ConflictError extends SynapseError {}

/** 429: over a rate limit; `retryAfter` says how many seconds to wait. */
export class RateLimitedError extends SynapseError {}

/** 5xx: a server fault, or (503) the database is unavailable; `retryAfter` when sent. */
export class ServerError extends SynapseError {}

/** The server could not be reached, did not answer in time, or broke off (`status` 0;
 * `code` is `unreachable`, `timeout` or `interrupted`). */
export class NetworkError extends SynapseError {}

/** The client is not configured (no key, a URL that is not http(s), an id that is not a
 * memory id, an invalid provenance value). */
export class ConfigurationError extends SynapseError {
  constructor(message: string, code = "configuration") {
    super({ status: 0, code, message });
  }
}

/** `Retry-After` as seconds: a number of seconds or an HTTP date; undefined otherwise. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") {
    return undefined;
  }
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    return Number(text);
  }
  const moment = Date.parse(text);
  return Number.isNaN(moment) ? undefined : Math.max(0, Math.ceil((moment - now) / 1000));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The subclass for an HTTP status (and code). */
export function errorClassFor(status: number, code: string): typeof SynapseError {
  if (status === 400) return ValidationError;
  if (status === 401) return AuthenticationError;
  if (status === 403) return code === "quota_exceeded" ? QuotaExceededError : PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitedError;
  if (status >= 500) return ServerError;
  return SynapseError;
}

/**
 * An error answer → its exception. `text` is the body as received; an answer without
 * the error shape (a proxy's HTML page) still becomes an error, described plainly.
 */
export function errorFromResponse(status: number, statusText: string, headers: Headers,
                                  text: string, path: string): SynapseError {
  let code = "http_error";
  let message = `${status} ${statusText || "error"} from ${path}`;
  let fields: Record<string, unknown> | undefined;
  let body: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    const error = isRecord(parsed) ? parsed["error"] : undefined;
    if (isRecord(error) && error["code"] !== undefined && error["message"] !== undefined) {
      code = String(error["code"]);
      message = String(error["message"]);
      fields = isRecord(error["fields"]) ? error["fields"] : undefined;
      body = error;
    }
  } catch {
    // not JSON: keep the plain description
  }
  const retryAfter = parseRetryAfter(headers.get("Retry-After"));
  if (status === 429 && retryAfter !== undefined) {
    message += ` Retry after ${retryAfter} seconds.`;
  }
  const Kind = errorClassFor(status, code);
  return new Kind({ status, code, message, fields, retryAfter, body });
}
