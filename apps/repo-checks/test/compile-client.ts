/**
 * The test side of compile-worker.mjs: one worker thread per test file that compiles TypeScript
 * programs, started by the first compile and shared by the next ones (they reuse what it parsed).
 *
 * @module
 */
import { Worker } from "node:worker_threads";
import type ts from "typescript";

/** One diagnostic of a program (`file` undefined for one without a file; `line` 0-based). */
export interface CompileDiagnostic {
  file: string | undefined;
  line: number;
  message: string;
}

/**
 * A program: its files and options, compiled from `cwd` with its incremental state in `buildInfo`;
 * or, without `buildInfo`, afresh, when `overlay` (path → text) may put files that are not on disk
 * in it, or other text in place of a file's, and `only` may restrict the diagnostics to those files'.
 */
export type CompileRequest =
  | { rootNames: string[]; options: ts.CompilerOptions; cwd: string; buildInfo: string }
  | { rootNames: string[]; options: ts.CompilerOptions; cwd: string; buildInfo?: undefined; overlay?: Record<string, string>; only?: string[] };

type Reply = { id: number; diagnostics?: CompileDiagnostic[]; error?: string };

/** A compile worker: `compile` sends it one program at a time (the worker runs them in turn); `close` stops it. */
export function compiler(): { compile(request: CompileRequest): Promise<CompileDiagnostic[]>; close(): Promise<void> } {
  let worker: Worker | undefined;
  let next = 0;
  return {
    compile(request) {
      const running = (worker ??= new Worker(new URL("./compile-worker.mjs", import.meta.url)));
      const id = ++next;
      return new Promise((resolve, reject) => {
        const onMessage = (reply: Reply) => {
          if (reply.id !== id) return;
          done();
          if (reply.error !== undefined) reject(new Error(`the compile worker failed: ${reply.error}`));
          else resolve(reply.diagnostics ?? []);
        };
        const onExit = (code: number) => {
          done();
          if (worker === running) worker = undefined;
          reject(new Error(`the compile worker exited with code ${code}`));
        };
        const done = () => {
          running.off("message", onMessage);
          running.off("error", reject);
          running.off("exit", onExit);
        };
        running.on("message", onMessage);
        running.on("error", reject);
        running.on("exit", onExit);
        running.postMessage({ id, ...request });
      });
    },
    async close() {
      await worker?.terminate();
      worker = undefined;
    },
  };
}
