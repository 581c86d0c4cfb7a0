// The attempt's lease (docs/protocol.md, the worker's duties): once
// lease_ms has passed since the assignment arrived, or since the last beat
// answered ok was sent, with no later beat answered ok, the handler is
// stopped, no verdict is reported, and the job is given back (reason
// lease_lapsed) once the handler returned. Here against a scripted
// jobgate, whose answers and their delays the tests choose; the
// conformance suite's lease scenario runs the same against a real one
// (internal/conformance).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test as nodeTest } from "node:test";

import { runAttempt } from "../src/attempt.js";
import { AbortedError } from "../src/errors.js";
import type { Host } from "../src/host.js";
import type { Caller } from "../src/rpc.js";
import { TypeRunner, type Work } from "../src/typerunner.js";
import type { Outcome } from "../src/types.js";
import { WireError, type Assignment, type Reply } from "../src/wire.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A test that fails, rather than hangs, when a handler is never stopped. */
const test = (name: string, fn: () => Promise<void>) => nodeTest(name, { timeout: 15_000 }, fn);

interface Sent {
  op: string;
  at: number;
}

/**
 * A scripted jobgate: beat answers what beat(n) says; open answers an
 * upload whose chunks store what they carry, the last one answered after
 * storeMs; giveback answers what giveback() says; every other request is
 * ok.
 */
function scripted(beat: (n: number) => Promise<Reply>, storeMs = 0, giveback: () => Promise<Reply> = async () => ({})) {
  const sent: Sent[] = [];
  const warnings: string[] = [];
  let beats = 0;
  let outcome: Outcome | null = null;
  const caller = {
    call: async (_type: string, op: string): Promise<Reply> => {
      sent.push({ op, at: performance.now() });
      if (op === "open") return { upload: { host: "d1", id: "u1", object: "o1" } };
      if (op === "giveback") return giveback();
      return op === "beat" ? beat(beats++) : {};
    },
    credential: "3f9a1c2b7d4e5f60",
    request: async (_subj: string, data: Uint8Array): Promise<Reply> => {
      await sleep(storeMs);
      return { stored: { object: "o1", size: data.length, sha256: createHash("sha256").update(data).digest("hex") } };
    },
  } as unknown as Caller;
  const host: Host = {
    caller,
    heartbeatMs: 100,
    log: (level, msg) => {
      if (level === "warn") warnings.push(msg);
    },
    onAttempt: (_t, o) => (outcome = o),
    hard: false,
    attempts: new Set(),
  };
  return { host, sent, warnings, outcome: () => outcome, reports: () => sent.filter((s) => s.op !== "beat").map((s) => s.op) };
}

function assignment(leaseMs?: number): Assignment {
  return {
    key: "4.r.01JD8ZQ7M3T9V6X2K5R8P4N1C0",
    id: "01JD8ZQ7M3T9V6X2K5R8P4N1C0",
    type: "lease_test",
    tenant: "4",
    requester: "r",
    attempt: 1,
    attempts: 2,
    created_at: new Date().toISOString(),
    params: {},
    token: "tok",
    timeout_ms: 60_000,
    beat_ms: 100,
    max_result_bytes: 1024,
    ...(leaseMs === undefined ? {} : { lease_ms: leaseMs }),
  };
}

function runner(work: Work): TypeRunner {
  return new TypeRunner(
    { name: "lease_test", schema: {}, timeout_seconds: 60, attempts: 2, max_result_bytes: 1024, content_type: "text/plain" },
    1,
    work,
  );
}

/** A handler that runs until its signal aborts, noting when and why. */
function untilAborted() {
  const seen: { at: number; reason: unknown }[] = [];
  const work: Work = (job) =>
    new Promise<void>((_, reject) => {
      job.signal.addEventListener(
        "abort",
        () => {
          seen.push({ at: performance.now(), reason: job.signal.reason });
          reject(job.signal.reason);
        },
        { once: true },
      );
    });
  return { work, seen };
}

const unanswered = () => Promise.reject(new Error("TIMEOUT"));

