/**
 * The code as the next contributor meets it, held to numbers (the measures are in `structure.ts`):
 *
 * - no source function over 100 lines in `packages/*\/src` (tests and the test kit aside);
 * - no function of the test kit (`packages/testing/src`, its tests aside) over 200 lines: a
 *   conformance suite grows by a module per feature, not by lengthening one function;
 * - no test file over 600 lines, in the packages or the apps;
 * - no import cycle among the packages' files, type-only imports included: shared types sit below
 *   the modules that use them;
 * - no import that reaches into another package's or app's files (`../../testing/src/…`,
 *   `@sluice/testing/src/…`): a package is reached through its name and its entries;
 * - no cycle among the packages' runtime dependencies (`dependencies`, `peerDependencies`,
 *   `optionalDependencies`). With dev dependencies the one cycle allowed is the test kit's with
 *   core (`pnpm-workspace.yaml` says why), so every cycle then runs through `@sluice/testing`.
 *
 * Each failing check lists what breaks it, with the file and line, so the message is the to-do list.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ROOT,
  codeFiles,
  cyclesOf,
  dependencyCycles,
  functionLengths,
  importCycles,
  isTest,
  lineCount,
  RUNTIME_FIELDS,
  srcReaches,
  tsFiles,
  workspaceMembers,
} from "./structure.js";

const MAX_SOURCE_FUNCTION_LINES = 100;
const MAX_TEST_KIT_FUNCTION_LINES = 200;
const MAX_TEST_FILE_LINES = 600;

/** The one package whose dev-dependency cycle with core is allowed (see `pnpm-workspace.yaml`). */
const TEST_KIT = "@sluice/testing";
const TEST_KIT_SRC = join(ROOT, "packages/testing/src");

const members = workspaceMembers();
const packages = members.filter((m) => relative(ROOT, m.dir).startsWith("packages/"));

