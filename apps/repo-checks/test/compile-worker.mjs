/**
 * TypeScript programs type-checked in one worker thread (readme-snippets.test.ts: the blocks of the
 * READMEs and the site, under each setting a reader may use): a whole program takes seconds, and
 * run on the test's own thread it would keep Vitest's worker from answering its runner for that
 * long. A test file starts one and sends it its programs (compile-client.ts).
 *
 * The worker stays for every program the test compiles, one at a time, and they share what they
 * parse: a file read for one program (the libraries, `@types/node`, the packages' declarations,
 * the blocks) is the same `SourceFile` in the next when it parses the same way (same text, language
 * version and module format), as TypeScript's language service shares them between projects.
 *
 * Each program is incremental: its `buildInfo` is where TypeScript's state for it is kept between
 * runs (a `.tsbuildinfo`, whose lock the test holds: build-info.ts), so a run after a change checks
 * again only what the change can affect and takes the diagnostics of the rest from the last run.
 *
 * A program without `buildInfo` keeps no state between runs. Such a program may see files that are
 * not on disk, or other text than a file's on disk (`overlay`, path → text: contributing-map.test.ts
 * adds a throwaway algorithm that way, without writing into the repository), and may ask for the
 * semantic diagnostics of some files only (`only`): the checker then resolves what those files use
 * and nothing else. (An incremental program answers a file from its last state until it has
 * walked every file a change affects, so it would answer one whose dependency changed with stale
 * diagnostics.)
 *
 * Messages in: `{ id, rootNames, options, cwd, buildInfo?, overlay?, only? }`. Posts
 * `{ id, diagnostics: [{ file, line, message }] }` (`file` undefined for a diagnostic without a file;
 * `line` 0-based), or `{ id, error }`.
 */
import { parentPort } from "node:worker_threads";
import ts from "typescript";

/** Parsed files by name, language version, module format and text. */
const parsed = new Map();

/** Makes `host` see the files of `overlay` (path → text) in place of the disk's. */
function overlaid(host, overlay) {
  const texts = new Map(Object.entries(overlay));
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const directoryExists = host.directoryExists?.bind(host);
  host.readFile = (fileName) => texts.get(fileName) ?? readFile(fileName);
  host.fileExists = (fileName) => texts.has(fileName) || fileExists(fileName);
  // module resolution looks for the folder first: a folder that only the overlay has must exist
  host.directoryExists = (dir) => [...texts.keys()].some((file) => file.startsWith(`${dir}/`)) || (directoryExists?.(dir) ?? true);
}

function compile(request) {
  const { rootNames, options, cwd, buildInfo, overlay, only } = request;
  const kept = buildInfo !== undefined;
  const incremental = kept ? { ...options, incremental: true, tsBuildInfoFile: buildInfo } : options;
  // resolve `types` and modules from the project, as tsc run there would (not from this process's cwd)
  const host = kept ? ts.createIncrementalCompilerHost(incremental) : ts.createCompilerHost(incremental);
  host.getCurrentDirectory = () => cwd;
  if (overlay !== undefined) overlaid(host, overlay);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersionOrOptions, onError, shouldCreateNewSourceFile) => {
    const how = typeof languageVersionOrOptions === "object" ? languageVersionOrOptions : { languageVersion: languageVersionOrOptions };
    const key = `${fileName}\0${how.languageVersion}\0${how.impliedNodeFormat ?? ""}\0${how.jsDocParsingMode ?? ""}`;
    const known = parsed.get(key);
    if (known !== undefined && !shouldCreateNewSourceFile && readFile(fileName) === known.text) return known;
    // the host's own: reads, parses and sets the version the incremental state is keyed on
    const file = getSourceFile(fileName, languageVersionOrOptions, onError, shouldCreateNewSourceFile);
    if (file !== undefined) parsed.set(key, file);
    return file;
  };
  const program = kept ? ts.createIncrementalProgram({ rootNames, options: incremental, host }) : ts.createProgram({ rootNames, options: incremental, host });
  const files = only?.map((fileName) => program.getSourceFile(fileName)).filter((file) => file !== undefined);
  // what ts.getPreEmitDiagnostics reports, the semantic ones from the builder (kept for unchanged files)
  const diagnostics = [
    ...program.getConfigFileParsingDiagnostics(),
    ...program.getOptionsDiagnostics(),
    ...(files === undefined ? program.getSyntacticDiagnostics() : files.flatMap((file) => program.getSyntacticDiagnostics(file))),
    ...program.getGlobalDiagnostics(),
    ...(files === undefined ? program.getSemanticDiagnostics() : files.flatMap((file) => program.getSemanticDiagnostics(file))),
  ];
  // noEmit: writes the state only
  if (kept) program.emit();
  return diagnostics.map((d) => ({
    file: d.file?.fileName,
    line: d.file === undefined ? 0 : d.file.getLineAndCharacterOfPosition(d.start ?? 0).line,
    message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
  }));
}

parentPort.on("message", (request) => {
  try {
    parentPort.postMessage({ id: request.id, diagnostics: compile(request) });
  } catch (error) {
    parentPort.postMessage({ id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  }
});
