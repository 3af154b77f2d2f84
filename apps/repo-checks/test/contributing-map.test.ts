/**
 * The map of the code on the site's contributing page (`apps/docs/contributing.md`, "Where things
 * live") is held to the code it maps:
 *
 * - every path it names exists (a `<kind>`, `<adapter>` or `<feature>` in a path: at least one
 *   file or folder fits);
 * - every name in the first column of one of its tables is declared in the file beside it;
 * - an algorithm: a throwaway kind added to the `Policy` union (in the type-checker's view of the
 *   files only, never on disk) makes the compiler ask for it in exactly the registries the map's
 *   table of registries lists, no more, no fewer;
 * - a store: the members the map calls required are the required members of `BoundStore`;
 * - an adapter: a throwaway adapter written as the steps say (options that extend
 *   `PipelineCommonOptions` and declare each callback again, a `Platform`, `createPipeline`)
 *   type-checks; the callbacks the steps list are core's; every adapter's `options.ts` declares
 *   each of them with an `@example`;
 * - a conformance feature: a throwaway module written as the steps say type-checks against the
 *   context the map names, and `SECTIONS` runs, and the test kit's entry exports, every feature
 *   module the map names.
 *
 * The throwaways are type-checked in one program in the compile worker (compile-worker.mjs), with
 * the files they add or change given as an overlay, and only the files that matter checked.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { POLICY_KINDS } from "@sluice/core/store";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CompileDiagnostic, compiler } from "./compile-client.js";
import { ROOT, codeFiles, workspaceMembers } from "./structure.js";

const PAGE = "apps/docs/contributing.md";
const SECTION = "Where things live";

/** The text under the `## heading` (or `### heading`) of `markdown`, up to the next heading of its level or above. */
function sectionOf(markdown: string, heading: string, level = 2): string {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => line === `${"#".repeat(level)} ${heading}`);
  if (start === -1) return "";
  const end = lines.findIndex((line, i) => i > start && new RegExp(`^#{1,${level}} `).test(line));
  return lines.slice(start + 1, end === -1 ? undefined : end).join("\n");
}

/** The backticked tokens of `text`. */
const ticked = (text: string): string[] => [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] as string);

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** A repository path as the map writes one: under `packages/` or `apps/`, or a file at the root. */
const isPath = (token: string): boolean => /^(packages|apps)\/[\w./<>-]+$/.test(token) || /^[\w-]+\.(md|json|yaml|ts)$/.test(token);

/** One row of a table of the map: the names of its first column, the paths of its second. */
interface Row {
  table: string;
  what: string;
  names: string[];
  paths: string[];
}

/** The rows of every two-column table of `markdown`, under the table's header (`what`, `registry`). */
function rowsOf(markdown: string): Row[] {
  const rows: Row[] = [];
  let table: string | undefined;
  for (const line of markdown.split("\n")) {
    const cells = /^\|(.*)\|$/.exec(line.trim())?.[1]?.split("|").map((cell) => cell.trim());
    if (cells === undefined || cells.length !== 2) {
      table = undefined;
      continue;
    }
    const [what, where] = cells as [string, string];
    if (table === undefined) table = what;
    else if (!/^-+$/.test(what)) rows.push({ table, what, names: ticked(what).filter((t) => IDENTIFIER.test(t)), paths: ticked(where).filter(isPath) });
  }
  return rows;
}

/** The files and folders `pattern` names: each `<placeholder>` stands for any part of one path segment. */
function matching(pattern: string): string[] {
  let found = [ROOT];
  for (const segment of pattern.split("/")) {
    if (!segment.includes("<")) {
      found = found.map((dir) => join(dir, segment)).filter((path) => existsSync(path));
      continue;
    }
    const regex = new RegExp(`^${segment.split(/<[^>]+>/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^/]+")}$`);
    found = found.flatMap((dir) => (existsSync(dir) && statSync(dir).isDirectory() ? readdirSync(dir).filter((name) => regex.test(name)).map((name) => join(dir, name)) : []));
  }
  return found;
}

