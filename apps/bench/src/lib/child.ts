/**
 * Runs a benchmark function in a fresh Node process, so that one measurement's JIT feedback,
 * garbage and heap growth never leak into the next (V8 optimizes a call site for the shapes it has
 * seen: contenders sharing a process would slow each other down in ways a real application with
 * one limiter never sees).
 *
 * @module
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The package directory: children run from here so that `--import tsx` and the export condition resolve. */
const packageDir = fileURLToPath(new URL("../../", import.meta.url));
const childEntry = fileURLToPath(new URL("./run-child.ts", import.meta.url));

/** Node flags of a child: TypeScript through tsx, workspace packages from source, `gc()` exposed. */
export const CHILD_NODE_FLAGS = ["--conditions=@sluice/source", "--expose-gc", "--import", "tsx"] as const;

/**
 * Calls `moduleUrl`'s export `name` with `args` (JSON) in a fresh Node process and resolves with
 * its JSON result. The export must be an async function of JSON-serializable arguments.
 *
 * @example
 * ```ts
 * const url = new URL("../memory-contenders.ts", import.meta.url).href;
 * const heap = await runInChild<HeapResult>(url, "measureHeap", ["tokenBucket", 1_000_000]);
 * ```
 */
export function runInChild<T>(moduleUrl: string, name: string, args: readonly unknown[]): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...CHILD_NODE_FLAGS, childEntry, moduleUrl, name, JSON.stringify(args)],
      { cwd: packageDir, maxBuffer: 16 << 20, timeout: 600_000 },
      (error, stdout, stderr) => {
        if (error) {
          reject(new Error(`${name}(${JSON.stringify(args)}) failed in its child process: ${error.message}\n${stderr}`));
          return;
        }
        const line = stdout.trim().split("\n").at(-1) ?? "";
        try {
          resolve(JSON.parse(line) as T);
        } catch {
          reject(new Error(`${name}(${JSON.stringify(args)}) printed no JSON result: ${JSON.stringify(stdout)}\n${stderr}`));
        }
      },
    );
  });
}
