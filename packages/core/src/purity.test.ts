/**
 * Core runs wherever the Fetch API runs: no runtime dependencies, no `node:` imports, only
 * relative imports between its own files. The sources are read through Vite's `import.meta.glob`
 * (no `node:fs` here either: this package is type-checked without Node's types).
 */
import { describe, expect, it } from "vitest";
import pkg from "../package.json";

declare global {
  interface ImportMeta {
    glob<T>(pattern: string | string[], options: { eager: true; query: "?raw"; import: "default" }): Record<string, T>;
  }
}

const sources = import.meta.glob<string>(["./**/*.ts", "!./**/*.test.ts"], { eager: true, query: "?raw", import: "default" });

/** `code` without comments (JSDoc examples show imports of the package itself). */
function withoutComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** Every module specifier in `code`: static imports and re-exports, side-effect imports, `import()`, `require()`. */
function specifiers(source: string): string[] {
  const code = withoutComments(source);
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\sfrom\s*["'`]([^"'`]+)["'`]/g,
    /\bimport\s*["'`]([^"'`]+)["'`]/g,
    /\bimport\s*\(\s*["'`]([^"'`]+)["'`]\s*\)/g,
    /\brequire\s*\(\s*["'`]([^"'`]+)["'`]\s*\)/g,
  ];
  for (const pattern of patterns) for (const match of code.matchAll(pattern)) found.push(match[1] as string);
  return found;
}

describe("core purity", () => {
  it("finds the sources", () => {
    const files = Object.keys(sources).sort();
    for (const file of ["./index.ts", "./engine.ts", "./memory-store.ts", "./limiter.ts", "./guard.ts", "./headers.ts", "./client-ip.ts"]) {
      expect(files).toContain(file);
    }
    expect(files.some((f) => f.endsWith(".test.ts"))).toBe(false);
  });

  it("the import scanner sees every kind of import", () => {
    const sample = [
      'import { readFile } from "node:fs";',
      "import type { X } from 'hono';",
      'import "./side-effect.js";',
      'export * from "./all.js";',
      'export { a,\n  b } from "../up.js";',
      'const m = await import("@upstash/redis");',
      'const c = require("crypto"); // see https://example.com',
      '/** @example import { x } from "@sluice/core"; */',
      '// import { y } from "commented-out";',
    ].join("\n");
    expect(specifiers(sample).sort()).toEqual(["../up.js", "./all.js", "./side-effect.js", "@upstash/redis", "crypto", "hono", "node:fs"].sort());
  });

  it.each(Object.entries(sources))("%s imports only relative paths, nothing from node:", (_file, code) => {
    const imported = specifiers(code);
    expect(imported.filter((s) => !s.startsWith("./") && !s.startsWith("../"))).toEqual([]);
    expect(withoutComments(code)).not.toMatch(/["'`]node:/);
    expect(withoutComments(code)).not.toMatch(/\brequire\s*\(/);
  });

  it("every source is reached from index.ts through relative imports", () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = sources[file];
      if (code === undefined) throw new Error(`${file} is imported but not found`);
      for (const s of specifiers(code)) visit(`./${s.replace(/^\.\//, "").replace(/\.js$/, ".ts")}`);
    };
    visit("./index.ts");
    expect([...seen].sort()).toEqual(Object.keys(sources).sort());
  });

  it("package.json declares no runtime dependencies", () => {
    const manifest = pkg as Record<string, unknown>;
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependencies).toBeUndefined();
    expect(manifest.optionalDependencies).toBeUndefined();
    expect(manifest.bundleDependencies ?? manifest.bundledDependencies).toBeUndefined();
  });
});
