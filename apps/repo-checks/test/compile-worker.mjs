/**
 * One TypeScript program, type-checked in a worker thread (readme-snippets.test.ts): a whole
 * program over every block takes tens of seconds, and run on the test's own thread it would keep
 * Vitest's worker from answering its runner for that long.
 *
 * workerData: `{ rootNames, options, cwd }`. Posts `[{ file, line, message }]` (`file` undefined
 * for a diagnostic without a file; `line` 0-based).
 */
import { parentPort, workerData } from "node:worker_threads";
import ts from "typescript";

const { rootNames, options, cwd } = workerData;
// resolve `types` and modules from the project, as tsc run there would (not from this process's cwd)
const host = ts.createCompilerHost(options);
host.getCurrentDirectory = () => cwd;
const program = ts.createProgram({ rootNames, options, host });
parentPort.postMessage(
  ts.getPreEmitDiagnostics(program).map((d) => ({
    file: d.file?.fileName,
    line: d.file === undefined ? 0 : d.file.getLineAndCharacterOfPosition(d.start ?? 0).line,
    message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
  })),
);
