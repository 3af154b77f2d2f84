/**
 * Every published package (each non-private packages/*) is ready for `npm publish`, and what
 * `pnpm pack` makes of it works on its own — which is also how the README tells people to use the
 * packages from a clone while they are not on the registry:
 *
 * - the manifest: name, version, `license: "MIT"`, the repository (the root's, with the package's
 *   directory), `files`, a types-first `exports` map, `types`, `sideEffects: false`,
 *   `publishConfig.access: "public"` (scoped packages are private by default);
 * - a LICENSE beside it, the same as the repository's;
 * - `pnpm pack`: the tarball holds LICENSE, README.md, every file the `exports` map points to and
 *   no test file, and its package.json has no `workspace:` range left;
 * - the tarballs unpacked into a project outside the repository (peers linked from the
 *   workspace) load with `import` and with `require`, with the same exports; a package for
 *   Workers (its build imports `cloudflare:*`) is bundled from there with esbuild as wrangler
 *   would, and loaded in workerd (Miniflare) instead.
 *
 * Needs the packages built (`pnpm test` builds them first).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { packedTarballs } from "@sluice/testing/tarballs";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  repository?: { type: string; url: string; directory?: string };
  files?: string[];
  types?: string;
  sideEffects?: boolean;
  exports?: Record<string, unknown>;
  publishConfig?: { access?: string };
  peerDependencies?: Record<string, string>;
  dependencies?: Record<string, string>;
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;
const root = readJson<Manifest>(join(rootDir, "package.json"));

const published = readdirSync(join(rootDir, "packages"), { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(join(rootDir, "packages", e.name, "package.json")))
  .map((e) => ({ dir: join(rootDir, "packages", e.name), folder: e.name, manifest: readJson<Manifest>(join(rootDir, "packages", e.name, "package.json")) }))
  .filter((p) => p.manifest.private !== true)
  .sort((a, b) => a.folder.localeCompare(b.folder));

/** Every file an `exports` map points to (its string leaves), without the `@sluice/source` condition (sources for the workspace). */
function exportTargets(value: unknown, condition = ""): string[] {
  if (typeof value === "string") return condition === "@sluice/source" ? [] : [value];
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([key, inner]) => exportTargets(inner, key));
}

let workDir = "";
const tarballs = new Map<string, string>();

beforeAll(() => {
  // what `pnpm pack` makes of each package (packed once for these builds, shared with the other
  // tests that install or check the tarballs); it throws, naming the command, if one is not built
  const packed = packedTarballs();
  expect(Object.keys(packed.tarballs).sort()).toEqual(published.map((p) => p.manifest.name).sort());
  for (const p of published) tarballs.set(p.manifest.name, packed.tarballs[p.manifest.name] as string);
  workDir = mkdtempSync(join(tmpdir(), "sluice-pack-"));
}, 120_000);

afterAll(() => {
  if (workDir !== "") rmSync(workDir, { recursive: true, force: true });
});

