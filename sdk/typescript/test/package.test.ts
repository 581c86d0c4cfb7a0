// The npm package as a user gets it: `npm pack` makes a tarball that a new
// project installs by path, imports by the package's name, compiles with
// tsc against the package's types, and runs: the README's worker
// (examples/worker-typescript) runs jobs of a real `jobgate serve`.

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import * as api from "../src/index.js";
import { childEnv, Deployment, repoRoot, sdkDir } from "./deployment.js";

const run = promisify(execFile);
const example = join(repoRoot, "examples", "worker-typescript");

let tmp: string;
let tarball: string;
let project: string;

/** Runs a command in dir; on failure, the error says what it printed. */
async function sh(dir: string, cmd: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(cmd, args, { cwd: dir, env: childEnv(), maxBuffer: 16 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(" ")} in ${dir}: ${String(err)}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "jobgate-pack-"));
  // npm pack builds lib/ first (prepack).
  const out = await sh(sdkDir, "npm", ["pack", "--json", "--pack-destination", tmp, "--loglevel=error"]);
  const [packed] = JSON.parse(out) as { filename: string; files: { path: string }[] }[];
  tarball = join(tmp, packed!.filename);
  const files = packed!.files.map((f) => f.path);
  for (const f of ["package.json", "README.md", "LICENSE", "lib/index.js", "lib/index.d.ts"]) {
    assert.ok(files.includes(f), `${f} packed: ${files.join(" ")}`);
  }
  assert.deepEqual(files.filter((f) => /^(dist|test|node_modules)\//.test(f) || f.endsWith(".tgz")), [], "nothing but the library packed");

  project = join(tmp, "project");
  cpSync(example, project, { recursive: true, filter: (src) => !/(node_modules|dist|package-lock\.json|\.tgz)$/.test(src) });
  // The cache npm ci filled serves the dependencies; a cold one asks the registry.
  await sh(project, "npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball]);
});

after(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("the README's complete worker is examples/worker-typescript/worker.ts", () => {
  const readme = readFileSync(join(sdkDir, "README.md"), "utf8");
  const block = /## A complete worker\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(block, "README.md has a ts block under \"## A complete worker\"");
  assert.equal(block[1], readFileSync(join(example, "worker.ts"), "utf8"));
  assert.ok(block[1]!.trimEnd().split("\n").length <= 30, "at most 30 lines");
});

test("the installed package is imported by its name, with the index's exports and no deep paths", async () => {
  const probe = `
    const m = await import("@jobgate/worker");
    let deep = "";
    try { await import("@jobgate/worker/lib/wire.js"); } catch (e) { deep = e.code; }
    console.log(JSON.stringify({ keys: Object.keys(m).sort(), deep }));`;
  const out = JSON.parse(await sh(project, "node", ["--input-type=module", "-e", probe])) as { keys: string[]; deep: string };
  assert.deepEqual(out.keys, Object.keys(api).sort());
  assert.equal(out.deep, "ERR_PACKAGE_PATH_NOT_EXPORTED");
});

test("the package's types refuse a wrong config, a mistyped param and the wire's names", async () => {
  writeFileSync(
    join(project, "misuse.ts"),
    [
      `import { Worker, credentialID } from "@jobgate/worker";`,
      `const w = new Worker({ heartbeatMs: "fast" });`,
      `w.register<{ name: string }>({ name: "x", schema: {}, work: (job) => { void job.params.nmae; } });`,
      `void credentialID;`,
      "",
    ].join("\n"),
  );
  const tsc = join("node_modules", "typescript", "bin", "tsc");
  const args = [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext", "--types", "node", "misuse.ts"];
  const err = await sh(project, "node", args).then(() => "", (e: Error) => e.message);
  assert.match(err, /misuse\.ts\(1,\d+\): error TS2305: Module '"@jobgate\/worker"' has no exported member 'credentialID'/);
  assert.match(err, /misuse\.ts\(2,\d+\): error TS2322/);
  assert.match(err, /misuse\.ts\(3,\d+\): error TS2339: Property 'nmae' does not exist on type '{ name: string; }'/);
});

test("the example compiles against the package's types and runs jobs of jobgate serve", async () => {
  await sh(project, "node", [join("node_modules", "typescript", "bin", "tsc"), "-p", "."]);
  const d = await Deployment.start();
  try {
    const cred = d.workerCredential("greeting");
    const user = d.client("3", "grace");
    const proc = spawn("node", [join("dist", "worker.js")], {
      cwd: project,
      env: childEnv({ JOBGATE_NATS_URL: d.natsURL, JOBGATE_WORKER_USER: cred.user, JOBGATE_WORKER_PASSWORD: cred.password }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    const exited = once(proc, "exit");
    try {
      const ok = await user.submit("greeting", { name: "Ada", times: 2 });
      const v = await user.ended(ok.id);
      assert.equal(v.state, "succeeded", `${JSON.stringify(v)}\n${stderr}`);
      assert.deepEqual(v.progress, { done: 2, total: 2, unit: "lines" });
      assert.equal((await user.result(ok.id)).body.toString(), "Hello, Ada!\nHello, Ada!\n");

      const bad = await user.ended((await user.submit("greeting", { name: "nobody" })).id);
      assert.equal(bad.state, "failed");
      assert.equal(bad.error?.message, "say whom to greet");
    } finally {
      proc.kill("SIGTERM");
    }
    const [code, signal] = await exited;
    assert.deepEqual([code, signal], [0, null], `the worker stops cleanly on SIGTERM\n${stderr}`);
  } finally {
    await d.stop();
  }
});
