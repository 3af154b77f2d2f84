#!/usr/bin/env node
/**
 * `pnpm run typecheck`: each TypeScript program of the repository compiles without an error —
 * core alone (its own `lib`: no DOM, no Node), the workspace (every package's and app's sources and
 * tests), the Cloudflare package and the Worker app (Workers types) — checked by TypeScript 7, the
 * native compiler (`typescript7`, an alias of `typescript@7` in apps/repo-checks).
 *
 * Why two TypeScripts: the packages are built by tsup, whose declaration build needs TypeScript 5
 * (5.9.3, the root's `typescript`; 6 and 7 break it), and that build already checks every
 * package's sources with 5.9.3. This check adds the tests and the apps, and TypeScript 7 does it in
 * about half the CPU time 5.9.3 takes (about 26 s against 49 s, cold, on two cores) — and proves
 * the sources and the published types compile under 7 as well.
 *
 * Exits 1 after printing every program's diagnostics as tsc prints them (`file(line,col): error …`).
 *
 * @example
 * ```sh
 * pnpm run typecheck
 * node scripts/typecheck.mjs packages/core   # one program
 * ```
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The programs, in the order they are checked (a tsconfig.json or its directory, as `tsc -p` takes it). */
export const PROJECTS = ["packages/core", "tsconfig.json", "packages/cloudflare", "apps/worker"];

/** TypeScript 7's `tsc` (apps/repo-checks' `typescript7`; its package exports no `bin/tsc` to resolve). */
export function tscPath() {
  const path = join(ROOT_DIR, "apps/repo-checks/node_modules/typescript7/bin/tsc");
  if (!existsSync(path)) {
    throw new Error("[sluice] typecheck: TypeScript 7 (typescript7 in apps/repo-checks) is not installed: run `pnpm install` at the repository root");
  }
  return path;
}

/**
 * Checks one program (`tsc -p <project> --noEmit`, run from the root); resolves to its exit code and
 * what it printed (empty when the program compiles without an error).
 * @param {string} project
 * @returns {Promise<{ code: number | null; output: string }>}
 */
export function typecheck(project) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tscPath(), "-p", project, "--noEmit", "--pretty", "false"], { cwd: ROOT_DIR, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output: output.trim() }));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const projects = process.argv.length > 2 ? process.argv.slice(2) : PROJECTS;
  let failed = false;
  for (const project of projects) {
    const { code, output } = await typecheck(project);
    if (output !== "") console.log(output);
    if (code !== 0) {
      failed = true;
      console.error(`[sluice] typecheck: ${project} has errors (tsc exited with ${code})`);
    }
  }
  process.exit(failed ? 1 : 0);
}