describe("published packages", () => {
  it("are the ones the README lists", () => {
    expect(published.map((p) => p.manifest.name)).toEqual(expect.arrayContaining(["@sluice/client", "@sluice/cloudflare", "@sluice/core", "@sluice/hono", "@sluice/next", "@sluice/redis"]));
  });

  it.each(published.map((p) => [p.manifest.name, p] as const))("%s: publish-ready package.json and its LICENSE", (_name, { dir, folder, manifest }) => {
    expect(manifest.name).toBe(`@sluice/${folder}`);
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
    expect(manifest.license).toBe("MIT");
    expect(root.repository?.url).toMatch(/^git\+https:\/\/.+\.git$/);
    expect(manifest.repository).toEqual({ type: "git", url: root.repository?.url, directory: `packages/${folder}` });
    expect(manifest.files).toContain("dist");
    expect(manifest.sideEffects).toBe(false);
    expect(manifest.types).toMatch(/^\.\/dist\/.+\.d\.c?ts$/);
    expect(manifest.publishConfig).toEqual({ access: "public" });
    const main = manifest.exports?.["."] as { import?: Record<string, string>; require?: Record<string, string> } | undefined;
    expect(Object.keys(main?.import ?? {})[0]).toBe("types");
    expect(Object.keys(main?.require ?? {})[0]).toBe("types");
    expect(readFileSync(join(dir, "LICENSE"), "utf8")).toBe(readFileSync(join(rootDir, "LICENSE"), "utf8"));
  });

  it.each(published.map((p) => [p.manifest.name, p] as const))("%s: pnpm pack ships LICENSE, README, every export target, no tests, no workspace: range", async (name, { manifest }) => {
    const tarball = tarballs.get(name) as string;
    const { stdout } = await run("tar", ["-tzf", tarball]);
    const entries = stdout.trim().split("\n").map((e) => e.replace(/^package\//, ""));
    expect(entries).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json"]));
    for (const target of exportTargets(manifest.exports)) expect(entries, target).toContain(target.replace(/^\.\//, ""));
    expect(entries.filter((e) => /\.test\.ts$|(^|\/)test\//.test(e))).toEqual([]);
    const { stdout: packed } = await run("tar", ["-xzOf", tarball, "package/package.json"]);
    expect(packed).not.toContain("workspace:");
    expect(JSON.parse(packed).license).toBe("MIT");
  });

  it("unpacked outside the repository, each loads with import and with require (Workers packages: bundled, in workerd), with the same exports", async () => {
    const project = join(workDir, "project");
    mkdirSync(join(project, "node_modules", "@sluice"), { recursive: true });
    for (const p of published) {
      const target = join(project, "node_modules", "@sluice", p.folder);
      mkdirSync(target);
      await run("tar", ["-xzf", tarballs.get(p.manifest.name) as string, "-C", target, "--strip-components=1"]);
      // peers (hono, next, …) as the user would have installed them: the workspace's copies
      for (const peer of Object.keys(p.manifest.peerDependencies ?? {}).filter((d) => !d.startsWith("@sluice/"))) {
        const from = join(p.dir, "node_modules", peer);
        const to = join(project, "node_modules", peer);
        if (existsSync(from) && !existsSync(to)) {
          mkdirSync(join(to, ".."), { recursive: true });
          symlinkSync(from, to, "dir");
        }
      }
    }
    // a build that imports cloudflare:* runs in workerd only
    const forWorkers = (p: (typeof published)[number]) => readFileSync(join(project, "node_modules", "@sluice", p.folder, "dist", "index.js"), "utf8").match(/from\s*["']cloudflare:/) !== null;
    const onNode = published.filter((p) => !forWorkers(p));
    const onWorkers = published.filter(forWorkers);
    expect(onWorkers.map((p) => p.manifest.name)).toEqual(["@sluice/cloudflare"]);

    const script = `
      const { createRequire } = await import("node:module");
      const require = createRequire(process.cwd() + "/");
      const out = {};
      for (const name of ${JSON.stringify(onNode.map((p) => p.manifest.name))}) {
        const esm = Object.keys(await import(name)).filter((k) => k !== "default").sort();
        const cjs = Object.keys(require(name)).filter((k) => k !== "default" && k !== "__esModule").sort();
        out[name] = { esm, cjs };
      }
      console.log(JSON.stringify(out));
    `;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: project });
    const loaded = JSON.parse(stdout) as Record<string, { esm: string[]; cjs: string[] }>;
    for (const p of onNode) {
      const { esm, cjs } = loaded[p.manifest.name] as { esm: string[]; cjs: string[] };
      expect(esm.length, p.manifest.name).toBeGreaterThan(0);
      expect(cjs, p.manifest.name).toEqual(esm);
    }
    expect(loaded["@sluice/core"]?.esm).toEqual(expect.arrayContaining(["RateLimiter", "MemoryStore", "tokenBucket", "createGuard"]));

    // Workers: a Worker that imports the unpacked package (resolved from the project's
    // node_modules, as wrangler's esbuild does) and answers with its export names
    for (const p of onWorkers) {
      const bundled = await build({
        stdin: {
          contents: `import * as m from "${p.manifest.name}";\nexport { SluiceLimiter } from "${p.manifest.name}";\nexport default { fetch: () => Response.json(Object.keys(m).sort()) };\n`,
          resolveDir: project,
          loader: "js",
        },
        bundle: true,
        write: false,
        format: "esm",
        platform: "browser",
        target: "es2022",
        conditions: ["workerd", "worker", "browser"],
        external: ["cloudflare:*"],
        logLevel: "silent",
      });
      const mf = new Miniflare({
        cf: false,
        modules: true,
        script: bundled.outputFiles[0]?.text ?? "",
        compatibilityDate: "2026-05-01",
        durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: true } },
      });
      try {
        const names = (await (await mf.dispatchFetch("http://localhost/")).json()) as string[];
        expect(names, p.manifest.name).toEqual(expect.arrayContaining(["DurableObjectStore", "SluiceLimiter", "withRateLimit"]));
      } finally {
        await mf.dispose();
      }
    }
  }, 60_000);
});
