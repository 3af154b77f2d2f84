/**
 * `pnpm run check:packages` inside the suite: every published package passes `publint --strict`
 * and `attw` (ESM, CommonJS and types resolve for every entry under node10, node16 and bundler
 * resolution) — its own `check:package` script, `publint --strict && attw --pack .`, run on the
 * tarball `pnpm pack` makes of it (what `attw --pack` packs and checks, and what a user installs),
 * packed once for the whole suite by `@sluice/testing/tarballs` instead of once per tool. Needs the
 * packages built (`pnpm test` builds them first). Run here so that it overlaps the tests that
 * mostly wait.
 */
import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { packedTarballs } from "@sluice/testing/tarballs";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const packagesDir = join(rootDir, "packages");

interface Manifest {
  name: string;
  private?: boolean;
  scripts?: Record<string, string>;
}

const published = readdirSync(packagesDir)
  .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8")) as Manifest }))
  .filter(({ manifest }) => manifest.private !== true);

/** The command-line entry of a tool the root package.json pins (what `pnpm run` finds on its PATH). */
function bin(pkg: string, name: string): string {
  const pkgDir = join(rootDir, "node_modules", pkg);
  const { bin: bins } = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as { bin: Record<string, string> };
  return join(pkgDir, bins[name] as string);
}

const TOOLS = { publint: bin("publint", "publint"), attw: bin("@arethetypeswrong/cli", "attw") };

let tarballs: Record<string, string> = {};

beforeAll(() => {
  tarballs = packedTarballs().tarballs;
}, 120_000);

/** Runs a tool in the package's directory (where its config would be read from); its output if it fails. */
function failureOf(tool: keyof typeof TOOLS, args: string[], cwd: string): Promise<string> {
  return run(process.execPath, [TOOLS[tool], ...args], { cwd, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1" } }).then(
    () => "",
    (error: { stdout?: string; stderr?: string }) => `${tool} failed:\n${error.stdout ?? ""}${error.stderr ?? ""}` || String(error),
  );
}

describe("check:package", () => {
  it("every published package has the check, and it is publint --strict and attw --pack", () => {
    expect(published.length).toBeGreaterThanOrEqual(7);
    for (const { dir, manifest } of published) expect(manifest.scripts?.["check:package"], dir).toBe("publint --strict && attw --pack .");
    expect(Object.keys(tarballs).sort()).toEqual(published.map((p) => p.manifest.name).sort());
  });

  it.each(published.map((p) => [p.dir, p] as const))("packages/%s passes publint --strict and attw, on the tarball pnpm pack makes of it", async (dir, { manifest }) => {
    const tarball = tarballs[manifest.name] as string;
    const cwd = join(packagesDir, dir);
    expect(await failureOf("publint", ["--strict", tarball], cwd)).toBe("");
    expect(await failureOf("attw", [tarball], cwd)).toBe("");
  });
});
