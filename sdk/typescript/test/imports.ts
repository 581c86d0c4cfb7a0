// The import graph of a directory of modules: its relative imports (type
// imports too), and the cycles in it.

import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";

/** Each module of dir (by file name) and the modules of dir it imports. */
export function importGraph(dir: string, ext: ".ts" | ".js"): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const spec = /(?:\bfrom\s*|\bimport\s*\(?\s*)["']\.\/([^"']+)\.js["']/g;
  for (const f of readdirSync(dir)) {
    if (!f.endsWith(ext) || f.endsWith(".d.ts")) continue;
    const text = readFileSync(join(dir, f), "utf8");
    const deps = new Set<string>();
    for (const m of text.matchAll(spec)) deps.add(m[1] + ext);
    graph.set(basename(f), [...deps].sort());
  }
  return graph;
}

/** The cycles of graph, each as the path that closes it (a -> b -> a). */
export function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (n: string): void => {
    state.set(n, "open");
    path.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === "open") {
        found.push([...path.slice(path.indexOf(m)), m]);
      } else if (!state.has(m)) {
        visit(m);
      }
    }
    path.pop();
    state.set(n, "done");
  };
  for (const n of [...graph.keys()].sort()) {
    if (!state.has(n)) visit(n);
  }
  return found;
}
