// One attempt's hold on a job: the handler within its budget while beats
// keep the claim alive, the output stored, the verdict reported. jobgate
// checks and writes everything; this side only reports.

import { finished } from "node:stream/promises";

import { AbortedError, Failure, Permanent, StoreOutageError, type AbortReason } from "./errors.js";
import { ResultWriter } from "./output.js";
import { clipBytes, printable } from "./util.js";
import type { Attempt, Host } from "./host.js";
import { OP_TIMEOUT_MS } from "./rpc.js";
import type { TypeRunner } from "./typerunner.js";
import type { Job, Logger, Outcome } from "./types.js";
import { WireError, type Assignment, type Held, type Kind, type Progress, type StoredResult } from "./wire.js";

/** A verdict to report: a failure of kind, or no verdict (lost, given back). */
type Verdict =
  | { do: "fail"; kind: Kind; retryable: boolean; message: string; user: string }
  | { do: "giveback"; reason: "shutdown" | "store_outage" | "lease_lapsed" }
  | { do: "refused"; message: string }
  | { do: "lost" };

/** Runs one claimed attempt to its end in w. */
export async function runAttempt(w: Host, t: TypeRunner, asg: Assignment): Promise<void> {
  const a = new AttemptRun(w, t, asg);
  w.attempts.add(a);
  try {
    await a.run();
  } finally {
    w.attempts.delete(a);
  }
}

class AttemptRun implements Attempt {
  private readonly ctl = new AbortController();
  private readonly log: Logger;
  private readonly held: Held;
  private lost = false;
  private prog: Progress | null = null;
  private nextStep = 0;
  private out: ResultWriter | null = null;
  private readonly beater: Beater;
  /** Ends the patient requests of the attempt (its upload, its verdict). */
  private readonly deadline: AbortSignal;
  /** When the assignment arrived (performance.now()). */
  private readonly arrived = performance.now();
  /**
   * The lease: until when (performance.now()) the attempt is this worker's
   * for sure on jobgate's word, or null when jobgate said nothing (an
   * older one: no lease). See leaseFrom.
   */
  private leaseEnd: number | null = null;
  /** The lease_ms that set leaseEnd. */
  private leaseMs = 0;
  private leaseTimer: NodeJS.Timeout | null = null;
  private leaseOut = false;

  constructor(
    private readonly w: Host,
    private readonly t: TypeRunner,
    private readonly asg: Assignment,
  ) {
    this.held = { key: asg.key, token: asg.token };
    const fields = { job_id: asg.id, type: asg.type, attempt: asg.attempt };
    this.log = (level, msg, f) => w.log(level, msg, { ...fields, ...f });
    this.deadline = AbortSignal.timeout(asg.timeout_ms + OP_TIMEOUT_MS);
    let every = w.heartbeatMs;
    if (asg.beat_ms > 0) every = Math.min(every, asg.beat_ms);
    this.beater = new Beater(Math.max(every, 100), () => this.beat());
  }

  abort(reason: AbortReason): void {
    if (!this.ctl.signal.aborted) {
      this.ctl.abort(new AbortedError(reason));
    }
  }

  private abortReason(): AbortReason | null {
    const r = this.ctl.signal.reason;
    return this.ctl.signal.aborted && r instanceof AbortedError ? r.reason : null;
  }

  async run(): Promise<void> {
    const started = Date.now();
    this.log("debug", "job claimed"); // its outcome is logged at info
    const timer = setTimeout(() => this.abort("timeout"), this.asg.timeout_ms);
    this.leaseFrom(this.arrived, this.asg.lease_ms);
    this.beater.start();
    let verdict: Verdict | null = null;
    let stored: StoredResult | null = null;
    try {
      await this.handler();
      const reason = this.abortReason();
      // A handler that returned after its lease ran out: its success is
      // not this attempt's to report (another may be running the job).
      if (this.leaseRanOut() || this.lost || reason === "lost" || reason === "canceled") {
        throw new AbortedError(reason ?? "lost");
      }
      stored = await this.finishOutput();
    } catch (err) {
      this.out?.destroy();
      verdict = this.classify(err);
    } finally {
      clearTimeout(timer);
      await this.beater.stop();
      if (this.leaseTimer) clearTimeout(this.leaseTimer);
    }
    // Past the lease no verdict is reported, only the job given back (the
    // deadline is still checked, the beats having stopped): a success
    // stored after it included.
    if (this.leaseRanOut() && verdict?.do !== "refused") {
      verdict = { do: "giveback", reason: "lease_lapsed" };
    }
    const outcome = verdict ? await this.conclude(verdict) : await this.succeed(stored);
    this.w.onAttempt?.(this.t.decl.name, outcome, Date.now() - started);
  }

