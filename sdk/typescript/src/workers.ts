// Workers runs the registered job types of one process over the worker
// protocol v1 (docs/protocol.md), as pkg/worker does in Go.

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Writable } from "node:stream";
import {
  connect,
  PermissionViolationError,
  RequestError,
  TimeoutError,
  type MsgHdrs,
  type NatsConnection,
} from "@nats-io/transport-node";

import { runAttempt, type Attempt } from "./attempt.js";
import {
  credentialID,
  inboxPrefix,
  MAX_BUSY,
  MAX_RUNNING_TENANTS,
  MAX_WAIT_MS,
  subject,
  validCredential,
  validTypeName,
  validWorkerName,
  WireError,
  type Assignment,
  type Declaration,
  type Op,
  type Reply,
} from "./wire.js";
import { jitter, sleep, within } from "./util.js";

/** Log levels of a Logger. */
export type LogLevel = "debug" | "info" | "warn" | "error";
/** Receives the library's structured log lines. */
export type Logger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** How an attempt ended, for WorkersConfig.onAttempt. */
export type Outcome = "succeeded" | "retry_or_failed" | "lost" | "given_back" | "unrecorded";

/** Connects a worker process to a jobgate deployment. */
export interface WorkersConfig {
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
   * Does one attempt. Returning succeeds the job with what was written to
   * job.output; throwing retries it with backoff while attempts remain,
   * unless the error is a Permanent (or a non-retryable Failure).
   */
  work: (job: Job<P>, ctx: WorkContext) => Promise<void> | void;
}

/** A registered type, its params type erased. */
export class TypeRunner {
  readonly decl: Declaration;
  readonly concurrency: number;
  readonly work: (job: Job<unknown>, ctx: WorkContext) => Promise<void> | void;
  /** Regular slots running a job. */
  busy = 0;
  /** Jobs running here per tenant. */
  readonly running = new Map<string, number>();

  constructor(decl: Declaration, concurrency: number, work: (job: Job<unknown>, ctx: WorkContext) => Promise<void> | void) {
    this.decl = decl;
    this.concurrency = concurrency;
    this.work = work;
  }

  started(tenant: string): void {
    this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1);
  }

  ended(tenant: string): void {
    const n = (this.running.get(tenant) ?? 1) - 1;
    if (n <= 0) {
      this.running.delete(tenant);
    } else {
      this.running.set(tenant, n);
    }
  }

  /** The type's jobs running here, in regular and newcomer slots (hello's busy). */
  runningJobs(): number {
    let n = 0;
    for (const c of this.running.values()) n += c;
    return Math.min(n, MAX_BUSY);
  }

  /** The tenants a newcomer slot must leave out, or null while a regular slot is free. */
  newcomerRequest(): string[] | null {
    if (this.busy < this.concurrency) {
      return null;
    }
    return [...this.running.keys()].slice(0, MAX_RUNNING_TENANTS);
  }
}

/** Options of one request. */
export interface CallOptions {
  /** The request's own timeout. Default 10000 ms. */
  timeoutMs?: number;
  /** Try again, jittered, on no responders, timeouts and unavailable/throttled refusals, until signal aborts. */
  patient?: boolean;
  signal?: AbortSignal;
  headers?: MsgHdrs;
}

/** Bounds one request outside a next request's wait. */
export const OP_TIMEOUT_MS = 10_000;

