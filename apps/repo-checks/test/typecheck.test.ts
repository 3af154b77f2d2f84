/**
 * `pnpm run typecheck` inside the suite: each TypeScript program of the repository compiles without
 * an error — core alone (its own `lib`: no DOM, no Node), the workspace (every package's and app's
 * sources and tests), the Cloudflare package and the Worker app (Workers types). Run here rather
 * than before Vitest so that the compiler shares the machine with the tests that mostly wait (on
 * servers, builds and child processes) instead of running first.
 *
 * The programs are checked by TypeScript 7 (scripts/typecheck.mjs says why), one after another, each
 * as `tsc -p <project> --noEmit` checks it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { PROJECTS, typecheck } from "../../../scripts/typecheck.mjs";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

describe("typecheck", () => {
  it("the root script checks these programs with TypeScript 7", async () => {
    const manifest = JSON.parse(readFileSync(join(rootDir, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(manifest.scripts.typecheck).toBe("node scripts/typecheck.mjs");
    expect(PROJECTS).toEqual(["packages/core", "tsconfig.json", "packages/cloudflare", "apps/worker"]);
    const repoChecks = JSON.parse(readFileSync(join(rootDir, "apps/repo-checks/package.json"), "utf8")) as { devDependencies: Record<string, string> };
    expect(repoChecks.devDependencies.typescript7).toMatch(/^npm:typescript@7\./);
  });

  it.each(PROJECTS)("%s compiles without an error", async (project) => {
    // as tsc prints them: file(line,col): error TS…: message
    expect(await typecheck(project)).toEqual({ code: 0, output: "" });
    // a cold check of the workspace program takes ~10 s alone and longer on a loaded 2-core machine
    // beside the rest of the suite: the limit is there for a hung compiler only
  }, 420_000);
});