  /** Calls the type's handler with the job. */
  private async handler(): Promise<void> {
    const self = this;
    const asg = this.asg;
    const job: Job<unknown> = {
      id: asg.id,
      type: asg.type,
      tenant: asg.tenant,
      requester: asg.requester,
      attempt: asg.attempt,
      attempts: asg.attempts,
      createdAt: new Date(asg.created_at),
      params: asg.params,
      traceparent: asg.traceparent,
      tracestate: asg.tracestate,
      signal: this.ctl.signal,
      progress: (done, total, unit) => self.setProgress(done, total, unit),
      get output() {
        return self.output();
      },
      write(chunk) {
        const out = self.output();
        return new Promise<void>((resolve, reject) => {
          out.write(chunk, (err) => (err ? reject(err) : resolve()));
        });
      },
    };
    await this.t.work(job, { signal: this.ctl.signal, log: this.log });
  }

  private output(): ResultWriter {
    if (!this.out) {
      this.out = new ResultWriter(this.w.caller, this.t.decl.name, this.held, this.asg.max_result_bytes, this.deadline);
    }
    return this.out;
  }

  /**
   * Completes the upload of a handler that returned: the last chunk, the
   * kept copy stored again when the store broke the stream off, and what
   * jobgate stored compared with what was written.
   */
  private async finishOutput(): Promise<StoredResult | null> {
    const out = this.out;
    if (!out) {
      return null;
    }
    if (!out.writableEnded) {
      out.end();
    }
    try {
      await finished(out);
    } catch (err) {
      throw out.tooLarge ? err : err instanceof StoreOutageError ? err : new UploadError(err);
    }
    if (out.tooLarge) {
      // The handler went on after a refused write: its result is not whole.
      throw new UploadError(new Error("the handler returned after a write past the type's size limit"));
    }
    if (out.broken) {
      const copy = out.keptCopy();
      if (!copy) {
        throw out.broken;
      }
      this.log("info", "result upload broken off, storing the result again", { cause: String(out.broken) });
      try {
        out.stored = await out.storeAgain(copy);
      } catch (err) {
        throw err instanceof StoreOutageError ? err : new UploadError(err);
      }
    }
    const stored = out.stored;
    const sum = out.sum();
    if (!stored || stored.size !== out.n || stored.sha256 !== sum) {
      throw new UploadError(
        new Error(`jobgate stored ${stored?.size} bytes (${stored?.sha256}) of ${out.n} (${sum})`),
      );
    }
    return stored;
  }

  /** What ended an attempt without a result, as a verdict to report. */
  private classify(err: unknown): Verdict {
    const reason = this.abortReason();
    const message = clipBytes(describe(err), 2048);
    // A refused result comes first: jobgate failed the job when it refused
    // it, so a beat after that finds the claim lost, and the refusal is
    // what the owner must read in the log.
    if (this.out?.refused) {
      return { do: "refused", message };
    }
    if (this.leaseRanOut()) {
      return { do: "giveback", reason: "lease_lapsed" };
    }
    if (this.lost || reason === "lost" || reason === "canceled") {
      return { do: "lost" };
    }
    if (reason === "shutdown" || this.w.hard) {
      return { do: "giveback", reason: "shutdown" };
    }
    if (err instanceof StoreOutageError) {
      return { do: "giveback", reason: "store_outage" };
    }
    if (this.out?.tooLarge) {
      return { do: "fail", kind: "too_large", retryable: false, message, user: "" };
    }
    if (err instanceof UploadError) {
      return { do: "fail", kind: "internal", retryable: true, message, user: "" };
    }
    if (err instanceof Permanent) {
      return { do: "fail", kind: "permanent", retryable: false, message, user: userMessage(err.message) };
    }
    if (err instanceof Failure) {
      return { do: "fail", kind: failureKind(err), retryable: err.retryable, message, user: userMessage(err.message) };
    }
    if (reason === "timeout") {
      return { do: "fail", kind: "timeout", retryable: true, message, user: "" };
    }
    return { do: "fail", kind: "error", retryable: true, message, user: "" };
  }

