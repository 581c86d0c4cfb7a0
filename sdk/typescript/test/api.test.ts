// The package's shape: what it exports (its API, none of the protocol's
// subjects, messages or codes) and an import graph without cycles.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as api from "../src/index.js";
import { sdkDir } from "./deployment.js";
import { cycles, importGraph } from "./imports.js";

/** The values the package exports; its types (Job, TypeSpec, ...) are erased. */
const publicValues = [
  "AbortedError",
  "DeclarationError",
  "Failure",
  "Permanent",
  "ResultTooLargeError",
  "StoreOutageError",
  "Worker",
];

test("the index exports the API and nothing of the wire", () => {
  assert.deepEqual(Object.keys(api).sort(), publicValues);
});

test("the sources and the compiled modules import no module that imports them back", () => {
  const compiled = join(dirname(fileURLToPath(import.meta.url)), "..", "src");
  for (const [dir, ext] of [
    [join(sdkDir, "src"), ".ts"],
    [compiled, ".js"],
  ] as const) {
    const g = importGraph(dir, ext);
    assert.ok(g.size >= 8 && (g.get("worker" + ext) ?? []).includes("attempt" + ext), `read the imports of ${dir}`);
    assert.deepEqual(cycles(g), [], `import cycles in ${dir}`);
  }
});

test("the cycle check finds a planted cycle, type imports included", () => {
  const dir = mkdtempSync(join(tmpdir(), "jobgate-cycle-"));
  try {
    writeFileSync(join(dir, "a.ts"), `import { b } from "./b.js";\nexport const a = () => b;\n`);
    writeFileSync(join(dir, "b.ts"), `import type { C } from "./c.js";\nexport const b = 1;\nexport type B = C;\n`);
    writeFileSync(join(dir, "c.ts"), `export type { A } from "./a.js";\nexport type C = number;\n`);
    writeFileSync(join(dir, "d.ts"), `import "./a.js";\n`);
    assert.deepEqual(cycles(importGraph(dir, ".ts")), [["a.ts", "b.ts", "c.ts", "a.ts"]]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