test("beats answered ok keep the attempt past its first lease; once they go unanswered the handler stops, no verdict is reported and the job is given back", async () => {
  const okUntil = 6; // beats 0..5 answered ok (about 600 ms), then none
  const s = scripted(async (n) => (n < okUntil ? { lease_ms: 400 } : unanswered()));
  const h = untilAborted();
  const began = performance.now();
  await runAttempt(s.host, runner(h.work), assignment(400));
  assert.equal(h.seen.length, 1);
  const stopped = h.seen[0]!;
  assert.ok(stopped.reason instanceof AbortedError && stopped.reason.reason === "lost", String(stopped.reason));
  const beats = s.sent.filter((x) => x.op === "beat");
  const lastOk = beats[okUntil - 1]!.at;
  assert.ok(stopped.at - began > 400 + 150, "the beats answered ok kept it past the assignment's lease");
  assert.ok(stopped.at >= lastOk + 400, `not before the last lease ran out: ${stopped.at - lastOk} ms after its beat`);
  assert.ok(stopped.at < lastOk + 400 + 250, `soon after it: ${stopped.at - lastOk} ms after its beat`);
  assert.deepEqual(s.reports(), ["giveback"], "no verdict: the job given back");
  assert.equal(s.outcome(), "given_back");
  assert.ok(s.warnings.some((w) => w.startsWith("lease ran out")), String(s.warnings));
});

test("a beat's lease counts from when the beat was sent, not from its answer", async () => {
  // The first beat (at ~100 ms) is answered 500 ms late with a lease of
  // 700 ms: the lease ends ~800 ms after the start, not ~1300 ms.
  const s = scripted(async (n) => {
    if (n > 0) return unanswered();
    await sleep(500);
    return { lease_ms: 700 };
  });
  const h = untilAborted();
  await runAttempt(s.host, runner(h.work), assignment(700));
  const sentAt = s.sent.find((x) => x.op === "beat")!.at;
  const after = h.seen[0]!.at - sentAt;
  assert.ok(after >= 700 && after < 700 + 400, `stopped ${after} ms after the beat was sent`);
  assert.deepEqual(s.reports(), ["giveback"]);
});

test("a beat refused unavailable does not move the lease", async () => {
  const s = scripted(() => Promise.reject(new WireError("unavailable", "the job's concurrency places could not be renewed")));
  const h = untilAborted();
  const began = performance.now();
  await runAttempt(s.host, runner(h.work), assignment(600));
  const after = h.seen[0]!.at - began;
  assert.ok(s.sent.filter((x) => x.op === "beat").length >= 3, "beats were sent and refused");
  assert.ok(after >= 600 && after < 600 + 300, `stopped ${after} ms after the assignment`);
  assert.deepEqual(s.reports(), ["giveback"]);
});

test("a handler that succeeds after its lease ran out is not reported: the job is given back once it returned", async () => {
  const s = scripted(unanswered);
  let aborted = false;
  const began = performance.now();
  await runAttempt(
    s.host,
    runner(async (job) => {
      job.signal.addEventListener("abort", () => (aborted = true), { once: true });
      await sleep(700); // deaf to its signal
    }),
    assignment(300),
  );
  assert.ok(aborted, "its signal aborted at the lease's end");
  assert.deepEqual(s.reports(), ["giveback"], "no done: the job given back");
  assert.ok(s.sent.at(-1)!.at - began >= 700, "given back once the handler returned, not while it ran");
  assert.equal(s.outcome(), "given_back");
});

test("a success whose result was still being stored when the lease ran out is not reported: the job is given back", async () => {
  const s = scripted(unanswered, 700);
  await runAttempt(
    s.host,
    runner(async (job) => {
      await job.write("a result\n"); // stored when the handler has returned, 700 ms later
    }),
    assignment(300),
  );
  assert.deepEqual(s.reports(), ["open", "giveback"], "no done: the job given back");
  assert.equal(s.outcome(), "given_back");
});

test("a give-back refused lost (jobgate took the claim over meanwhile) ends the attempt lost", async () => {
  const s = scripted(unanswered, 0, () => Promise.reject(new WireError("lost", "the job is running and not this claim's")));
  const h = untilAborted();
  await runAttempt(s.host, runner(h.work), assignment(300));
  assert.deepEqual(s.reports(), ["giveback"]);
  assert.equal(s.outcome(), "lost");
});

test("a beat answered lost ends the attempt lost: nothing given back, though the handler outlives the lease", async () => {
  const s = scripted(() => Promise.reject(new WireError("lost", "the job is canceled and not this claim's", true)));
  await runAttempt(s.host, runner(async () => void (await sleep(700))), assignment(300)); // deaf to its signal
  assert.deepEqual(s.reports(), []);
  assert.equal(s.outcome(), "lost");
});

test("without lease_ms (an older jobgate) there is no deadline: unanswered beats do not stop the handler", async () => {
  const s = scripted(unanswered);
  let aborted = false;
  await runAttempt(
    s.host,
    runner(async (job) => {
      job.signal.addEventListener("abort", () => (aborted = true), { once: true });
      await sleep(800);
    }),
    assignment(),
  );
  assert.ok(!aborted);
  assert.deepEqual(s.reports(), ["done"]);
  assert.equal(s.outcome(), "succeeded");
});
