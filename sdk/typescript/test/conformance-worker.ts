// The conformance suite's TypeScript worker (internal/conformance): the
// same job types and handlers as test/conformance/goworker, on this
// library. It prints one JSON line per thing the suite checks.
//
// Environment: JOBGATE_NATS_URL, JOBGATE_WORKER_USER, JOBGATE_WORKER_PASSWORD,
// CONF_SPEC (testdata/types.json), CONF_KINDS (comma-separated kinds of
// CONF_SPEC to run), CONF_PREFIX (type name prefix of unshared kinds),
// CONF_GATES (the directory whose files open hold-mode gates), CONF_NAME,
// CONF_LABEL (what its handlers write: "done by <label>"), CONF_HEARTBEAT_MS,
// CONF_DRAIN_MS (docs/conformance.md).

import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { AbortedError, Permanent, Worker, type Job, type WorkContext } from "../src/index.js";

interface Params {
  mode: "result" | "hold" | "permanent" | "error";
  blocks: number;
  tail: number;
  seed: number;
  gate: string;
  message: string;
}

interface Kind {
  timeout_seconds: number;
  attempts: number;
  max_result_bytes: number;
  content_type: string;
  concurrency: number;
  shared?: boolean;
}

const env = (k: string, d?: string): string => {
  const v = process.env[k] ?? d;
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};

const say = (event: string, fields: Record<string, unknown> = {}): void => {
  process.stdout.write(JSON.stringify({ event, impl: "ts", ...fields }) + "\n");
};

const spec = JSON.parse(readFileSync(env("CONF_SPEC"), "utf8")) as { schema: object; types: Record<string, Kind> };
const prefix = env("CONF_PREFIX", "ts");
const label = env("CONF_LABEL", "ts");
const gates = env("CONF_GATES");

const w = new Worker({
  servers: env("JOBGATE_NATS_URL"),
  user: env("JOBGATE_WORKER_USER"),
  pass: env("JOBGATE_WORKER_PASSWORD"),
  name: env("CONF_NAME", `ts-conformance-${process.pid}`),
  heartbeatMs: Number(env("CONF_HEARTBEAT_MS", "500")),
  drainTimeoutMs: Number(env("CONF_DRAIN_MS", "1000")),
  pullWaitMs: 1000,
  logger: (level, msg, fields) => {
    if (level !== "debug") process.stderr.write(JSON.stringify({ level, msg, ...fields }) + "\n");
  },
  onAttempt: (type, outcome, tookMs) => say("attempt", { type, outcome, took_ms: tookMs }),
});

async function work(job: Job<Params>, ctx: WorkContext): Promise<void> {
  const p = job.params;
  say("started", { id: job.id, type: job.type, attempt: job.attempt, mode: p.mode, trace_id: job.traceparent?.split("-")[1] ?? "" });
  switch (p.mode) {
    case "result": {
      const out = job.output;
      for (let i = 0; i < p.blocks; i++) {
        await job.write(`${i} ${p.seed} ü€\n`);
        const b = Buffer.alloc(1000);
        for (let j = 0; j < b.length; j++) b[j] = (i * 7 + j * 13 + p.seed) & 0xff;
        if (!out.write(b)) await once(out, "drain");
        job.progress(i + 1, p.blocks, "blocks");
      }
      if (p.tail > 0) {
        const t = Buffer.alloc(p.tail);
        for (let j = 0; j < t.length; j++) t[j] = (j * 31 + p.seed) & 0xff;
        await job.write(t);
      }
      return;
    }
    case "hold": {
      job.progress(1, 2, "steps");
      for (;;) {
        if (ctx.signal.aborted) {
          const r = ctx.signal.reason;
          say("aborted", { id: job.id, attempt: job.attempt, reason: r instanceof AbortedError ? r.reason : String(r) });
          throw r;
        }
        if (p.gate !== "" && existsSync(join(gates, p.gate))) {
          job.progress(2, 2, "steps");
          await job.write(`done by ${label} at attempt ${job.attempt}\n`);
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    case "permanent":
      throw new Permanent(p.message);
    case "error":
      throw new Error(p.message);
  }
}

for (const kind of env("CONF_KINDS").split(",")) {
  const k = spec.types[kind];
  if (!k) throw new Error(`no kind ${kind} in ${env("CONF_SPEC")}`);
  w.register<Params>({
    name: k.shared ? `shared_${kind}` : `${prefix}_${kind}`,
    description: `conformance ${kind} (${k.shared ? "shared" : prefix})`,
    schema: spec.schema,
    timeoutSeconds: k.timeout_seconds,
    attempts: k.attempts,
    maxResultBytes: k.max_result_bytes,
    contentType: k.content_type,
    concurrency: k.concurrency,
    work,
  });
}

let stopping = false;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    say("stopping");
    w.stop().then(
      () => {
        say("stopped");
        process.exit(0);
      },
      (err) => {
        process.stderr.write(`stop: ${String(err)}\n`);
        process.exit(1);
      },
    );
  });
}

try {
  await w.start();
  say("ready", { name: w.name, credential: w.credential });
} catch (err) {
  process.stderr.write(`start: ${String(err)}\n`);
  process.exit(1);
}
