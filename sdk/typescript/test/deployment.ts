// A real `jobgate serve` for a test file (no mocks of jobgate): on free
// loopback ports with a temp data dir, and a user's HTTP client of it.
// JOBGATE_BIN names the binary (the Go test that runs this suite builds it);
// without it, bin/jobgate of the repository (`make build`).

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** sdk/typescript, from a compiled test (<out>/test/x.js). */
export const sdkDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoRoot = resolve(sdkDir, "..", "..");
const bin = process.env.JOBGATE_BIN || join(repoRoot, "bin", "jobgate");

/** This process's environment without jobgate's or OpenTelemetry's settings, plus extra. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("JOBGATE_") && !k.startsWith("OTEL_")) env[k] = v;
  }
  return { ...env, ...extra };
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => res(typeof a === "object" && a ? a.port : 0));
    });
  });
}

export interface Credential {
  user: string;
  password: string;
  credential: string;
}

/** A job as GET /v1/jobs/{id} shows it. */
export interface JobView {
  id: string;
  type: string;
  state: string;
  attempt: number;
  progress?: { done: number; total: number; unit: string } | null;
  error?: { category: string; message: string; retryable: boolean } | null;
  result?: { href: string; content_type: string; size: number; sha256: string } | null;
}

export class Deployment {
  private constructor(
    readonly url: string,
    readonly natsURL: string,
    readonly dir: string,
    private readonly proc: ChildProcess,
    private readonly log: string,
  ) {}

  static async start(): Promise<Deployment> {
    if (!existsSync(bin)) {
      throw new Error(`${bin} is missing: run \`make build\` or set JOBGATE_BIN`);
    }
    const dir = mkdtempSync(join(tmpdir(), "jobgate-ts-"));
    const [http, nats] = [await freePort(), await freePort()];
    const log = join(dir, "serve.log");
    const out = openSync(log, "w");
    const proc = spawn(
      bin,
      ["serve", "--data-dir", join(dir, "data"), "--http-addr", `127.0.0.1:${http}`, "--nats-listen", `127.0.0.1:${nats}`],
      { env: childEnv(), stdio: ["ignore", out, out] },
    );
    const d = new Deployment(`http://127.0.0.1:${http}`, `nats://127.0.0.1:${nats}`, dir, proc, log);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`${d.url}/readyz`).then((r) => r.ok, () => false);
      if (ok) return d;
      if (Date.now() > deadline || proc.exitCode !== null) {
        await d.stop();
        throw new Error(`jobgate serve not ready:\n${d.logTail()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  logTail(): string {
    try {
      return readFileSync(this.log, "utf8").slice(-4000);
    } catch {
      return "";
    }
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      this.proc.kill("SIGTERM");
      const t = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(t);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs a client subcommand of jobgate against the deployment's data dir. */
  jobgate(...args: string[]): string {
    const [cmd, ...rest] = args;
    return execFileSync(bin, [cmd!, "--data-dir", join(this.dir, "data"), ...rest], {
      env: childEnv(),
      encoding: "utf8",
    }).trim();
  }

  /** A worker login for these types only (`jobgate nats-user --worker`). */
  workerCredential(...types: string[]): Credential {
    return JSON.parse(this.jobgate("nats-user", "--worker", "--json", ...types.flatMap((t) => ["--type", t]))) as Credential;
  }

  /** A user of the HTTP API: one tenant's requester. */
  client(tenant: string, subject: string): Client {
    return new Client(this.url, this.jobgate("token", "--tenant", tenant, "--subject", subject));
  }
}

export class Client {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    for (let i = 0; ; i++) {
      const r = await fetch(this.base + path, {
        method,
        redirect: "manual",
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (r.status !== 429 || i >= 20) return r;
      await r.arrayBuffer();
      await new Promise((res) => setTimeout(res, 250)); // as told: a user's client waits
    }
  }

  /** Submits a job, waiting (as a new user would) until the gateway knows the type its worker just declared. */
  async submit(type: string, params: unknown): Promise<JobView> {
    const key = randomUUID();
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await this.call("POST", "/v1/jobs", { type, params }, { "idempotency-key": key });
      const text = await r.text();
      if (r.status === 202) return JSON.parse(text) as JobView;
      if (r.status !== 422 || Date.now() > deadline) {
        throw new Error(`POST /v1/jobs ${type}: ${r.status} ${text}`);
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  async job(id: string): Promise<JobView> {
    const r = await this.call("GET", `/v1/jobs/${id}`);
    const text = await r.text();
    if (r.status !== 200) throw new Error(`GET /v1/jobs/${id}: ${r.status} ${text}`);
    return JSON.parse(text) as JobView;
  }

  /** Polls the job until cond holds, or fails after timeoutMs. */
  async until(id: string, what: string, cond: (j: JobView) => boolean, timeoutMs = 20_000): Promise<JobView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const j = await this.job(id);
      if (cond(j)) return j;
      if (Date.now() > deadline) throw new Error(`job ${id} not ${what} within ${timeoutMs} ms: ${JSON.stringify(j)}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  ended(id: string, timeoutMs?: number): Promise<JobView> {
    return this.until(id, "ended", (j) => ["succeeded", "failed", "canceled"].includes(j.state), timeoutMs);
  }

  /** A succeeded job's result, fetched as a user does: the 303 to the signed link, then the file. */
  async result(id: string): Promise<{ contentType: string; body: Buffer }> {
    const r = await this.call("GET", `/v1/jobs/${id}/result`);
    await r.arrayBuffer();
    const loc = r.headers.get("location");
    if (r.status !== 303 || !loc) throw new Error(`GET /v1/jobs/${id}/result: ${r.status}`);
    const f = await fetch(new URL(loc, this.base));
    if (f.status !== 200) throw new Error(`GET ${loc}: ${f.status}`);
    return { contentType: f.headers.get("content-type") ?? "", body: Buffer.from(await f.arrayBuffer()) };
  }
}
