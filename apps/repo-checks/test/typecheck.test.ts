/**
 * `pnpm run typecheck` inside the suite: each TypeScript program of the repository compiles without
 * an error — core alone (its own `lib`: no DOM, no Node), the workspace (every package's and app's
 * sources and tests), the Cloudflare package and the Worker app (Workers types). Run here rather
 * than before Vitest so that the compilers share the machine with the tests that mostly wait (on
 * servers, builds and child processes) instead of running first, one after another.
 *
 * The programs are compiled one after another in one worker thread (compile-worker.mjs, as `tsc -p
 * <project> --noEmit` reads each tsconfig.json), and share what it parsed: core's sources, the
 * libraries and `@types/node` are parsed once for all four, not once per `tsc` process.
 *
 * Each program keeps TypeScript's incremental state (`--incremental`, its `.tsbuildinfo` under
 * `node_modules/.cache/typecheck/`, see build-info.ts): a run after a change checks again what the
 * change can affect and reads the other files' diagnostics from the last run; an unchanged program
 * costs the reading of its files' hashes.
 */
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { buildInfoPath, withBuildInfo } from "./build-info.js";
import { compiler } from "./compile-client.js";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const programs = compiler();
afterAll(() => programs.close());

/** The programs `pnpm run typecheck` compiles, in its order (package.json's script). */
const PROJECTS = ["packages/core", "tsconfig.json", "packages/cloudflare", "apps/worker"];

describe("typecheck", () => {
  it("the root script compiles exactly these programs", async () => {
    const manifest = JSON.parse(readFileSync(join(rootDir, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(manifest.scripts.typecheck).toBe(PROJECTS.map((p) => `tsc -p ${p}${p === "packages/core" ? " --noEmit" : ""}`).join(" && "));
  });

  it.each(PROJECTS)("%s compiles without an error", async (project) => {
    const diagnostics = await withBuildInfo(buildInfoPath("typecheck", project), (buildInfo) => programs.compile({ project, cwd: rootDir, buildInfo }));
    // as tsc prints them: file(line): message
    const result = diagnostics.map(({ file, line, message }) => (file === undefined ? message : `${relative(rootDir, file)}(${line + 1}): ${message}`)).join("\n");
    expect(result).toBe("");
    // a cold compile of the workspace program takes ~40 s alone and well over 2 min on a loaded
    // 2-core machine beside the rest of the suite: the limit is there for a hung compiler only
  }, 420_000);
});
