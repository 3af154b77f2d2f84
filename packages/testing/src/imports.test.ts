/**
 * The kit's modules import each other without a cycle: what the suites share (`T0`,
 * `uniquePrefix`, the suite's context) sits below them, in `suite-shared.ts` and
 * `conformance/context.ts`, so that the suite can import each module and no module imports the
 * suite. Every relative import counts, `import type` included, in `src/` and its folders
 * (`algorithms/`, `conformance/`).
 */
import { readFileSync, readdirSync } from "node:fs";
import { posix } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const srcDir = fileURLToPath(new URL(".", import.meta.url));

/**
 * `from "./x.js"` → `x.ts`, for every static import or re-export of a module of the kit, as a path
 * relative to `src/` (`file` is the importing module's, relative to `src/` too).
 */
function relativeImports(source: string, file = "index.ts"): string[] {
  return [...source.matchAll(/\bfrom\s+"(\.\.?\/[\w./-]+)\.js"/g)].map((m) => `${posix.join(posix.dirname(file), m[1]!)}.ts`);
}

/** Every `.ts` file under `src/`, relative to it. */
function sourceFiles(dir = ""): string[] {
  return readdirSync(`${srcDir}${dir}`, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(`${dir}${e.name}/`) : e.name.endsWith(".ts") ? [`${dir}${e.name}`] : [],
  );
}

/** One cycle of the graph as a path `a → b → a`, or `undefined` when it has none. */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === "done") return undefined;
    if (state.get(node) === "open") return [...path.slice(path.indexOf(node)), node];
    state.set(node, "open");
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle !== undefined) return cycle;
    }
    path.pop();
    state.set(node, "done");
    return undefined;
  };
  for (const node of [...graph.keys()].sort()) {
    const cycle = visit(node);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

describe("module graph of @sluice/testing", () => {
  it("resolves the imports of a module in a folder against that folder", () => {
    expect(relativeImports('import { a } from "./definition.js";\nexport { b } from "../vectors.js";', "algorithms/x.ts")).toEqual([
      "algorithms/definition.ts",
      "vectors.ts",
    ]);
  });

  it("finds a cycle when there is one (the check can fail)", () => {
    const graph = new Map([
      ["conformance.ts", relativeImports('import { testKeySchema } from "./key-schema.js";')],
      ["key-schema.ts", relativeImports('import { T0 } from "./conformance.js";')],
    ]);
    expect(findCycle(graph)).toEqual(["conformance.ts", "key-schema.ts", "conformance.ts"]);
    expect(findCycle(new Map([["a.ts", ["b.ts"]], ["b.ts", []]]))).toBeUndefined();
  });

  it("has no import cycle among src/**/*.ts", () => {
    const files = sourceFiles();
    const graph = new Map(files.map((f) => [f, relativeImports(readFileSync(`${srcDir}${f}`, "utf8"), f)]));
    expect(graph.get("conformance.ts")).toContain("conformance/key-schema.ts");
    expect(graph.get("conformance/key-schema.ts")).toContain("suite-shared.ts");
    expect(graph.get("conformance/refunds.ts")).toContain("conformance/context.ts");
    expect(graph.get("reference.ts")).toContain("algorithms/index.ts");
    expect(graph.get("algorithms/index.ts")).toContain("algorithms/fixedWindow.ts");
    expect(graph.get("algorithms/fixedWindow.ts")).toEqual(["algorithms/definition.ts"]);
    expect(findCycle(graph)).toBeUndefined();
  });
});
