/**
 * TypeScript's incremental state for the programs readme-snippets.test.ts compiles: one
 * `.tsbuildinfo` per program under `node_modules/.cache/<dir>/`, so a run after a change checks
 * again only what the change can affect and takes the other files' diagnostics from the last run.
 *
 * The compiler must be given the same `tsBuildInfoFile` every time (a different path is a changed
 * option, and everything is checked again), so two runs at once (a targeted run beside
 * `pnpm test`, say) take turns: a lock directory beside the file,
 * holding its owner's pid, taken before the compiler starts and removed when it ends; a lock whose
 * owner is gone is taken over. A run that cannot get the lock within `waitMs` compiles without the
 * state (a full check) rather than wait longer.
 *
 * @module
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

/** Where the state of the program `name` is kept, in `node_modules/.cache/<dir>/`. */
export function buildInfoPath(dir: string, name: string): string {
  return join(rootDir, "node_modules/.cache", dir, `${name.replace(/[^\w]+/g, "-").replace(/^-|-$/g, "")}.tsbuildinfo`);
}

function ownerAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, "pid"), "utf8"));
  } catch {
    return true; // just made: its pid is being written
  }
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs `compile` with the path of the program's `.tsbuildinfo`, holding its lock; if the lock stays
 * taken for `waitMs`, with a path of its own in a temporary directory instead (no state: a full check).
 */
export async function withBuildInfo<T>(file: string, compile: (tsBuildInfoFile: string) => Promise<T>, waitMs = 5 * 60_000): Promise<T> {
  mkdirSync(dirname(file), { recursive: true });
  const lock = `${file}.lock`;
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (!ownerAlive(lock)) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) {
        const own = mkdtempSync(join(tmpdir(), "sluice-tsbuildinfo-"));
        try {
          return await compile(join(own, "program.tsbuildinfo"));
        } finally {
          rmSync(own, { recursive: true, force: true });
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  try {
    return await compile(file);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
