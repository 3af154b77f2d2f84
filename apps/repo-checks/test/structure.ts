/**
 * Measures of the code's structure, as a newcomer meets it: the functions too long to read at
 * once, the test files too long to find one's way in, the import cycles, the imports that reach
 * into another package's files instead of its entries, and the cycles of the packages'
 * dependencies. Each is a list, so that a failing check names what to fix (`structure.test.ts`
 * holds the limits).
 *
 * Source files are `packages/*\/src/**\/*.ts`; a test file is `*.test.ts` (or anything under a
 * `test/` folder). The test kit is `packages/testing/src` outside its tests.
 *
 * @module
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
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

const parsed = new Map<string, ts.SourceFile>();

/** `file` parsed (once: the checks read the same files again). */
function parse(file: string): ts.SourceFile {
  let source = parsed.get(file);
  if (source === undefined) {
    source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    parsed.set(file, source);
  }
  return source;
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
  const source = parse(file);
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

/**
 * The module specifiers of `file`, each with how it is imported: `static` for an import or
 * re-export declaration (`import type` and `export type` included), `type` for a type query
 * (`typeof import("./x.js")`), `dynamic` for an `import()` or `require()` call with a literal.
 */
export function moduleSpecifiers(file: string): { specifier: string; how: "static" | "type" | "dynamic" }[] {
  const source = parse(file);
  const out: { specifier: string; how: "static" | "type" | "dynamic" }[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push({ specifier: node.moduleSpecifier.text, how: "static" });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      out.push({ specifier: node.moduleReference.expression.text, how: "static" });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push({ specifier: node.argument.literal.text, how: "type" });
    } else if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteralLike(node.arguments[0]!)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === "require")) {
        out.push({ specifier: (node.arguments[0] as ts.StringLiteralLike).text, how: "dynamic" });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The file a relative specifier of `file` names (`./x.js` is `./x.ts`, a folder its `index.ts`), if there is one. */
function resolveLocal(file: string, specifier: string): string | undefined {
  const base = resolve(dirname(file), specifier.replace(/\.js$/, ".ts"));
  for (const candidate of [base, `${base}.ts`, join(base, "index.ts")]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/**
 * The files `file` imports through relative specifiers, resolved: import and re-export
 * declarations (type-only ones included) and type queries (`typeof import("./x.js")`), the
 * imports a reader follows and the compiler loads. An `import()` call is not one: it runs when
 * called, so it cannot take part in a cycle at load time.
 */
export function localImports(file: string): string[] {
  return moduleSpecifiers(file)
    .filter(({ specifier, how }) => how !== "dynamic" && specifier.startsWith("."))
    .flatMap(({ specifier }) => resolveLocal(file, specifier) ?? []);
}

/**
 * The cycles of a directed graph: each strongly connected component of more than one node, or a
 * node with an edge to itself, its nodes sorted (Tarjan's algorithm).
 */
export function cyclesOf(nodes: readonly string[], edges: ReadonlyMap<string, readonly string[]>): string[][] {
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
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of nodes) if (!indices.has(v)) connect(v);
  return cycles;
}

/**
 * The import cycles among `files` (type-only imports included): each strongly connected component
 * of more than one file, or a file that imports itself, as a sorted list of repository paths.
 */
export function importCycles(files: readonly string[]): string[][] {
  const set = new Set(files);
  const edges = new Map(files.map((f) => [relative(ROOT, f), localImports(f).filter((g) => set.has(g)).map((g) => relative(ROOT, g))]));
  return cyclesOf([...edges.keys()], edges);
}

/** A package or app of the workspace: its folder and its package name. */
export interface WorkspaceMember {
  dir: string;
  name: string;
}

/** Every folder of `packages/` and `apps/` that holds a `package.json`, with its package name. */
export function workspaceMembers(): WorkspaceMember[] {
  return ["packages", "apps"].flatMap((group) =>
    readdirSync(join(ROOT, group))
      .map((name) => join(ROOT, group, name))
      .filter((dir) => existsSync(join(dir, "package.json")))
      .map((dir) => ({ dir, name: (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string }).name })),
  );
}

/** Folders that hold what a build or a tool wrote, never code of the repository's own. */
const GENERATED = new Set(["node_modules", "dist", "public", "api", "test-results", ".next", ".wrangler", ".turbo", ".cache"]);

/** Every code file (TypeScript or JavaScript, no declarations) of a member, configuration files and `.vitepress` included. */
export function codeFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) {
        if (!GENERATED.has(name) && (!name.startsWith(".") || name === ".vitepress")) walk(path);
      } else if (/\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(name) && !/\.d\.[mc]?ts$/.test(name)) out.push(path);
    }
  };
  walk(dir);
  return out.sort();
}

/**
 * The imports of `file` (of the member `own`) that reach into another member's files instead of
 * going through its package name and entries: a relative path into another member's folder, or a
 * package name followed by `/src/` (`@sluice/testing/src/…`). Every kind of import counts, an
 * `import()` too. Each as `file → what it imports`.
 */
export function srcReaches(file: string, own: WorkspaceMember, members: readonly WorkspaceMember[]): string[] {
  const others = members.filter((m) => m.dir !== own.dir);
  return moduleSpecifiers(file)
    .filter(({ specifier }) => {
      if (specifier.startsWith(".")) {
        const target = resolve(dirname(file), specifier);
        return others.some((m) => target === m.dir || target.startsWith(m.dir + sep));
      }
      return others.some((m) => specifier.startsWith(`${m.name}/src/`) || specifier === `${m.name}/src`);
    })
    .map(({ specifier }) => `${relative(ROOT, file)} → ${specifier}`);
}

/** The number of lines of `file`. */
export function lineCount(file: string): number {
  return readFileSync(file, "utf8").split("\n").length;
}

/** The dependency fields of a `package.json` that a package's users install. */
export const RUNTIME_FIELDS = ["dependencies", "peerDependencies", "optionalDependencies"] as const;

/**
 * The cycles among the workspace's members through the dependency `fields` of their manifests
 * (only dependencies on other members count), as sorted lists of package names.
 */
export function dependencyCycles(members: readonly WorkspaceMember[], fields: readonly string[]): string[][] {
  const names = new Set(members.map((m) => m.name));
  const edges = new Map(
    members.map((m) => {
      const manifest = JSON.parse(readFileSync(join(m.dir, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>;
      const deps = fields.flatMap((field) => Object.keys(manifest[field] ?? {})).filter((name) => names.has(name));
      return [m.name, [...new Set(deps)]];
    }),
  );
  return cyclesOf([...edges.keys()], edges);
}
