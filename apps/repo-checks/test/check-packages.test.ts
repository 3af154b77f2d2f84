/**
 * `pnpm run check:packages` inside the suite: every published package passes `publint --strict`
 * and `attw --pack` (ESM, CommonJS and types resolve for every entry under node10, node16 and
 * bundler resolution) — its own `check:package` script. Needs the packages built (`pnpm test`
 * builds them first). Run here so that it overlaps the tests that mostly wait.
 */
import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const packagesDir = fileURLToPath(new URL("../../../packages", import.meta.url));

const published = readdirSync(packagesDir).filter((dir) => {
  const manifest = JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8")) as { private?: boolean; scripts?: Record<string, string> };
  return manifest.private !== true;
});

describe("check:package", () => {
  it("every published package has the check, and it is publint --strict and attw --pack", () => {
    expect(published.length).toBeGreaterThanOrEqual(7);
    for (const dir of published) {
      const manifest = JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8")) as { scripts?: Record<string, string> };
      expect(manifest.scripts?.["check:package"], dir).toBe("publint --strict && attw --pack .");
    }
  });

  it.each(published)("packages/%s passes publint --strict and attw --pack", async (dir) => {
    const failure = await run("pnpm", ["run", "--silent", "check:package"], { cwd: join(packagesDir, dir), maxBuffer: 64 * 1024 * 1024 }).then(
      () => "",
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}` || String(error),
    );
    expect(failure).toBe("");
  });
});
