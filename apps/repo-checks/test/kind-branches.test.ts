/**
 * One algorithm, one place: no TypeScript file of the packages or the apps branches on a policy
 * kind outside a folder named `algorithms/`. Each package keeps what it knows of a kind in its
 * `algorithms/` folder and looks kinds up in a typed registry (`Record<PolicyKind, …>`), so adding
 * an algorithm is a file per package and a registry line each, and the compiler names every table
 * that still lacks the new kind (see CONTRIBUTING.md, "Adding an algorithm").
 *
 * A branch is `case "<kind>"`, a comparison with a kind's name (`=== "<kind>"`, `!== "<kind>"`,
 * either side, `==`/`!=` too) or a `switch` on a `.kind`, for each kind of core's registry
 * (`POLICY_KINDS`). Naming a kind as data is fine: a factory call (`fixedWindow({ ... })`), a test's
 * title, a spec (`{ kind: "fixedWindow", options }`), a table's key, a lookup
 * (`ALGORITHMS[policy.kind]`). Tests count too (they live beside the code in `src/`, and in `test/`):
 * a test that branches on a kind repeats a dispatch the registry already makes.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { POLICY_KINDS } from "@sluice/core/store";
import { describe, expect, it } from "vitest";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

/** The folders searched in every package and app. */
const SEARCHED = ["src", "test"];
const SOURCE_FILE = /\.(ts|tsx|mts|cts)$/;
const SKIPPED_FOLDERS = new Set(["node_modules", "dist", ".next", ".wrangler", "test-results"]);

/** Files about kind dispatch itself, which must write branches down: this check's own samples. */
const ABOUT_DISPATCH = new Set(["apps/repo-checks/test/kind-branches.test.ts"]);

/** Whether a file (a path relative to the repository root, `/`-separated) sits in a folder named `algorithms/`. */
function inAlgorithmsFolder(path: string): boolean {
  return path.split("/").slice(0, -1).includes("algorithms");
}

/** The patterns of a branch on one of `kinds`. */
function branchPatterns(kinds: readonly string[]): RegExp[] {
  const kind = `(['"\`])(?:${kinds.join("|")})\\1`;
  return [new RegExp(`\\bcase\\s+${kind}`), new RegExp(`[!=]==?\\s*${kind}`), new RegExp(`${kind}\\s*[!=]==?`), /\bswitch\s*\([^()]*\.kind\s*\)/];
}

/** The lines of `source` that branch on one of `kinds`, as `line: text`. */
function kindBranches(source: string, kinds: readonly string[] = POLICY_KINDS): string[] {
  const patterns = branchPatterns(kinds);
  return source.split("\n").flatMap((text, i) => (patterns.some((p) => p.test(text)) ? [`${i + 1}: ${text.trim()}`] : []));
}

/** Every TypeScript file under `packages/*` and `apps/*` in the searched folders, relative to the root. */
function sourceFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(rootDir, dir), { withFileTypes: true }).flatMap((e) => {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) return SKIPPED_FOLDERS.has(e.name) ? [] : walk(path);
      return SOURCE_FILE.test(e.name) ? [path] : [];
    });
  return ["packages", "apps"].flatMap((group) =>
    readdirSync(join(rootDir, group), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .flatMap((e) => {
        const found = readdirSync(join(rootDir, group, e.name));
        return SEARCHED.filter((folder) => found.includes(folder)).flatMap((folder) => walk(`${group}/${e.name}/${folder}`));
      }),
  );
}

describe("no branch on a policy kind outside algorithms/", () => {
  it("finds the branches it looks for (the check can fail), and not a kind named as data", () => {
    const branching = [
      "switch (policy.kind) {",
      '    case "fixedWindow":',
      "  case 'tokenBucket': {",
      'if (p.kind === "concurrency") return;',
      'const lease = kind !== "slidingLog";',
      'return "leakyBucket" === spec.kind ? 1 : 2;',
      "if (kind == `slidingWindow`) x();",
      "switch (specs[0]!.kind) {",
    ];
    expect(branching.map((line) => kindBranches(line))).toEqual(branching.map((line) => [`1: ${line.trim()}`]));
    expect(kindBranches(branching.join("\n")).map((hit) => hit.split(":")[0])).toEqual(["1", "2", "3", "4", "5", "6", "7", "8"]);
    // a new kind is checked as soon as core's registry has it
    expect(kindBranches('case "gcraWindow":', ["gcraWindow"])).toEqual(['1: case "gcraWindow":']);
    const data = [
      'const p = fixedWindow({ limit: 3, window: "1m" });',
      'describe("fixedWindow", () => {});',
      'const spec = { kind: "tokenBucket", options: { capacity: 2, refillRate: 1 } };',
      "const definition = ALGORITHMS[policy.kind];",
      "switch (step.op) {",
      'case "refund":',
      'if (name === "fixedWindows") return;',
      'expect(ALGORITHMS).toEqual(["fixedWindow", "slidingWindow"]);',
    ];
    expect(data.flatMap((line) => kindBranches(line))).toEqual([]);
  });

  it("exempts files inside a folder named algorithms/ only", () => {
    expect(inAlgorithmsFolder("packages/core/src/algorithms/fixedWindow/index.ts")).toBe(true);
    expect(inAlgorithmsFolder("packages/redis/src/algorithms/slidingLog.ts")).toBe(true);
    expect(inAlgorithmsFolder("apps/bench/src/algorithms/index.ts")).toBe(true);
    expect(inAlgorithmsFolder("packages/core/src/algorithms.ts")).toBe(false);
    expect(inAlgorithmsFolder("packages/testing/src/reference.ts")).toBe(false);
  });

  it("holds for every TypeScript file of packages/*/{src,test} and apps/*/{src,test}", () => {
    const files = sourceFiles();
    // the search reaches the packages, the apps and their tests
    expect(files).toContain("packages/core/src/engine.ts");
    expect(files).toContain("packages/testing/src/conformance.ts");
    expect(files).toContain("apps/playground/src/simulation.ts");
    expect(files).toContain("apps/playground/test/simulation.test.ts");
    expect(files).toContain([...ABOUT_DISPATCH][0]);
    expect(files.some(inAlgorithmsFolder)).toBe(true);
    const found = files
      .filter((path) => !inAlgorithmsFolder(path) && !ABOUT_DISPATCH.has(path))
      .flatMap((path) => kindBranches(readFileSync(join(rootDir, path), "utf8")).map((hit) => `${path}:${hit}`));
    expect(found, "branch on a policy kind outside an algorithms/ folder: move it into that package's algorithms/ and look the kind up").toEqual([]);
  });
});
