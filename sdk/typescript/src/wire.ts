// The worker protocol, version 1 (docs/protocol.md): subjects, messages and
// limits, as internal/wire has them for Go.

import { createHash } from "node:crypto";

/** The protocol's version, the second token of every subject. */
export const VERSION = "w1";
/** The prefix of every request subject. */
export const ROOT = `jobgate.${VERSION}.`;

/** A request's body is at most this long. */
export const MAX_REQUEST = 128 << 10;
/** The largest chunk of a result upload. */
export const CHUNK_SIZE = 256 << 10;
/** A next request is held at most this long (ms). */
export const MAX_WAIT_MS = 10_000;
/** A newcomer request names at most this many running tenants. */
export const MAX_RUNNING_TENANTS = 1024;
/** A hello's busy (optional) is at most this: a type's slots and its newcomer slots. */
export const MAX_BUSY = 2048;

/** Chunk headers. */
export const HEADER_SEQ = "Jobgate-Seq";
export const HEADER_LAST = "Jobgate-Last";

export type Op =
  | "declare"
  | "hello"
  | "bye"
  | "next"
  | "beat"
  | "open"
  | "done"
  | "fail"
  | "giveback";

/** Error codes of a reply. */
export type Code =
  | "bad_request"
  | "forbidden"
  | "invalid"
  | "lost"
  | "too_large"
  | "unavailable"
  | "throttled"
  | "unknown";

/** Failure kinds a worker reports (jobgate chooses the category). */
export type Kind =
  | "error"
  | "permanent"
  | "timeout"
  | "too_large"
  | "internal"
  | "budget"
  | "panic";

export function subject(cred: string, type: string, op: Op): string {
  return `${ROOT}${cred}.${type}.${op}`;
}

export function uploadSubject(cred: string, type: string, host: string, id: string): string {
  return `${ROOT}${cred}.${type}.up.${host}.${id}`;
}

/** The reply-subject prefix a credential's connections must use. */
export function inboxPrefix(cred: string): string {
  return `_JG_W.${cred}`;
}

/**
 * The id of the credential whose NATS user name is user: the first 16 hex
 * digits of SHA-256("jobgate worker credential v1\0" + user).
 */
export function credentialID(user: string): string {
  return createHash("sha256")
    .update("jobgate worker credential v1\x00" + user, "utf8")
    .digest("hex")
    .slice(0, 16);
}

const typeNameRE = /^[a-z][a-z0-9_]{0,63}$/;
const credRE = /^(jobgate|[0-9a-f]{16})$/;
const tokenRE = /^[A-Za-z0-9_-]{1,64}$/;
const workerNameRE = /^[A-Za-z0-9_.:@-]{1,128}$/;

export const validTypeName = (s: string): boolean => typeNameRE.test(s);
export const validCredential = (s: string): boolean => credRE.test(s);
export const validToken = (s: string): boolean => tokenRE.test(s);
export const validWorkerName = (s: string): boolean => workerNameRE.test(s);

export interface WireErrorBody {
  code: Code | string;
  message: string;
  /** On some throttled refusals (a declaration past its credential's limit
   * of changes): how long to wait before asking again. */
  retry_after_ms?: number;
}

export interface UploadTarget {
  host: string;
  id: string;
  object: string;
}

export interface StoredResult {
  object: string;
  size: number;
  sha256: string;
}

export interface Assignment {
  key: string;
  id: string;
  type: string;
  tenant: string;
  requester: string;
  attempt: number;
  attempts: number;
  created_at: string;
  params: unknown;
  token: string;
  timeout_ms: number;
  beat_ms: number;
  /** For how long from this answer the attempt is the worker's for sure
   * (added within v1; absent from an older jobgate: no lease). */
  lease_ms?: number;
  max_result_bytes: number;
  traceparent?: string;
  tracestate?: string;
}

export interface Reply {
  error?: WireErrorBody;
  job?: Assignment;
  upload?: UploadTarget;
  stored?: StoredResult;
  canceled?: boolean;
  /** Set on an upload refused for the result storage or the tenant's result
   * quota when jobgate has failed the job itself (budget_exceeded). */
  failed?: boolean;
  /** A beat's ok: for how long from when the beat was sent the attempt is
   * the worker's for sure (added within v1; absent: no lease). */
  lease_ms?: number;
}

export interface Declaration {
  name: string;
  description?: string;
  schema: unknown;
  timeout_seconds: number;
  attempts: number;
  max_result_bytes: number;
  content_type: string;
  retry?: { initial_seconds?: number; max_seconds?: number; multiplier?: number };
  concurrency?: { key: string; limit: number }[];
  rate_limit?: { per_second: number; burst?: number; key?: string };
}

export interface Progress {
  done: number;
  total: number;
  unit: string;
}

export interface Held {
  key: string;
  token: string;
}

/** A refused request: the reply's error. */
export class WireError extends Error {
  readonly code: string;
  /** Set on a lost beat whose job its owner canceled. */
  readonly canceled: boolean;
  /** Set on a refused upload whose job jobgate failed itself: report nothing. */
  readonly failed: boolean;
  /** The wait a throttled refusal asks for before the next request, in ms (0: none). */
  readonly retryAfterMs: number;
  constructor(code: string, message: string, canceled = false, failed = false, retryAfterMs = 0) {
    super(`${code}: ${message}`);
    this.name = "WireError";
    this.code = code;
    this.canceled = canceled;
    this.failed = failed;
    this.retryAfterMs = retryAfterMs;
  }
}
