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
    for (const file of ["./index.ts", "./store.ts", "./engine.ts", "./memory-store.ts", "./limiter/index.ts", "./guard.ts", "./headers.ts", "./client-ip.ts"]) {
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

  it("the entries are index.ts and store.ts, and package.json exports exactly them", () => {
    const manifest = pkg as unknown as { exports: Record<string, unknown>; typesVersions?: Record<string, Record<string, string[]>> };
    const entries = Object.entries(manifest.exports)
      .filter(([subpath]) => subpath !== "./package.json")
      .map(([subpath, conditions]) => [subpath, (conditions as Record<string, unknown>)["@sluice/source"]]);
    expect(entries).toEqual([
      [".", "./src/index.ts"],
      ["./adapter", "./src/adapter.ts"],
      ["./store", "./src/store.ts"],
    ]);
    // node10 resolution (no exports map) finds the subpaths' types through typesVersions
    expect(manifest.typesVersions?.["*"]?.store).toEqual(["./dist/store.d.cts"]);
    expect(manifest.typesVersions?.["*"]?.adapter).toEqual(["./dist/adapter.d.cts"]);
  });

  /** The glob key (`./a/b.ts`) of the relative specifier `specifier` in the source `from`. */
  const resolveFrom = (from: string, specifier: string): string => {
    const parts = from.split("/").slice(0, -1);
    for (const part of specifier.replace(/\.js$/, ".ts").split("/")) {
      if (part === "..") parts.pop();
      else if (part !== ".") parts.push(part);
    }
    return parts.join("/");
  };

  it("every source is reached from an entry (index.ts, adapter.ts, store.ts) through relative imports", () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = sources[file];
      if (code === undefined) throw new Error(`${file} is imported but not found`);
      for (const s of specifiers(code)) visit(resolveFrom(file, s));
    };
    visit("./index.ts");
    visit("./adapter.ts");
    visit("./store.ts");
    expect([...seen].sort()).toEqual(Object.keys(sources).sort());
  });

  it("no entry hands out the engine's typed-array layout; the store entry has what a store author needs", async () => {
    const main: Record<string, unknown> = await import("./index.js");
    const store: Record<string, unknown> = await import("./store.js");
    const adapter: Record<string, unknown> = await import("./adapter.js");
    for (const name of ["evaluate", "stateNow", "peekPolicy", "consumeAll", "peekAll", "refundAll", "releaseAll", "layoutOf", "expiresAtUs", "maxCost", "NUM_WIDTH", "OBJ_WIDTH", "ALGORITHMS"]) {
      expect(main, name).not.toHaveProperty(name);
      expect(store, name).not.toHaveProperty(name);
      expect(adapter, name).not.toHaveProperty(name);
    }
    for (const name of ["toDecision", "storageKey", "policyField", "namespaceKey", "encodeKeyPart", "assertKey", "assertNamespace", "decideState", "peekState", "refundState", "releaseState", "allowedFromState"]) {
      expect(main, name).not.toHaveProperty(name);
      expect(store, name).toHaveProperty(name);
    }
    for (const name of ["MAX_POLICIES", "MAX_KEY_LENGTH"]) {
      expect(main[name]).toBe(store[name]);
    }
  });

  it("package.json declares no runtime dependencies", () => {
    const manifest = pkg as Record<string, unknown>;
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependencies).toBeUndefined();
    expect(manifest.optionalDependencies).toBeUndefined();
    expect(manifest.bundleDependencies ?? manifest.bundledDependencies).toBeUndefined();
  });
});