  private async succeed(stored: StoredResult | null): Promise<Outcome> {
    const req: Record<string, unknown> = { ...this.held };
    if (stored) req.result = stored;
    if (this.prog) req.progress = this.prog;
    try {
      await this.w.caller.call(this.t.decl.name, "done", req, { patient: true, signal: this.verdictDeadline() });
      this.log("info", "job succeeded", { size: stored?.size ?? 0 });
      return "succeeded";
    } catch (err) {
      if (err instanceof WireError && err.code === "lost") {
        this.log("info", "job ended elsewhere before it succeeded here", { why: err.message });
        return "lost";
      }
      this.log("warn", "success not recorded: the claim goes stale and the job is retried", { err: String(err) });
      return "unrecorded";
    }
  }

  private async conclude(v: Verdict): Promise<Outcome> {
    const name = this.t.decl.name;
    switch (v.do) {
      case "lost":
        this.log("info", "job no longer held here (canceled, finished or taken over), stopping");
        return "lost";
      case "refused":
        // jobgate failed the job (budget_exceeded) before it answered: a
        // fail of this side's would be answered lost.
        this.log("warn", "result refused: no room for it in the tenant's result quota or the result storage; jobgate failed the job", { why: v.message });
        return "retry_or_failed";
      case "giveback":
        try {
          await this.w.caller.call(name, "giveback", { ...this.held, reason: v.reason }, {
            patient: true,
            signal: this.verdictDeadline(),
          });
          this.log("info", "job given back", { reason: v.reason });
          return "given_back";
        } catch (err) {
          if (v.reason === "lease_lapsed" && err instanceof WireError && err.code === "lost") {
            // As expected once jobgate took the claim over.
            this.log("info", "job taken over elsewhere before it was given back", { why: err.message });
            return "lost";
          }
          this.log("warn", "could not give the job back", { reason: v.reason, err: String(err) });
          return "unrecorded";
        }
      case "fail": {
        const req: Record<string, unknown> = { ...this.held, kind: v.kind, message: v.message };
        if (v.retryable) req.retryable = true;
        if (v.user) req.user_message = v.user;
        try {
          await this.w.caller.call(name, "fail", req, { patient: true, signal: this.verdictDeadline() });
          this.log("info", "attempt failed", { kind: v.kind, cause: v.message });
          return "retry_or_failed";
        } catch (err) {
          if (err instanceof WireError && err.code === "lost") {
            this.log("info", "job ended elsewhere before its failure was recorded");
            return "lost";
          }
          this.log("warn", "failure not recorded: the claim goes stale and the job is retried", { err: String(err) });
          return "unrecorded";
        }
      }
    }
  }

  /** A verdict is reported within the attempt's budget plus the time to report it. */
  private verdictDeadline(): AbortSignal {
    return AbortSignal.timeout(this.asg.timeout_ms + OP_TIMEOUT_MS);
  }

  /** Records the latest progress and asks for a beat when it crossed a tenth of the total. */
  private setProgress(done: number, total: number, unit: string): void {
    const d = count(done);
    const tot = count(total);
    this.prog = { done: d, total: tot, unit: clipBytes(printable(String(unit ?? "")), 32) };
    if (tot > 0 && d >= this.nextStep) {
      const step = Math.max(1, Math.floor(tot / 10));
      this.nextStep = (Math.floor(d / step) + 1) * step;
      this.beater.kick();
    }
  }

  /**
   * Sets the lease to end lease_ms after from (the assignment's arrival, or
   * when a beat answered ok was sent: never later than jobgate counts it).
   * Once it ends with no later beat answered ok, jobgate may take the
   * claim over or give the job's concurrency place to another: the handler
   * is stopped (its signal aborts, reason lost), no verdict is reported,
   * and once the handler returned the job is given back (reason
   * lease_lapsed), which jobgate refuses if it took the claim over and
   * which otherwise spares the job an attempt lost to the outage. No
   * lease_ms (an older jobgate): no deadline.
   */
  private leaseFrom(from: number, leaseMs: unknown): void {
    if (this.leaseRanOut()) return;
    if (this.leaseTimer) clearTimeout(this.leaseTimer);
    this.leaseTimer = null;
    if (typeof leaseMs !== "number" || !Number.isFinite(leaseMs) || leaseMs <= 0) {
      this.leaseEnd = null;
      return;
    }
    this.leaseEnd = from + leaseMs;
    this.leaseMs = leaseMs;
    this.watchLease();
  }