/** The names a file declares at its top level or exports (a re-export included). */
function declaredNames(file: string): Set<string> {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const names = new Set<string>();
  for (const node of source.statements) {
    if (ts.isVariableStatement(node)) {
      for (const declaration of node.declarationList.declarations) if (ts.isIdentifier(declaration.name)) names.add(declaration.name.text);
    } else if (ts.isExportDeclaration(node) && node.exportClause !== undefined && ts.isNamedExports(node.exportClause)) {
      for (const specifier of node.exportClause.elements) names.add(specifier.name.text);
    } else {
      const name = (node as ts.Statement & { name?: ts.Node }).name;
      if (name !== undefined && ts.isIdentifier(name)) names.add(name.text);
    }
  }
  return names;
}

/** The top-level interface `name` of `file`: each member's name, whether it is optional, and its type as written. */
function interfaceMembers(file: string, name: string): { name: string; optional: boolean; type: string; jsDoc: string }[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const found = source.statements.find((node): node is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(node) && node.name.text === name);
  if (found === undefined) return [];
  return found.members.flatMap((member) =>
    member.name === undefined
      ? []
      : [
          {
            name: member.name.getText(source),
            optional: member.questionToken !== undefined,
            type: ts.isPropertySignature(member) ? (member.type?.getText(source) ?? "") : "",
            jsDoc: ts.getJSDocCommentsAndTags(member).map((doc) => doc.getText(source)).join("\n"),
          },
        ],
  );
}

const page = readFileSync(join(ROOT, PAGE), "utf8");
const map = sectionOf(page, SECTION);
const parts = {
  algorithm: sectionOf(map, "An algorithm", 3),
  store: sectionOf(map, "A store", 3),
  adapter: sectionOf(map, "An adapter", 3),
  feature: sectionOf(map, "A conformance feature", 3),
};
const rows = rowsOf(map);

/** The file the map names beside `name` (a registry, a type), as an absolute path; `undefined` if the map has no such row. */
function fileNamed(name: string): string | undefined {
  const path = rows.find((r) => r.names.includes(name))?.paths[0];
  return path === undefined ? undefined : join(ROOT, path);
}

/** {@link fileNamed}, expected to be there. */
function fileOf(name: string): string {
  const file = fileNamed(name);
  expect(file, `the map names ${name} in a table, beside its file`).toBeDefined();
  return file as string;
}

/** The kind the type-checker is shown in addition to core's, in a folder of its own (never written to disk). */
const THROWAWAY_KIND = "throwawayKind";

/** What a kind needs to be one: its folder in core, with its policy type. */
function throwawayAlgorithm(): Record<string, string> {
  const policyFile = fileOf("Policy");
  const text = readFileSync(policyFile, "utf8");
  const anchor = "export type Policy = ";
  expect(text, `${relative(ROOT, policyFile)} declares the Policy union the map's step 2 adds a kind to`).toContain(anchor);
  const folder = join(dirname(policyFile), THROWAWAY_KIND);
  return {
    [policyFile]: text.replace(anchor, `${anchor}import("./${THROWAWAY_KIND}/index.js").ThrowawayPolicy | `),
    [join(folder, "index.ts")]: [
      'import type { PolicyCommon } from "../definition.js";',
      "",
      `export interface ThrowawayPolicy extends PolicyCommon {`,
      `  readonly kind: "${THROWAWAY_KIND}";`,
      "}",
      "",
    ].join("\n"),
  };
}

/** The callbacks of core's `PipelineCommonOptions`: the options whose type involves the framework's arguments. */
const coreOptions = join(ROOT, "packages/core/src/pipeline/options.ts");
const CALLBACKS = interfaceMembers(coreOptions, "PipelineCommonOptions")
  .filter((m) => /\bArgs\b/.test(m.type))
  .map((m) => m.name);