/** `file:line name (n lines)`, what a reader looks for. */
const described = (f: { file: string; line: number; name: string; lines: number }) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`;

/** Every function of `files` longer than `max` lines. */
function longFunctions(files: readonly string[], max: number): string[] {
  return files.flatMap(functionLengths).filter((f) => f.lines > max).map(described);
}

describe("the measures find what they look for", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-structure-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
    return join(dir, path);
  };

  it("measures every function, method and arrow function, first line to last", () => {
    const body = Array.from({ length: 99 }, (_, i) => `  const v${i} = ${i};`).join("\n");
    const file = write("long.ts", `export function long() {\n${body}\n}\nexport const short = () => 1;\nclass C {\n  m() {\n    return 1;\n  }\n}\n`);
    const lengths = functionLengths(file).map((f) => [f.name, f.lines]);
    expect(lengths).toEqual([
      ["long", 101],
      ["short", 1],
      ["m", 3],
    ]);
    expect(longFunctions([file], 100)).toEqual([`${relative(ROOT, file)}:1 long (101 lines)`]);
  });

  it("finds an import cycle through a type-only import or a type query, not through import()", () => {
    const a = write("cycle/a.ts", 'import type { B } from "./b.js";\nexport type A = B;\n');
    const b = write("cycle/b.ts", 'import { c } from "./c/index.js";\nexport type B = typeof c;\n');
    const c = write("cycle/c/index.ts", 'export const c: typeof import("../a.js") | undefined = undefined;\n');
    const lazy = write("cycle/lazy.ts", 'export const load = () => import("./b.js");\n');
    const free = write("cycle/free.ts", 'import "./lazy.js";\n');
    expect(importCycles([a, b, c, lazy, free])).toEqual([[a, b, c].map((f) => relative(ROOT, f)).sort()]);
    expect(importCycles([a, b, lazy, free])).toEqual([]);
  });

  it("finds an import into another member's files, by a relative path or by its name and src/", () => {
    const core = { dir: join(dir, "packages/core"), name: "@sluice/core" };
    const kit = { dir: join(dir, "packages/testing"), name: "@sluice/testing" };
    const file = write(
      "packages/core/src/x.test.ts",
      [
        'import { ok } from "./own.js";',
        'import { model } from "../../testing/src/reference.js";',
        'import type { Vector } from "@sluice/testing/src/vectors.js";',
        'import { vectors } from "@sluice/testing/vectors";',
        'const lazy = await import("../../testing/test/helpers.js");',
        'export { shared } from "../../../vitest.shared.js";',
      ].join("\n"),
    );
    const at = relative(ROOT, file);
    expect(srcReaches(file, core, [core, kit])).toEqual([
      `${at} → ../../testing/src/reference.js`,
      `${at} → @sluice/testing/src/vectors.js`,
      `${at} → ../../testing/test/helpers.js`,
    ]);
  });

  it("finds a cycle in a graph, a self-loop included, and nothing in a tree", () => {
    const edges = new Map([
      ["core", ["testing"]],
      ["testing", ["core"]],
      ["hono", ["core"]],
      ["self", ["self"]],
    ]);
    expect(cyclesOf([...edges.keys()], edges)).toEqual([["core", "testing"], ["self"]]);
    expect(cyclesOf(["a", "b"], new Map([["a", ["b"]]]))).toEqual([]);
  });

  it("reads the workspace: every package and app, and their files", () => {
    const names = members.map((m) => m.name);
    expect(names).toEqual(expect.arrayContaining(["@sluice/core", "@sluice/hono", TEST_KIT, "@sluice/repo-checks", "@sluice/docs"]));
    expect(packages.map((m) => m.name)).not.toContain("@sluice/demo");
    const files = members.flatMap((m) => codeFiles(m.dir)).map((f) => relative(ROOT, f));
    expect(files).toEqual(expect.arrayContaining(["packages/core/src/engine.ts", "apps/next/app/page.tsx", "apps/docs/.vitepress/config.ts", "apps/repo-checks/test/compile-worker.mjs"]));
    expect(files.filter((f) => /(^|\/)(node_modules|dist)\//.test(f))).toEqual([]);
  });
});

describe("the code's structure", () => {
  it(`no source function over ${MAX_SOURCE_FUNCTION_LINES} lines (packages/*/src, tests and the test kit aside)`, () => {
    const sources = packages.flatMap((m) => tsFiles(join(m.dir, "src"))).filter((f) => !isTest(f) && !f.startsWith(TEST_KIT_SRC));
    expect(sources.map((f) => relative(ROOT, f))).toContain("packages/core/src/pipeline/check.ts");
    expect(longFunctions(sources, MAX_SOURCE_FUNCTION_LINES), "split these into named parts").toEqual([]);
  });

  it(`no test-kit function over ${MAX_TEST_KIT_FUNCTION_LINES} lines (packages/testing/src, its tests aside)`, () => {
    const kit = tsFiles(TEST_KIT_SRC).filter((f) => !isTest(f));
    expect(kit.map((f) => relative(ROOT, f))).toContain("packages/testing/src/vectors.ts");
    expect(longFunctions(kit, MAX_TEST_KIT_FUNCTION_LINES), "split these into modules a store's test file can run alone").toEqual([]);
  });

  it(`no test file over ${MAX_TEST_FILE_LINES} lines (packages and apps)`, () => {
    const tests = members.flatMap((m) => codeFiles(m.dir)).filter(isTest);
    expect(tests.map((f) => relative(ROOT, f))).toEqual(expect.arrayContaining(["packages/core/src/limiter.test.ts", "apps/demo/test/e2e.test.ts"]));
    const long = tests.filter((f) => lineCount(f) > MAX_TEST_FILE_LINES).map((f) => `${relative(ROOT, f)} (${lineCount(f)} lines)`);
    expect(long, "split these by what they promise").toEqual([]);
  });

  it("no import cycle among the packages' files (type-only imports included)", () => {
    const files = packages.flatMap((m) => tsFiles(m.dir));
    expect(importCycles(files), "each list is one cycle: move what they share below them").toEqual([]);
  });

  it("no import reaches into another package's or app's files (packages and apps)", () => {
    const reaches = members.flatMap((m) => codeFiles(m.dir).flatMap((f) => srcReaches(f, m, members)));
    expect(reaches, "import these through the package's name and an entry of its exports").toEqual([]);
  });

  it("the packages' runtime dependencies form no cycle; with dev dependencies, only through the test kit", () => {
    expect(dependencyCycles(members, RUNTIME_FIELDS), "a runtime dependency cycle").toEqual([]);
    const withDev = dependencyCycles(members, [...RUNTIME_FIELDS, "devDependencies"]);
    expect(withDev.filter((cycle) => !cycle.includes(TEST_KIT)), "a dev-dependency cycle that does not run through the test kit").toEqual([]);
    // the exception is the workspace's to declare, and pnpm-workspace.yaml says why
    expect(readFileSync(join(ROOT, "pnpm-workspace.yaml"), "utf8")).toMatch(/^ignoreWorkspaceCycles: true$/m);
  });
});
