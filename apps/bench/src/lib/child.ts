/**
 * Runs a benchmark function in a fresh Node process, so that one measurement's JIT feedback,
 * garbage and heap growth never leak into the next (V8 optimizes a call site for the shapes it has
 * seen: contenders sharing a process would slow each other down in ways a real application with
 * one limiter never sees).
 *
 * @module
 */
import { execFile } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bundleEntry } from "./bundle.js";

/** The package directory: children run from here so that their imports resolve. */
const packageDir = fileURLToPath(new URL("../../", import.meta.url));
const childEntry = new URL("./run-child.ts", import.meta.url);

/**
 * Node flags of a child: `gc()` exposed. Children run bundles (`bundleEntry`): the workspace
 * packages compiled like the published build, without the tsx loader, whose `keepNames` would add
 * an `Object.defineProperty` to every closure Sluice creates per decision.
 */
export const CHILD_NODE_FLAGS = ["--expose-gc"] as const;

const bundles = new Map<string, Promise<string>>();

/** The bundle of a TypeScript module (made once per process), as a file URL. */
function bundled(moduleUrl: string): Promise<string> {
  let out = bundles.get(moduleUrl);
  if (out === undefined) {
    const name = fileURLToPath(moduleUrl).replace(/^.*[\\/]/, "").replace(/\.ts$/, "");
    out = bundleEntry(new URL(moduleUrl), name).then((file) => pathToFileURL(file).href);
    bundles.set(moduleUrl, out);
  }
  return out;
}

/**
 * Calls `moduleUrl`'s export `name` with `args` (JSON) in a fresh Node process and resolves with
 * its JSON result. The export must be an async function of JSON-serializable arguments. The
 * module and the child's entry are bundled first (see {@link CHILD_NODE_FLAGS}).
 *
 * @example
 * ```ts
 * const url = new URL("../memory-contenders.ts", import.meta.url).href;
 * const heap = await runInChild<HeapResult>(url, "measureHeap", ["tokenBucket", 1_000_000]);
 * ```
 */
export async function runInChild<T>(moduleUrl: string, name: string, args: readonly unknown[]): Promise<T> {
  const [entry, module] = await Promise.all([bundled(childEntry.href), bundled(moduleUrl)]);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...CHILD_NODE_FLAGS, fileURLToPath(entry), module, name, JSON.stringify(args)],
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
