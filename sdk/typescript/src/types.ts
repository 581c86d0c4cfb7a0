// The library's public types: a worker's configuration, a job type and its
// handler's view of one attempt. Types only: every module may import them
// without an import cycle.

import type { Writable } from "node:stream";

/** Log levels of a Logger. */
export type LogLevel = "debug" | "info" | "warn" | "error";
/** Receives the library's structured log lines. */
export type Logger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** How an attempt ended, for WorkerConfig.onAttempt. */
export type Outcome = "succeeded" | "retry_or_failed" | "lost" | "given_back" | "unrecorded";

/** Connects a worker process to a jobgate deployment. */
export interface WorkerConfig {
  /** The deployment's NATS servers. Default nats://127.0.0.1:4222. */
  servers?: string | string[];
  /** NATS login; for the embedded server, `jobgate nats-user --worker --type T` prints it. */
  user?: string;
  pass?: string;
  /** Names this process in job records ([A-Za-z0-9_.:@-]{1,128}). Default host-pid-random. */
  name?: string;
  /** The credential id the requests name. Default: derived from user. */
  credential?: string;
  /** Longest time between two beats of a running job (jobgate may ask for shorter). Default 5000 ms. */
  heartbeatMs?: number;
  /** How long one request for work waits. Default 5000 ms, at most 10000. */
  pullWaitMs?: number;
  /** How long stop() lets running jobs finish before it aborts them (reason "shutdown") and gives their jobs back. Default 10000 ms. */
  drainTimeoutMs?: number;
  /** Bounds the first connection. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** Extra slots per type that take only a tenant with nothing running here, while every regular slot is busy. Default 1; -1: none. */
  newcomerSlots?: number;
  /** Structured logs. Default: discarded. */
  logger?: Logger;
  /** Called when an attempt ends. */
  onAttempt?: (type: string, outcome: Outcome, tookMs: number) => void;
}

/** The context of one attempt. */
export interface WorkContext {
  /** Aborts on cancel, lost claim, timeout or shutdown; signal.reason is an AbortedError. */
  signal: AbortSignal;
  /** Logs with the job's id and attempt. */
  log: Logger;
}

/** One attempt's view of a job. */
export interface Job<P> {
  readonly id: string;
  readonly type: string;
  readonly tenant: string;
  readonly requester: string;
  /** This attempt's number, from 1, of attempts. */
  readonly attempt: number;
  readonly attempts: number;
  /** When the job was admitted. */
  readonly createdAt: Date;
  /** The params, validated against the type's schema, its defaults applied. */
  readonly params: P;
  /**
   * The W3C trace context (traceparent, tracestate) of the attempt's span, when the job is
   * traced: make the handler's spans its children (with @opentelemetry/api, extract it through
   * the W3C propagator) and the job's trace runs through them. Absent when the job is not traced.
   */
  readonly traceparent?: string;
  readonly tracestate?: string;
  /** The same signal as the context's. */
  readonly signal: AbortSignal;
  /** Reports how far the attempt is; never blocks (sent with beats). */
  progress(done: number, total: number, unit: string): void;
  /** The result, streamed to jobgate as it is written (Buffer or string chunks). */
  readonly output: Writable;
  /** Writes one chunk of the result and resolves once it was taken (backpressure). */
  write(chunk: Uint8Array | string): Promise<void>;
}

/** A type's retry policy (docs/workers.md, "Flow control per type"); 0 or absent: the default. */
export interface RetryPolicy {
  initialSeconds?: number;
  maxSeconds?: number;
  multiplier?: number;
}

/** A concurrency key of a type and its limit (1 to 1000). */
export interface ConcurrencyKey {
  key: "tenant" | "requester" | `/params/${string}`;
  limit: number;
}

/** A type's rate limit: a token bucket for the whole type or per tenant. */
export interface RateLimit {
  perSecond: number;
  /** Default one second's worth. */
  burst?: number;
  /** Default "type". */
  key?: "type" | "tenant";
}

/** A job type and its handler. */
export interface TypeSpec<P> {
  /** [a-z][a-z0-9_]{0,63}: what clients send as "type". */
  name: string;
  description?: string;
  /** The JSON Schema (2020-12) of the params: bounded strings and arrays, closed objects. */
  schema: object;
  /** The time budget of one attempt, whole seconds. Default 120. */
  timeoutSeconds?: number;
  /** Attempts a job gets. Default 3. */
  attempts?: number;
  /** Bounds one job's output. Default 64 MiB. */
  maxResultBytes?: number;
  /** Content type of the output. Default application/octet-stream. */
  contentType?: string;
  /** Jobs of this type this process runs at once. Default 2. */
  concurrency?: number;
  /**
   * Spaces a failed job's next attempts: a pause drawn uniformly from
   * [0, min(maxSeconds, initialSeconds * multiplier^(n-1))). Default 30 s, 3600 s, 2.
   */
  retry?: RetryPolicy;
  /**
   * At most `limit` jobs of the type with the same key value run at once
   * across the whole deployment: key "tenant", "requester" or a JSON
   * Pointer into the params ("/params/customer_id"). At most 4.
   */
  concurrencyKeys?: ConcurrencyKey[];
  /** Attempts of the type started a second across the deployment. */
  rateLimit?: RateLimit;
  /**
   * Does one attempt. Returning succeeds the job with what was written to
   * job.output; throwing retries it with backoff while attempts remain,
   * unless the error is a Permanent (or a non-retryable Failure).
   */
  work: (job: Job<P>, ctx: WorkContext) => Promise<void> | void;
}
