/**
 * What a package entry exports, read from its TypeScript source with the compiler: the values
 * (what `import()` of the entry gives at run time) and the names that exist only as types. Each
 * package's `entries.test.ts` pins both lists, so that an export added to or dropped from a public
 * entry is a decision someone wrote down, not an accident of a re-export.
 *
 * @example
 * ```ts
 * import { entryExports } from "@sluice/testing/entries";
 *
 * const [root] = entryExports(["packages/redis/src/index.ts"], "packages/redis/tsconfig.json");
 * root.values; // ["RedisStore", "UpstashStore"]
 * root.types; // ["IORedisLike", "NodeRedisLike", "RedisClientLike", "RedisClock", "ScriptStoreOptions", "UpstashRedisLike"]
 * ```
 *
 * @module
 */
import { resolve } from "node:path";
import ts from "typescript";

/** The exports of one entry, each list sorted. */
export interface EntryExports {
  /** The entry file, as given. */
  entry: string;
  /** Names with a run-time value (functions, classes, constants): `Object.keys(await import(entry))`. */
  values: string[];
  /** Names that are only types (interfaces, type aliases, and values exported with `export type`). */
  types: string[];
}

/**
 * The exports of each entry file, by the compiler options of `tsconfig` (so that `@sluice/*`
 * imports resolve as the package's own type check resolves them). Paths are relative to the
 * current directory or absolute.
 */
export function entryExports(entries: readonly string[], tsconfig: string): EntryExports[] {
  const configPath = resolve(tsconfig);
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(`${configPath}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`);
    },
  });
  if (parsed === undefined) throw new Error(`${configPath}: not a tsconfig file`);
  const files = entries.map((entry) => resolve(entry));
  const program = ts.createProgram({ rootNames: files, options: { ...parsed.options, noEmit: true }, projectReferences: parsed.projectReferences });
  const checker = program.getTypeChecker();
  return files.map((file, i) => {
    const source = program.getSourceFile(file);
    if (source === undefined) throw new Error(`${file}: not part of the program of ${configPath}`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (moduleSymbol === undefined) throw new Error(`${file}: not a module`);
    const values: string[] = [];
    const types: string[] = [];
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
      (isRuntimeValue(checker, symbol) ? values : types).push(symbol.name);
    }
    return { entry: entries[i] as string, values: values.sort(), types: types.sort() };
  });
}

/** Whether an exported symbol exists at run time: a value, reached through no `export type`/`import type`. */
function isRuntimeValue(checker: ts.TypeChecker, exported: ts.Symbol): boolean {
  let symbol = exported;
  // follow the chain of re-exports; any type-only link makes the name a type at run time
  for (let hops = 0; symbol.flags & ts.SymbolFlags.Alias; hops++) {
    if (hops > 50) throw new Error(`export ${exported.name}: alias chain too long`);
    if (symbol.declarations?.some(isTypeOnlyDeclaration)) return false;
    const next = checker.getImmediateAliasedSymbol(symbol);
    if (next === undefined) break;
    symbol = next;
  }
  return (symbol.flags & ts.SymbolFlags.Value) !== 0;
}

function isTypeOnlyDeclaration(declaration: ts.Declaration): boolean {
  if (ts.isExportSpecifier(declaration)) return declaration.isTypeOnly || declaration.parent.parent.isTypeOnly;
  if (ts.isImportSpecifier(declaration)) return declaration.isTypeOnly || declaration.parent.parent.isTypeOnly;
  if (ts.isImportClause(declaration)) return declaration.isTypeOnly;
  return false;
}
