/**
 * `pnpm run typecheck` inside the suite: each TypeScript program of the repository compiles without
 * an error — core alone (its own `lib`: no DOM, no Node), the workspace (every package's and app's
 * sources and tests), the Cloudflare package and the Worker app (Workers types). Run here rather
 * than before Vitest so that the compilers share the machine with the tests that mostly wait (on
 * servers, builds and child processes) instead of running first, one after another.
 *
 * Each program keeps TypeScript's incremental state (`--incremental`, its `.tsbuildinfo` under
 * `node_modules/.cache/typecheck/`, see build-info.ts): a run after a change checks again what the
 * change can affect and reads the other files' diagnostics from the last run; an unchanged program
 * costs the compiler's start and the reading of its files' hashes.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { buildInfoPath, withBuildInfo } from "./build-info.js";

const run = promisify(execFile);
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const tsc = fileURLToPath(new URL("../../../node_modules/typescript/bin/tsc", import.meta.url));

/** The programs `pnpm run typecheck` compiles, in its order (package.json's script). */
const PROJECTS = ["packages/core", "tsconfig.json", "packages/cloudflare", "apps/worker"];

describe("typecheck", () => {
  it("the root script compiles exactly these programs", async () => {
    const manifest = JSON.parse(readFileSync(join(rootDir, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(manifest.scripts.typecheck).toBe(PROJECTS.map((p) => `tsc -p ${p}${p === "packages/core" ? " --noEmit" : ""}`).join(" && "));
  });

  it.each(PROJECTS)("%s compiles without an error", async (project) => {
    const result = await withBuildInfo(buildInfoPath("typecheck", project), (buildInfo) =>
      run(process.execPath, [tsc, "-p", project, "--noEmit", "--incremental", "--tsBuildInfoFile", buildInfo], { cwd: rootDir, maxBuffer: 64 * 1024 * 1024 }).then(
        () => "",
        (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}` || String(error),
      ),
    );
    expect(result).toBe("");
    // a cold compile of the workspace program takes ~40 s alone and well over 2 min on a loaded
    // 2-core machine beside the rest of the suite: the limit is there for a hung compiler only
  }, 420_000);
});
