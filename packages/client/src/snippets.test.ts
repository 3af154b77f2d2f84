/**
 * The TypeScript blocks of this package's README and of the root README's "Calling a
 * rate-limited API" compile as a user's code would: `import ... from "@sluice/client"` in an ES
 * module, under `moduleResolution` `nodenext` and `bundler`, with and without the DOM library.
 * The package resolves to its sources (the `@sluice/source` export condition), so no build is
 * needed; the built types are checked by `attw` in `check:package`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const typesNode = dirname(createRequire(import.meta.url).resolve("@types/node/package.json"));

function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  expect(start, `no "${heading}" section`).toBeGreaterThanOrEqual(0);
  const end = markdown.indexOf("\n## ", start + heading.length + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

const snippets: [string, string][] = [
  ...tsBlocks(readFileSync(join(packageDir, "README.md"), "utf8")).map((code, i) => [`client-readme-${i + 1}.ts`, code] as [string, string]),
  ...tsBlocks(section(readFileSync(join(rootDir, "README.md"), "utf8"), "## Calling a rate-limited API")).map(
    (code, i) => [`root-readme-${i + 1}.ts`, code] as [string, string],
  ),
];

// A user's project: an ES module package with @sluice/client and @types/node installed.
const project = mkdtempSync(join(tmpdir(), "sluice-client-readme-"));
writeFileSync(join(project, "package.json"), JSON.stringify({ name: "readme-check", type: "module", private: true }));
mkdirSync(join(project, "node_modules", "@sluice"), { recursive: true });
mkdirSync(join(project, "node_modules", "@types"), { recursive: true });
symlinkSync(packageDir, join(project, "node_modules", "@sluice", "client"), "dir");
symlinkSync(typesNode, join(project, "node_modules", "@types", "node"), "dir");
for (const [name, code] of snippets) writeFileSync(join(project, name), code);

afterAll(() => {
  rmSync(project, { recursive: true, force: true });
});

const base: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  types: ["node"],
  customConditions: ["@sluice/source"],
};

describe("README code compiles", () => {
  it("finds the blocks", () => {
    expect(snippets.map(([name]) => name)).toEqual(["client-readme-1.ts", "root-readme-1.ts"]);
  });

  it.each([
    ["nodenext", { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }],
    ["bundler", { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }],
    ["nodenext, Node types only (no DOM)", { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, lib: ["lib.es2022.d.ts"] }],
  ] as [string, ts.CompilerOptions][])("%s", (_name, options) => {
    const program = ts.createProgram(
      snippets.map(([name]) => join(project, name)),
      { ...base, ...options },
    );
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${d.file.fileName.replace(project, "")}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : "";
      return where + ts.flattenDiagnosticMessageText(d.messageText, "\n");
    });
    expect(diagnostics).toEqual([]);
    // the package really was resolved from the user's node_modules
    expect(program.getSourceFiles().some((f) => f.fileName.endsWith("/client/src/fetch.ts"))).toBe(true);
  }, 30_000);
});
