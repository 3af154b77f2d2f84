/**
 * One TypeScript program, type-checked in a worker thread (readme-snippets.test.ts): a whole
 * program over every block takes tens of seconds, and run on the test's own thread it would keep
 * Vitest's worker from answering its runner for that long.
 *
 * The program is incremental: `buildInfo` is where TypeScript's state for it is kept between runs
 * (a `.tsbuildinfo`, whose lock the test holds: build-info.ts), so a run after a change checks again
 * only what the change can affect and takes the diagnostics of the rest from the last run.
 *
 * workerData: `{ rootNames, options, cwd, buildInfo }`. Posts `[{ file, line, message }]` (`file`
 * undefined for a diagnostic without a file; `line` 0-based).
 */
import { parentPort, workerData } from "node:worker_threads";
import ts from "typescript";

const { rootNames, options, cwd, buildInfo } = workerData;
const incremental = { ...options, incremental: true, tsBuildInfoFile: buildInfo };
// resolve `types` and modules from the project, as tsc run there would (not from this process's cwd)
const host = ts.createIncrementalCompilerHost(incremental);
host.getCurrentDirectory = () => cwd;
const program = ts.createIncrementalProgram({ rootNames, options: incremental, host });
// what ts.getPreEmitDiagnostics reports, the semantic ones from the builder (kept for unchanged files)
const diagnostics = [
  ...program.getConfigFileParsingDiagnostics(),
  ...program.getOptionsDiagnostics(),
  ...program.getSyntacticDiagnostics(),
  ...program.getGlobalDiagnostics(),
  ...program.getSemanticDiagnostics(),
];
// noEmit: writes the state only
program.emit();
parentPort.postMessage(
  diagnostics.map((d) => ({
    file: d.file?.fileName,
    line: d.file === undefined ? 0 : d.file.getLineAndCharacterOfPosition(d.start ?? 0).line,
    message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
  })),
);