/** A throwaway adapter for a framework whose handlers get `(request, env)`, written as the map's steps say. */
const ADAPTER_DIR = join(ROOT, "apps/repo-checks/throwaway-adapter/src");
const ADAPTER_CALLBACKS: Record<string, string> = {
  key: "(request: Request, env: Env) => MaybePromise<string>",
  cost: "number | ((request: Request, env: Env) => MaybePromise<number>)",
  skip: "(request: Request, env: Env) => MaybePromise<boolean>",
  onLimited: "(request: Request, env: Env, decision: Decision) => MaybePromise<Response>",
  onDecision: "(request: Request, env: Env, decision: Decision, info: DecisionInfo) => void",
  countWhen: "(request: Request, env: Env, response: Response, decision: Decision) => boolean | Promise<boolean>",
  onCallbackError: "(request: Request, env: Env, error: unknown, callback: CallbackName) => void",
};
function throwawayAdapter(): Record<string, string> {
  const options = [
    'import type { Decision, RateLimiter, TierSettings } from "@sluice/core";',
    'import type { CallbackName, DecisionInfo, MaybePromise, PipelineCommonOptions } from "@sluice/core/adapter";',
    "",
    "export interface Env {",
    "  readonly region: string;",
    "}",
    "export type Args = [request: Request, env: Env];",
    "",
    "export interface ThrowawayCommonOptions extends PipelineCommonOptions<Args> {",
    ...Object.entries(ADAPTER_CALLBACKS).map(([name, type]) => `  /** @example ${name} */\n  ${name}?: ${type};`),
    "}",
    "export interface ThrowawayLimiterOptions extends ThrowawayCommonOptions {",
    "  limiter: RateLimiter;",
    "}",
    "export interface ThrowawayTieredOptions extends ThrowawayCommonOptions, TierSettings {",
    "  tier: (request: Request, env: Env, key: string) => MaybePromise<string>;",
    "}",
    "export type ThrowawayOptions = ThrowawayLimiterOptions | ThrowawayTieredOptions;",
    "",
  ].join("\n");
  const index = [
    'import type { Decision } from "@sluice/core";',
    'import { type MaybePromise, type Platform, createPipeline } from "@sluice/core/adapter";',
    'import type { Args, Env, ThrowawayOptions } from "./options.js";',
    "",
    'const platform: Platform<Args> = { where: "guarded", tag: "throwaway", params: "request, env", request: (request) => request };',
    "",
    "export function guarded(",
    "  handler: (request: Request, env: Env, decision: Decision | undefined) => MaybePromise<Response>,",
    "  options: ThrowawayOptions,",
    "): (request: Request, env: Env) => Promise<Response> {",
    "  const { handle } = createPipeline<Args>(options, platform);",
    "  return (request, env) => handle([request, env], (decision) => handler(request, env, decision));",
    "}",
    "",
  ].join("\n");
  return { [join(ADAPTER_DIR, "options.ts")]: options, [join(ADAPTER_DIR, "index.ts")]: index };
}

/** A throwaway conformance module, written as the map's steps say, beside the context the map names. */
function throwawayFeature(): Record<string, string> {
  const contextFile = fileNamed("SuiteContext");
  if (contextFile === undefined || !existsSync(contextFile)) return {};
  const module = [
    'import { fixedWindow } from "@sluice/core";',
    'import { expect, it } from "vitest";',
    `import type { SuiteContext } from "./${relative(dirname(contextFile), contextFile).replace(/\.ts$/, ".js")}";`,
    "",
    "export function testThrowawayFeature(suite: SuiteContext): void {",
    '  it("decides on the store under test", async () => {',
    '    const limiter = suite.limiter(fixedWindow({ limit: 1, window: "1m" }));',
    "    suite.at(0);",
    '    expect((await limiter.limit("k")).allowed).toBe(true);',
    '    expect((await limiter.limit("k")).allowed).toBe(false);',
    "  });",
    "}",
    "",
  ].join("\n");
  return { [join(dirname(contextFile), "throwaway-feature.ts")]: module };
}

/** The workspace program's options (the root tsconfig.json), the one `pnpm run typecheck` checks the registries with. */
function workspaceProgram(): { options: ts.CompilerOptions; fileNames: Set<string> } {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(ROOT, "tsconfig.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    },
  });
  if (parsed === undefined) throw new Error("tsconfig.json: no program");
  return { options: parsed.options, fileNames: new Set(parsed.fileNames) };
}

