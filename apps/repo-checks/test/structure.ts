/**
 * Measures of the code's structure, as a newcomer meets it: the functions too long to read at
 * once, the test files too long to find one's way in, the import cycles, and the imports that
 * reach into another package's `src/`. Each is a list, so that a failing check names what to fix.
 *
 * Source files are `packages/*\/src/**\/*.ts`; a test file is `*.test.ts` (or anything under a
 * `test/` folder). The test kit is `packages/testing/src` outside its tests.
 *
 * @module
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** The repository's root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** Every `.ts` file under `dir` (no `node_modules`, `dist` or generated folders). */
export function tsFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      if (name === "node_modules" || name === "dist" || name.startsWith(".")) continue;
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(path);
    }
  };
  walk(dir);
  return out.sort();
}

/** The packages' folders (`packages/<name>`). */
export function packageDirs(): string[] {
  return readdirSync(join(ROOT, "packages"))
    .map((name) => join(ROOT, "packages", name))
    .filter((path) => statSync(path).isDirectory());
}

/** Whether `file` is a test (a `*.test.ts`, or anything in a `test/` folder). */
export function isTest(file: string): boolean {
  return file.endsWith(".test.ts") || /[\\/]test[\\/]/.test(relative(ROOT, file));
}

/** A function-like node of a source file, with its name and length in lines. */
export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(source);
  const parent = node.parent;
  if (parent !== undefined && ts.isVariableDeclaration(parent)) return parent.name.getText(source);
  if (parent !== undefined && ts.isPropertyAssignment(parent)) return parent.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  if (parent !== undefined && ts.isCallExpression(parent)) return `${parent.expression.getText(source).slice(0, 40)}(…)`;
  return "(anonymous)";
}

/**
 * Every function, method, arrow function and class static block of `file`, with its length
 * (first to last line, inclusive). A function is measured on its own: one nested in it counts in
 * both (the outer one's lines include it, as a reader meets them).
 */
export function functionLengths(file: string): FunctionLength[] {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: FunctionLength[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body !== undefined) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      out.push({ file: relative(ROOT, file), name: nameOf(node, source), line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The relative module specifiers `file` imports or re-exports (type-only ones included), resolved to files. */
export function localImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const add = (specifier: string) => {
    if (!specifier.startsWith(".")) return;
    const base = resolve(dirname(file), specifier.replace(/\.js$/, ".ts"));
    for (const candidate of [base, `${base}.ts`, join(base, "index.ts")]) {
      try {
        if (statSync(candidate).isFile()) {
          out.push(candidate);
          return;
        }
      } catch {
        // not this one
      }
    }
  };
  ts.forEachChild(source, (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) add(node.moduleSpecifier.text);
  });
  return out;
}

/**
 * The import cycles among `files` (type-only imports included): each strongly connected component
 * of more than one file, or a file that imports itself, as a sorted list of repository paths.
 */
export function importCycles(files: readonly string[]): string[][] {
  const set = new Set(files);
  const edges = new Map(files.map((f) => [f, localImports(f).filter((g) => set.has(g))]));
  // Tarjan's strongly connected components
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const connect = (v: string) => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!indices.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(component.map((f) => relative(ROOT, f)).sort());
    }
  };
  for (const f of files) if (!indices.has(f)) connect(f);
  return cycles;
}

/** The imports of `file` that reach into another package's `src/` (a relative path out of its own package). */
export function srcReaches(file: string, ownPackage: string): string[] {
  return localImports(file)
    .filter((target) => !target.startsWith(ownPackage + "/"))
    .map((target) => `${relative(ROOT, file)} → ${relative(ROOT, target)}`);
}

/** The number of lines of `file`. */
export function lineCount(file: string): number {
  return readFileSync(file, "utf8").split("\n").length;
}
