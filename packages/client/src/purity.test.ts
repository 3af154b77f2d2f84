/**
 * The client runs wherever the Fetch API runs: no runtime dependencies, no `node:` imports, only
 * relative imports between its own files, and no work at module scope beyond constants.
 */
import { readFileSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import pkg from "../package.json";

const dir = new URL(".", import.meta.url);
const sources = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
  .map((f) => [f, readFileSync(new URL(f, dir), "utf8")] as const);

/** Module specifiers of static imports, re-exports, `import()` and `require()`, comments removed. */
function specifiers(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\sfrom\s*["'`]([^"'`]+)["'`]/g,
    /\bimport\s*["'`]([^"'`]+)["'`]/g,
    /\bimport\s*\(\s*["'`]([^"'`]+)["'`]\s*\)/g,
    /\brequire\s*\(\s*["'`]([^"'`]+)["'`]\s*\)/g,
  ];
  return patterns.flatMap((pattern) => [...code.matchAll(pattern)].map((m) => m[1] as string));
}

describe("client purity", () => {
  it("has no runtime dependencies", () => {
    expect(Object.keys((pkg as { dependencies?: object }).dependencies ?? {})).toEqual([]);
    expect(Object.keys((pkg as { peerDependencies?: object }).peerDependencies ?? {})).toEqual([]);
  });

  it("finds the sources", () => {
    expect(sources.map(([f]) => f).sort()).toEqual(["fetch.ts", "http-date.ts", "index.ts", "parse.ts", "structured-fields.ts"]);
  });

  it.each(sources)("%s imports only its sibling files", (_file, code) => {
    for (const specifier of specifiers(code)) expect(specifier).toMatch(/^\.\/[\w-]+\.js$/);
    expect(code).not.toMatch(/\bprocess\.|\bBuffer\b|\brequire\(/);
  });
});