  /** Checks the lease when it is due (again, should a timer fire early). */
  private watchLease(): void {
    if (this.leaseEnd === null || this.leaseRanOut()) return;
    const left = this.leaseEnd - performance.now();
    this.leaseTimer = setTimeout(() => this.watchLease(), Math.max(1, Math.ceil(left)));
  }

  /** Whether the lease ran out; the first time it is seen, stops the handler. */
  private leaseRanOut(): boolean {
    if (this.leaseOut) return true;
    if (this.leaseEnd === null || performance.now() < this.leaseEnd) return false;
    this.leaseOut = true;
    this.lost = true;
    this.log("warn", "lease ran out with no beat answered: stopping the handler", {
      lease_ms: this.leaseMs,
    });
    this.abort("lost");
    return true;
  }

  /** One beat with the latest progress; a lost answer aborts the handler. */
  private async beat(): Promise<void> {
    const req: Record<string, unknown> = { ...this.held };
    if (this.prog) req.progress = this.prog;
    const sent = performance.now();
    try {
      const reply = await this.w.caller.call(this.t.decl.name, "beat", req, { timeoutMs: this.beater.every });
      // Counted from the sending; an answer after the lease ran out does
      // not revive it.
      this.leaseFrom(sent, reply.lease_ms);
    } catch (err) {
      if (err instanceof WireError && err.code === "lost") {
        this.lost = true;
        // Not this attempt's any more: no lease to keep, nothing to give back.
        this.leaseEnd = null;
        if (this.leaseTimer) clearTimeout(this.leaseTimer);
        this.abort(err.canceled ? "canceled" : "lost");
        return;
      }
      // Not worth failing the attempt for; the next beat tries again.
      this.log("warn", "beat not delivered", { err: String(err) });
    }
  }
}

/** An upload that failed for a reason other than an outage (retried as internal). */
class UploadError extends Error {
  constructor(cause: unknown) {
    super(`result not stored: ${describe(cause)}`, { cause });
    this.name = "UploadError";
  }
}

/**
 * Beater beats once an interval and, when kicked by progress, soon after
 * (at most five times an interval); one beat at a time.
 */
class Beater {
  private timer: NodeJS.Timeout | null = null;
  private dueAt = 0;
  private inflight: Promise<void> | null = null;
  private last = 0;
  private kicked = false;
  private stopped = false;

  constructor(
    readonly every: number,
    private readonly beat: () => Promise<void>,
  ) {}

  start(): void {
    this.arm(this.every);
  }

  kick(): void {
    if (this.stopped) return;
    if (this.inflight) {
      this.kicked = true;
      return;
    }
    const wait = Math.max(0, this.last + this.every / 5 - Date.now());
    if (Date.now() + wait < this.dueAt) this.arm(wait);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.inflight;
  }

  private arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.dueAt = Date.now() + ms;
    this.timer = setTimeout(() => void this.fire(), ms);
  }

  private async fire(): Promise<void> {
    if (this.stopped) return;
    this.timer = null;
    this.inflight = this.beat();
    await this.inflight;
    this.inflight = null;
    this.last = Date.now();
    if (this.stopped) return;
    if (this.kicked) {
      this.kicked = false;
      this.arm(this.every / 5);
    } else {
      this.arm(this.every);
    }
  }
}

/** The protocol's kind of a handler's Failure. */
function failureKind(f: Failure): Kind {
  switch (f.category) {
    case "budget_exceeded":
      return "budget";
    case "internal":
      return "internal";
    default:
      return f.retryable ? "error" : "permanent";
  }
}

function count(n: number): number {
  const v = Math.floor(Number(n));
  return Number.isFinite(v) ? Math.min(Math.max(v, 0), 2 ** 40) : 0;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    return err.name && err.name !== "Error" ? `${err.name}: ${err.message}` : err.message;
  }
  return String(err);
}

/** A message for users: printable, at most 500 bytes. */
function userMessage(s: string): string {
  const p = printable(s).trim();
  return Buffer.byteLength(p, "utf8") > 500 ? clipBytes(p, 497) + "…" : p;
}
