// Worker runs the registered job types of one process over the worker
// protocol v1 (docs/protocol.md), as pkg/worker does in Go.

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { connect } from "@nats-io/transport-node";

import { runAttempt } from "./attempt.js";
import { DeclarationError, type DeclarationRefusal } from "./errors.js";
import type { Attempt, Host } from "./host.js";
import { Caller, OP_TIMEOUT_MS, unavailable } from "./rpc.js";
import { TypeRunner } from "./typerunner.js";
import type { Logger, TypeSpec, WorkerConfig } from "./types.js";
import { jitter, sleep, within } from "./util.js";
import {
  credentialID,
  inboxPrefix,
  MAX_WAIT_MS,
  validCredential,
  validTypeName,
  validWorkerName,
  WireError,
  type Assignment,
  type Declaration,
  type Reply,
} from "./wire.js";

/**
 * Worker runs the registered job types of one process: register() them,
 * start() declares them and takes their jobs, stop() drains.
 */
export class Worker {
  readonly name: string;
  readonly credential: string;
  private readonly cfg: Required<Omit<WorkerConfig, "user" | "pass" | "onAttempt" | "credential" | "name">> &
    Pick<WorkerConfig, "user" | "pass" | "onAttempt">;
  private readonly log: Logger;
  private readonly types: TypeRunner[] = [];
  private caller: Caller | null = null;
  private startedFlag = false;
  private stopping = false;
  private stopPromise: Promise<void> | null = null;
  /** Aborts when stop() begins: pull loops stop asking, sleeps end. */
  private readonly stopCtl = new AbortController();
  /** Attempts under way (aborted with "shutdown" when the drain is over). */
  private readonly attempts = new Set<Attempt>();
  /** Set when stop() gave up on attempts that would not end. */
  private hard = false;
  private loops: Promise<void>[] = [];
  private helloTimer: NodeJS.Timeout | null = null;

  constructor(cfg: WorkerConfig = {}) {
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
    // The flow fields: jobgate checks their bounds (a refusal rejects
    // start() with a DeclarationError naming the field).
    if (spec.retry) {
      decl.retry = {
        initial_seconds: spec.retry.initialSeconds,
        max_seconds: spec.retry.maxSeconds,
        multiplier: spec.retry.multiplier,
      };
    }
    if (spec.concurrencyKeys?.length) {
      decl.concurrency = spec.concurrencyKeys.map((k) => ({ key: k.key, limit: k.limit }));
    }
    if (spec.rateLimit) {
      decl.rate_limit = { per_second: spec.rateLimit.perSecond, burst: spec.rateLimit.burst, key: spec.rateLimit.key };
    }
    this.types.push(new TypeRunner(decl, concurrency, spec.work as TypeRunner["work"]));
  }

  /**
   * Connects, declares every registered type (a refused declaration rejects
   * at once, with a DeclarationError) and starts taking work. It waits for
   * the deployment to answer until signal aborts or stop() is called.
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
    const caller = new Caller(nc, this.credential);
    this.caller = caller;
    // Ends the declarations' patience: the caller's signal or stop().
    const ended = new AbortController();
    const end = () => ended.abort();
    opts.signal?.addEventListener("abort", end, { once: true });
    this.stopCtl.signal.addEventListener("abort", end, { once: true });
    if (opts.signal?.aborted) end();
    const signal = ended.signal;
    try {
      for (const t of this.types) {
        await caller.call(t.decl.name, "declare", { worker: this.name, type: t.decl }, { patient: true, signal }).catch((err) => {
          throw err instanceof WireError && !unavailable(err) ? new DeclarationError(t.decl.name, refusal(err.code), err.message, { cause: err }) : err;
        });
      }
      if (this.stopping) {
        throw new Error("worker: stopped while starting");
      }
    } catch (err) {
      await nc.close().catch(() => {});
      this.caller = null;
      throw err instanceof DeclarationError ? err : new Error(`worker: declare: ${String(err)}`, { cause: err });
    }
    const self = this;
    const host: Host = {
      caller,
      heartbeatMs: this.cfg.heartbeatMs,
      log: this.log,
      onAttempt: this.cfg.onAttempt,
      get hard() {
        return self.hard;
      },
      attempts: this.attempts,
    };
    const startedAt = new Date();
    await this.hello(caller, startedAt);
    this.helloTimer = setInterval(() => void this.hello(caller, startedAt), 10_000);
    for (const t of this.types) {
      for (let i = 0; i < t.concurrency; i++) this.loops.push(this.pullLoop(host, t, false));
      for (let i = 0; i < this.cfg.newcomerSlots; i++) this.loops.push(this.pullLoop(host, t, true));
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
    const caller = this.caller;
    if (!caller) {
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
        caller.call(t.decl.name, "bye", { worker: this.name }, { timeoutMs: 2000, signal: bye }).catch(() => {}),
      ),
    );
    await caller.nc.drain().catch(() => {});
    this.log("info", "worker stopped");
  }

  /** Tells jobgate this process serves its types. */
  private async hello(caller: Caller, startedAt: Date): Promise<void> {
    await Promise.all(
      this.types.map(async (t) => {
        try {
          await caller.call(t.decl.name, "hello", {
            worker: this.name,
            concurrency: t.concurrency,
            started_at: startedAt.toISOString(),
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
  private async pullLoop(host: Host, t: TypeRunner, newcomer: boolean): Promise<void> {
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
        reply = await host.caller.call(t.decl.name, "next", req, { timeoutMs: this.cfg.pullWaitMs + 5000 });
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
        await host.caller.call(t.decl.name, "giveback", { key: asg.key, token: asg.token, reason: "shutdown" }, {
          patient: true,
          signal: AbortSignal.timeout(OP_TIMEOUT_MS),
        }).catch((err) => this.log("warn", "could not give the job back", { job_id: asg.id, err: String(err) }));
        continue;
      }
      t.started(asg.tenant);
      if (!newcomer) t.busy++;
      try {
        await runAttempt(host, t, asg);
      } catch (err) {
        this.log("error", "attempt ended unexpectedly", { job_id: asg.id, err: String(err) });
      } finally {
        if (!newcomer) t.busy--;
        t.ended(asg.tenant);
      }
    }
  }
}

/** What a refused declaration's code means to the user. */
function refusal(code: string): DeclarationRefusal {
  return code === "forbidden" || code === "invalid" ? code : "refused";
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