/** The files that declare a table keyed by policy kind (`[K in PolicyKind]`), in the workspace program. */
function kindKeyedFiles(fileNames: Set<string>): string[] {
  return workspaceMembers()
    .flatMap((m) => codeFiles(m.dir))
    .filter((file) => fileNames.has(file) && /\[\s*K\s+in\s+PolicyKind\s*\]/.test(readFileSync(file, "utf8")));
}

const registries = rows.filter((r) => r.table === "registry");

describe("the contributing page's map of the code", () => {
  it("has its four parts, each with a table and steps", () => {
    for (const [name, text] of Object.entries(parts)) {
      expect(rowsOf(text).length, `${PAGE}, "${SECTION}": the part on ${name} has a table`).toBeGreaterThan(0);
      expect(text, `${PAGE}, "${SECTION}": the part on ${name} has numbered steps`).toMatch(/^1\. /m);
    }
    expect(registries.map((r) => r.names[0])).toContain("ALGORITHMS");
  });

  it("names paths that exist", () => {
    const named = [...new Set([...ticked(map).filter((t) => t.includes("/") && isPath(t)), ...rows.flatMap((r) => r.paths)])];
    expect(named.length).toBeGreaterThan(30);
    expect(named.filter((path) => matching(path).length === 0), "paths the map names that are not in the repository").toEqual([]);
  });

  it("names what each file declares", () => {
    const missing = rows.flatMap((row) => {
      const files = row.paths.flatMap(matching).filter((path) => /\.(ts|tsx)$/.test(path));
      if (row.names.length > 0 && files.length === 0) return [`${row.names.join(", ")}: no TypeScript file beside it`];
      const declared = new Set(files.flatMap((file) => [...declaredNames(file)]));
      return row.names.filter((name) => !declared.has(name)).map((name) => `${name} is not declared in ${row.paths.join(", ")}`);
    });
    expect(missing).toEqual([]);
  });

  it("calls required exactly the members of BoundStore a store must have", () => {
    const members = interfaceMembers(fileOf("BoundStore"), "BoundStore");
    const required = members.filter((m) => !m.optional).map((m) => m.name);
    expect(required.length).toBeGreaterThan(3);
    const step = /^1\. [\s\S]*?(?=^2\. )/m.exec(parts.store)?.[0] ?? "";
    const said = /((?:`\w+`,? )+and `\w+`) \(required\)/.exec(step.replace(/\s+/g, " "))?.[1];
    expect(said, `${PAGE}: the store's first step lists the required members, "\`a\`, \`b\` and \`c\` (required)"`).toBeDefined();
    expect(ticked(said as string).sort()).toEqual(required.sort());
    // the optional ones it names are optional
    const optional = members.filter((m) => m.optional).map((m) => m.name);
    for (const name of ["control", "reserve"]) expect(optional).toContain(name);
  });

  it("lists core's callbacks in the adapter's steps, and every adapter's options.ts declares each with an @example", () => {
    expect(CALLBACKS).toEqual(expect.arrayContaining(["key", "onLimited", "countWhen"]));
    const step = /^2\. [\s\S]*?(?=^3\. )/m.exec(parts.adapter)?.[0] ?? "";
    const listed = ticked(step).filter((t) => IDENTIFIER.test(t) && t !== "tier" && t !== "PipelineCommonOptions");
    expect(listed.sort(), `${PAGE}: the adapter's step 2 lists core's callbacks`).toEqual([...CALLBACKS].sort());
    expect(Object.keys(ADAPTER_CALLBACKS).sort(), "the throwaway adapter declares core's callbacks").toEqual([...CALLBACKS].sort());
    const adapters = matching("packages/<adapter>/src/options.ts").filter((file) => readFileSync(file, "utf8").includes("PipelineCommonOptions<"));
    expect(adapters.map((f) => relative(ROOT, f)).sort()).toEqual(["packages/cloudflare/src/options.ts", "packages/hono/src/options.ts", "packages/next/src/options.ts"]);
    const undocumented = adapters.flatMap((file) => {
      const source = readFileSync(file, "utf8");
      const common = /export interface (\w+CommonOptions)\b[^{]*extends PipelineCommonOptions</.exec(source)?.[1];
      if (common === undefined) return [`${relative(ROOT, file)}: no *CommonOptions interface extending PipelineCommonOptions`];
      const members = interfaceMembers(file, common);
      return CALLBACKS.filter((name) => !members.some((m) => m.name === name && m.jsDoc.includes("@example"))).map((name) => `${relative(ROOT, file)}: ${common}.${name}`);
    });
    expect(undocumented, "callbacks an adapter leaves to core's documentation").toEqual([]);
  });

  it("names, as its feature modules, modules SECTIONS runs and the test kit's entry exports", () => {
    const features = rows.flatMap((r) => r.names.filter((n) => /^test[A-Z]/.test(n) && n !== "testStore"));
    expect(features.length).toBeGreaterThan(1);
    const referenced = (file: string): Set<string> => {
      const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
      const names = new Set<string>();
      const visit = (node: ts.Node) => {
        if (ts.isIdentifier(node)) names.add(node.text);
        ts.forEachChild(node, visit);
      };
      // what the file does with them, not its imports
      for (const statement of source.statements) if (!ts.isImportDeclaration(statement)) visit(statement);
      return names;
    };
    const sections = fileOf("SECTIONS");
    const inSections = referenced(sections);
    expect(features.filter((f) => !inSections.has(f)), `feature modules the map names that ${relative(ROOT, sections)} does not run`).toEqual([]);
    const entry = join(ROOT, "packages/testing/src/index.ts");
    const exported = declaredNames(entry);
    expect(features.filter((f) => !exported.has(f)), "feature modules the map names that the test kit's entry does not export").toEqual([]);
  });

  describe("its steps, with throwaway ones in the type-checker", () => {
    const programs = compiler();
    afterAll(() => programs.close());
    let diagnostics: CompileDiagnostic[];
    let candidates: string[];
    let overlay: Record<string, string>;

    beforeAll(async () => {
      const { options, fileNames } = workspaceProgram();
      overlay = { ...throwawayAlgorithm(), ...throwawayAdapter(), ...throwawayFeature() };
      candidates = [...new Set([...kindKeyedFiles(fileNames), ...registries.map((r) => join(ROOT, r.paths[0] as string))])];
      const only = [...candidates, ...Object.keys(overlay)];
      diagnostics = await programs.compile({ rootNames: only, options, cwd: ROOT, overlay, only });
    }, 300_000);

    it("an algorithm: the compiler asks for a new kind in exactly the registries the map lists", () => {
      const asking = new Set(diagnostics.filter((d) => d.file !== undefined && d.message.includes(THROWAWAY_KIND)).map((d) => relative(ROOT, d.file as string)));
      const listed = new Set(registries.map((r) => r.paths[0] as string));
      expect([...asking].filter((f) => !listed.has(f)), "registries the compiler holds to every kind that the map does not list").toEqual([]);
      expect([...listed].filter((f) => !asking.has(f)), "files the map lists as registries where the compiler does not ask for a new kind").toEqual([]);
      expect(candidates.length).toBeGreaterThanOrEqual(registries.length);
      expect(POLICY_KINDS).not.toContain(THROWAWAY_KIND);
    });

    it("an adapter: options that extend PipelineCommonOptions, a Platform and createPipeline type-check", () => {
      const files = new Set(Object.keys(throwawayAdapter()));
      expect(diagnostics.filter((d) => d.file !== undefined && files.has(d.file)).map((d) => `${relative(ROOT, d.file as string)}:${d.line + 1}: ${d.message}`)).toEqual([]);
    });

    it("a conformance feature: a module over the suite's context type-checks", () => {
      const files = new Set(Object.keys(throwawayFeature()));
      expect(files.size, `the map names SuiteContext beside a file that exists (${fileNamed("SuiteContext") ?? "no row"})`).toBe(1);
      expect(diagnostics.filter((d) => d.file !== undefined && files.has(d.file)).map((d) => `${relative(ROOT, d.file as string)}:${d.line + 1}: ${d.message}`)).toEqual([]);
    });
  });
});
