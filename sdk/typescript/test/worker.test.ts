// The worker against a real `jobgate serve`: what the job's owner sees when
// a handler succeeds with progress and a result, fails, or is canceled, and
// what start() says when jobgate refuses a declaration.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AbortedError, DeclarationError, Permanent, Worker, type Job } from "../src/index.js";
import { Deployment, type Client } from "./deployment.js";

interface Params {
  lines?: number;
  gate?: boolean;
  message?: string;
}

const schema = {
  type: "object",
  additionalProperties: false,
  properties: {
    lines: { type: "integer", minimum: 0, maximum: 100 },
    gate: { type: "boolean" },
    message: { type: "string", maxLength: 200 },
  },
};

/** A promise and its resolve. */
interface Latch<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}

function latch<T>(): Latch<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("a worker against jobgate serve", () => {
  let d: Deployment;
  let user: Client;
  let worker: Worker;
  const released = new Map<string, () => void>();
  /** A hold job's handler started; its handler's signal aborted, with the reason. */
  const started = new Map<string, Latch<null>>();
  const aborted = new Map<string, Latch<unknown>>();
  const flowInFlight = new Map<number, number>();
  const flowMost = new Map<number, number>();
  const startedFor = (id: string) => started.get(id) ?? started.set(id, latch<null>()).get(id)!;
  const abortFor = (id: string) => aborted.get(id) ?? aborted.set(id, latch<unknown>()).get(id)!;

  before(async () => {
    d = await Deployment.start();
    user = d.client("7", "ada");
    const cred = d.workerCredential("tsw_report", "tsw_fail", "tsw_hold", "tsw_flow");
    worker = new Worker({ servers: d.natsURL, user: cred.user, pass: cred.password, heartbeatMs: 250, pullWaitMs: 1000, drainTimeoutMs: 1000 });
    worker.register<Params>({
      name: "tsw_report",
      schema,
      contentType: "text/plain",
      work: async (job) => {
        const n = job.params.lines ?? 0;
        for (let i = 1; i <= n; i++) {
          await job.write(`line ${i} of job ${job.id}\n`);
          job.progress(i, n, "lines");
          if (i === 1 && job.params.gate) {
            await new Promise<void>((r) => released.set(job.id, r));
          }
        }
      },
    });
    worker.register<Params>({
      name: "tsw_fail",
      schema,
      attempts: 1,
      work: (job) => {
        if (job.params.lines === 0) throw new Permanent(job.params.message ?? "");
        throw new Error(job.params.message ?? "");
      },
    });
    worker.register<Params>({
      name: "tsw_hold",
      schema,
      work: async (job: Job<Params>) => {
        startedFor(job.id).resolve(null);
        await new Promise<void>((resolve) => {
          job.signal.addEventListener("abort", () => resolve(), { once: true });
        });
        abortFor(job.id).resolve(job.signal.reason);
        throw job.signal.reason;
      },
    });
    worker.register<Params>({
      name: "tsw_flow",
      schema,
      concurrency: 4,
      concurrencyKeys: [{ key: "/params/lines", limit: 1 }],
      retry: { initialSeconds: 1, maxSeconds: 5, multiplier: 2 },
      rateLimit: { perSecond: 50, burst: 10 },
      work: async (job) => {
        const key = job.params.lines ?? 0;
        const now = (flowInFlight.get(key) ?? 0) + 1;
        flowInFlight.set(key, now);
        flowMost.set(key, Math.max(flowMost.get(key) ?? 0, now));
        await new Promise((r) => setTimeout(r, 80));
        flowInFlight.set(key, (flowInFlight.get(key) ?? 1) - 1);
      },
    });
    await worker.start();
  });

  after(async () => {
    await worker?.stop();
    await d?.stop();
  });

  test("a job runs to success: its progress shows while it runs, its result is stored whole", async () => {
    const j = await user.submit("tsw_report", { lines: 5, gate: true });
    const running = await user.until(j.id, "at progress 1 of 5", (v) => v.state === "running" && v.progress?.done === 1);
    assert.deepEqual(running.progress, { done: 1, total: 5, unit: "lines" });
    released.get(j.id)!();
    const done = await user.ended(j.id);
    assert.equal(done.state, "succeeded", JSON.stringify(done));
    assert.deepEqual(done.progress, { done: 5, total: 5, unit: "lines" });
    const want = [1, 2, 3, 4, 5].map((i) => `line ${i} of job ${j.id}\n`).join("");
    assert.equal(done.result?.size, Buffer.byteLength(want));
    const got = await user.result(j.id);
    assert.equal(got.contentType, "text/plain");
    assert.equal(got.body.toString("utf8"), want);
  });

  test("a Permanent failure fails the job at once, its message shown to the owner", async () => {
    const j = await user.submit("tsw_fail", { lines: 0, message: "case 13 is sealed" });
    const v = await user.ended(j.id);
    assert.equal(v.state, "failed");
    assert.equal(v.attempt, 1);
    assert.equal(v.error?.category, "handler_error");
    assert.equal(v.error?.message, "case 13 is sealed");
    assert.equal(v.error?.retryable, false);
  });

  test("any other error fails with a generic message: the handler's text never reaches the owner", async () => {
    const j = await user.submit("tsw_fail", { lines: 1, message: "db password=hunter2 rejected" });
    const v = await user.ended(j.id);
    assert.equal(v.state, "failed");
    assert.equal(v.error?.category, "handler_error");
    assert.ok(v.error?.message, "a message for the owner");
    assert.doesNotMatch(v.error!.message, /hunter2/);
  });

  test("the owner's cancel aborts the running handler (reason canceled) and the job stays canceled", async () => {
    const j = await user.submit("tsw_hold", {});
    await startedFor(j.id).promise;
    const r = await user.call("DELETE", `/v1/jobs/${j.id}`);
    await r.arrayBuffer();
    assert.ok(r.status < 300, `DELETE: ${r.status}`);
    const reason = await abortFor(j.id).promise;
    assert.ok(reason instanceof AbortedError, String(reason));
    assert.equal(reason.reason, "canceled");
    const v = await user.job(j.id);
    assert.equal(v.state, "canceled");
  });

  test("a type's concurrency key holds: jobs with the same params value run one at a time", async () => {
    const jobs = [];
    for (let i = 0; i < 8; i++) jobs.push(await user.submit("tsw_flow", { lines: i % 2 }));
    for (const j of jobs) assert.equal((await user.ended(j.id)).state, "succeeded");
    assert.equal(flowMost.get(0), 1);
    assert.equal(flowMost.get(1), 1);
    const r = await user.call("GET", "/v1/types/tsw_flow");
    const t = (await r.json()) as Record<string, unknown>;
    assert.deepEqual(t.concurrency, [{ key: "/params/lines", limit: 1 }]);
    assert.deepEqual(t.retry, { initial_seconds: 1, max_seconds: 5, multiplier: 2 });
    assert.deepEqual(t.rate_limit, { per_second: 50, burst: 10 });
  });

  test("start() rejects with a DeclarationError when jobgate refuses a declaration", async () => {
    // tsw_report belongs to the first credential that declared it.
    const other = d.workerCredential("tsw_report");
    const thief = new Worker({ servers: d.natsURL, user: other.user, pass: other.password });
    thief.register({ name: "tsw_report", schema, work: () => {} });
    await assert.rejects(thief.start(), (err: unknown) => {
      assert.ok(err instanceof DeclarationError, String(err));
      assert.equal(err.type, "tsw_report");
      assert.equal(err.reason, "forbidden");
      return true;
    });
    // A limit past jobgate's (an attempt of at most 24 h).
    const own = d.workerCredential("tsw_slow");
    const slow = new Worker({ servers: d.natsURL, user: own.user, pass: own.password });
    slow.register({ name: "tsw_slow", schema, timeoutSeconds: 2 * 86_400, work: () => {} });
    await assert.rejects(slow.start(), (err: unknown) => {
      assert.ok(err instanceof DeclarationError, String(err));
      assert.equal(err.reason, "invalid");
      return true;
    });
    // A concurrency limit past jobgate's (1 to 1000).
    const flow = d.workerCredential("tsw_flow_bad");
    const bad = new Worker({ servers: d.natsURL, user: flow.user, pass: flow.password });
    bad.register({ name: "tsw_flow_bad", schema, concurrencyKeys: [{ key: "tenant", limit: 5000 }], work: () => {} });
    await assert.rejects(bad.start(), (err: unknown) => {
      assert.ok(err instanceof DeclarationError, String(err));
      assert.equal(err.reason, "invalid");
      assert.match(err.message, /concurrency\[0\]\.limit/);
      return true;
    });
  });
});