/** Bounds the wait a refusal's retry_after_ms may ask for. */
const MAX_RETRY_AFTER_MS = 3_600_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A transport failure worth trying again (no responders, a timeout, a
 * disconnect); a permissions violation (a credential for other types, an
 * inbox prefix not the credential's) is not.
 */
export function transient(err: unknown): boolean {
  if (err instanceof RequestError) {
    return !(err.cause instanceof PermissionViolationError || /permissions violation/i.test(err.message));
  }
  return err instanceof TimeoutError;
}

/** A refusal that says to try again later. */
export function unavailable(err: unknown): boolean {
  return err instanceof WireError && (err.code === "unavailable" || err.code === "throttled");
}

/** Workers runs the registered types of one process. */
export class Workers {
  readonly name: string;
  readonly credential: string;
  /** @internal */ readonly cfg: Required<Omit<WorkersConfig, "user" | "pass" | "onAttempt" | "credential" | "name">> &
    Pick<WorkersConfig, "user" | "pass" | "onAttempt">;
  /** @internal */ readonly log: Logger;
  private readonly types: TypeRunner[] = [];
  private nc: NatsConnection | null = null;
  private startedFlag = false;
  private stopping = false;
  private stopPromise: Promise<void> | null = null;
  /** Aborts when stop() begins: pull loops stop asking, sleeps end. */
  private readonly stopCtl = new AbortController();
  /** @internal Attempts under way (aborted with "shutdown" when the drain is over). */
  readonly attempts = new Set<Attempt>();
  /** @internal Set when stop() gave up on attempts that would not end. */
  hard = false;
  private loops: Promise<void>[] = [];
  private helloTimer: NodeJS.Timeout | null = null;
  private startedAt = new Date();

  constructor(cfg: WorkersConfig = {}) {
    const user = cfg.user ?? "";
    this.name = cfg.name ?? defaultName();
    this.credential = cfg.credential ?? credentialID(user);
    this.log = cfg.logger ?? (() => {});
    this.cfg = {
      servers: cfg.servers ?? "nats://127.0.0.1:4222",
      user: cfg.user,
      pass: cfg.pass,
      heartbeatMs: cfg.heartbeatMs ?? 5000,
      pullWaitMs: cfg.pullWaitMs ?? 5000,
      drainTimeoutMs: cfg.drainTimeoutMs ?? 10_000,
      connectTimeoutMs: cfg.connectTimeoutMs ?? 5000,
      newcomerSlots: cfg.newcomerSlots === undefined || cfg.newcomerSlots === 0 ? 1 : Math.max(cfg.newcomerSlots, 0),
      logger: this.log,
      onAttempt: cfg.onAttempt,
    };
    const errs: string[] = [];
    if (!validWorkerName(this.name)) errs.push(`name ${JSON.stringify(this.name)} must match [A-Za-z0-9_.:@-]{1,128}`);
    if (!validCredential(this.credential)) errs.push(`credential ${JSON.stringify(this.credential)} is not a credential id`);
    const c = this.cfg;
    if (!(c.heartbeatMs > 0 && c.pullWaitMs > 0 && c.drainTimeoutMs > 0 && c.connectTimeoutMs > 0)) {
      errs.push("heartbeatMs, pullWaitMs, drainTimeoutMs and connectTimeoutMs must be positive");
    }
    if (c.pullWaitMs > MAX_WAIT_MS) errs.push(`pullWaitMs must be at most ${MAX_WAIT_MS}`);
    if (c.newcomerSlots > 64) errs.push("newcomerSlots must be at most 64");
    if (errs.length > 0) {
      throw new Error(`worker: ${errs.join("; ")}`);
    }
  }

  /** Adds a type before start(). */
  register<P = unknown>(spec: TypeSpec<P>): void {
    if (this.startedFlag) {
      throw new Error("worker: already started");
    }
    if (typeof spec.work !== "function") {
      throw new Error(`worker: type ${JSON.stringify(spec.name)}: work is required`);
    }
    if (!validTypeName(spec.name)) {
      throw new Error(`worker: type name ${JSON.stringify(spec.name)} must match [a-z][a-z0-9_]{0,63}`);
    }
    if (this.types.some((t) => t.decl.name === spec.name)) {
      throw new Error(`worker: type ${JSON.stringify(spec.name)} registered twice`);
    }
    const concurrency = spec.concurrency ?? 2;
    const timeoutSeconds = spec.timeoutSeconds ?? 120;
    const attempts = spec.attempts ?? 3;
    const maxResultBytes = spec.maxResultBytes ?? 64 << 20;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024) {
      throw new Error(`worker: type ${spec.name}: concurrency must be 1 to 1024, got ${concurrency}`);
    }
    if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1) {
      throw new Error(`worker: type ${spec.name}: timeoutSeconds must be a whole number of seconds >= 1`);
    }
    if (!Number.isInteger(attempts) || attempts < 1) {
      throw new Error(`worker: type ${spec.name}: attempts must be at least 1`);
    }
    if (!Number.isSafeInteger(maxResultBytes) || maxResultBytes < 1) {
      throw new Error(`worker: type ${spec.name}: maxResultBytes must be at least 1`);
    }
    if (spec.schema === null || typeof spec.schema !== "object") {
      throw new Error(`worker: type ${spec.name}: schema must be a JSON Schema object`);
    }
    const decl: Declaration = {
      name: spec.name,
      schema: spec.schema,
      timeout_seconds: timeoutSeconds,
      attempts,
      max_result_bytes: maxResultBytes,
      content_type: spec.contentType ?? "application/octet-stream",
    };
    if (spec.description) decl.description = spec.description;
    this.types.push(new TypeRunner(decl, concurrency, spec.work as TypeRunner["work"]));
  }

  /**
   * Connects, declares every registered type (a refused declaration rejects
   * at once, with the WireError) and starts taking work. It waits for the
   * deployment to answer until signal aborts or stop() is called.
   */
  async start(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.startedFlag || this.stopping) {
      throw new Error("worker: already started");
    }
    if (this.types.length === 0) {
      throw new Error("worker: no types registered");
    }
    this.startedFlag = true;
    const nc = await connect({
      servers: this.cfg.servers,
      user: this.cfg.user,
      pass: this.cfg.pass,
      name: `jobgate worker ${this.name}`,
      inboxPrefix: inboxPrefix(this.credential),
      timeout: this.cfg.connectTimeoutMs,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    this.nc = nc;
    // Ends the declarations' patience: the caller's signal or stop().
    const ended = new AbortController();
    const end = () => ended.abort();
    opts.signal?.addEventListener("abort", end, { once: true });
    this.stopCtl.signal.addEventListener("abort", end, { once: true });
    if (opts.signal?.aborted) end();
    const signal = ended.signal;
    try {
      for (const t of this.types) {
        await this.call(t.decl.name, "declare", { worker: this.name, type: t.decl }, { patient: true, signal });
      }
      if (this.stopping) {
        throw new Error("worker: stopped while starting");
      }
    } catch (err) {
      await nc.close().catch(() => {});
      this.nc = null;
      throw err instanceof WireError ? err : new Error(`worker: declare: ${String(err)}`, { cause: err });
    }
    this.startedAt = new Date();
    await this.hello();
    this.helloTimer = setInterval(() => void this.hello(), 10_000);
    for (const t of this.types) {
      for (let i = 0; i < t.concurrency; i++) this.loops.push(this.pullLoop(t, false));
      for (let i = 0; i < this.cfg.newcomerSlots; i++) this.loops.push(this.pullLoop(t, true));
      this.log("info", "worker started", { type: t.decl.name, concurrency: t.concurrency });
    }
  }

  /**
   * Stops taking work, lets running jobs finish for drainTimeoutMs, then
   * aborts the rest (reason "shutdown"; their jobs are given back for
   * another worker) and waits for them as long again; attempts that still
   * do not end are abandoned (their claims go stale and jobgate hands the
   * jobs on). Says bye for every type and closes the connection.
   */
  stop(): Promise<void> {
    if (!this.stopPromise) {
      this.stopPromise = this.doStop();
    }
    return this.stopPromise;
  }

  private async doStop(): Promise<void> {
    this.stopping = true;
    this.stopCtl.abort();
    if (!this.nc) {
      return;
    }
    const all = Promise.all(this.loops);
    if (!(await within(all, this.cfg.drainTimeoutMs))) {
      this.log("info", "drain time over: interrupting running jobs", { running: this.attempts.size });
      for (const a of this.attempts) a.abort("shutdown");
      if (!(await within(all, this.cfg.drainTimeoutMs))) {
        this.hard = true;
        this.log("warn", "attempts did not end: abandoned, their claims go stale", { running: this.attempts.size });
      }
    }
    if (this.helloTimer) clearInterval(this.helloTimer);
    const bye = AbortSignal.timeout(2000);
    await Promise.all(
      this.types.map((t) =>
        this.call(t.decl.name, "bye", { worker: this.name }, { timeoutMs: 2000, signal: bye }).catch(() => {}),
      ),
    );
    await this.nc.drain().catch(() => {});
    this.log("info", "worker stopped");
  }

  /** Tells jobgate this process serves its types. */
  private async hello(): Promise<void> {
    await Promise.all(
      this.types.map(async (t) => {
        try {
          await this.call(t.decl.name, "hello", {
            worker: this.name,
            concurrency: t.concurrency,
            started_at: this.startedAt.toISOString(),
            busy: t.runningJobs(),
          });
        } catch (err) {
          if (!this.stopping) this.log("warn", "presence not announced", { type: t.decl.name, err: String(err) });
        }
      }),
    );
  }

  /**
   * Asks for one job at a time, so each free slot takes the tenant whose
   * turn it is on jobgate's side. A request under way when stop() begins is
   * answered before the loop ends; a job it brings is given back at once.
   */
  private async pullLoop(t: TypeRunner, newcomer: boolean): Promise<void> {
    const stop = this.stopCtl.signal;
    while (!this.stopping) {
      const req: Record<string, unknown> = { worker: this.name, wait_ms: this.cfg.pullWaitMs };
      if (newcomer) {
        const running = t.newcomerRequest();
        if (!running) {
          await sleep(50, stop);
          continue;
        }
        req.newcomer = true;
        if (running.length > 0) req.running = running;
      }
      let reply: Reply;
      try {
        reply = await this.call(t.decl.name, "next", req, { timeoutMs: this.cfg.pullWaitMs + 5000 });
      } catch (err) {
        if (!this.stopping) {
          this.log("warn", "asking for work failed", { type: t.decl.name, err: String(err) });
          await sleep(jitter(1000), stop);
        }
        continue;
      }
      const asg = reply.job;
      if (!asg) {
        continue;
      }
      if (!validAssignment(asg, t.decl.name)) {
        this.log("error", "jobgate answered an assignment this worker cannot read", { type: t.decl.name });
        continue;
      }
      if (this.stopping) {
        await this.call(t.decl.name, "giveback", { key: asg.key, token: asg.token, reason: "shutdown" }, {
          patient: true,
          signal: AbortSignal.timeout(OP_TIMEOUT_MS),
        }).catch((err) => this.log("warn", "could not give the job back", { job_id: asg.id, err: String(err) }));
        continue;
      }
      t.started(asg.tenant);
      if (!newcomer) t.busy++;
      try {
        await runAttempt(this, t, asg);
      } catch (err) {
        this.log("error", "attempt ended unexpectedly", { job_id: asg.id, err: String(err) });
      } finally {
        if (!newcomer) t.busy--;
        t.ended(asg.tenant);
      }
    }
  }

  /**
   * Sends one request of op about type and returns its reply; a refusal
   * rejects with a WireError. With patient, no responders, timeouts and
   * unavailable/throttled refusals are tried again, jittered, until signal
   * aborts.
   * @internal
   */
  async call(type: string, op: Op, req: unknown, opts: CallOptions = {}): Promise<Reply> {
    return this.request(subject(this.credential, type, op), encoder.encode(JSON.stringify(req)), opts);
  }

  /** @internal */
  async request(subj: string, data: Uint8Array, opts: CallOptions = {}): Promise<Reply> {
    const nc = this.nc;
    if (!nc) {
      throw new Error("worker: not connected");
    }
    let delay = 100;
    for (;;) {
      let err: unknown;
      try {
        const msg = await nc.request(subj, data, { timeout: opts.timeoutMs ?? OP_TIMEOUT_MS, headers: opts.headers });
        let reply: Reply;
        try {
          reply = JSON.parse(decoder.decode(msg.data)) as Reply;
        } catch (e) {
          throw new Error(`undecodable reply to ${subj}: ${String(e)}`);
        }
        if (reply === null || typeof reply !== "object") {
          throw new Error(`undecodable reply to ${subj}`);
        }
        if (reply.error) {
          const after = Number(reply.error.retry_after_ms);
          throw new WireError(
            String(reply.error.code),
            String(reply.error.message ?? ""),
            reply.canceled === true,
            reply.failed === true,
            Number.isFinite(after) && after > 0 ? Math.min(after, MAX_RETRY_AFTER_MS) : 0,
          );
        }
        return reply;
      } catch (e) {
        err = e;
      }
      if (!opts.patient || !(transient(err) || unavailable(err)) || opts.signal?.aborted || nc.isClosed()) {
        throw err;
      }
      // A refusal that says how long to wait (a declaration past its
      // credential's limit of changes) is asked again after it, not sooner.
      await sleep(Math.max(jitter(delay), err instanceof WireError ? err.retryAfterMs : 0), opts.signal);
      delay = Math.min(2 * delay, 2000);
      if (opts.signal?.aborted) {
        throw err;
      }
    }
  }

  /** @internal */
  connection(): NatsConnection {
    if (!this.nc) throw new Error("worker: not connected");
    return this.nc;
  }
}

function validAssignment(a: Assignment, type: string): boolean {
  return (
    typeof a.key === "string" &&
    a.key.length > 0 &&
    typeof a.token === "string" &&
    a.token.length > 0 &&
    typeof a.id === "string" &&
    a.type === type &&
    Number.isInteger(a.attempt) &&
    Number.isFinite(a.timeout_ms) &&
    a.timeout_ms > 0
  );
}

function defaultName(): string {
  let host = hostname().replace(/[^A-Za-z0-9_.:@-]/g, "_") || "worker";
  if (host.length > 96) host = host.slice(0, 96);
  return `${host}-${process.pid}-${randomBytes(3).toString("hex")}`;
}
