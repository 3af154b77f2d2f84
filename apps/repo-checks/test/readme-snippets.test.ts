/**
 * Every TypeScript block (```ts or ```typescript) of every README in the repository — the root's,
 * packages/*'s and apps/*'s — and of every page of the documentation site (apps/docs, but its
 * generated API reference) compiles as a user's code would, and the runnable ones run.
 *
 * The blocks are written to a project inside this package (`.snippets/project/`, gitignored): an
 * ES module package whose node_modules are this package's, so `@sluice/*` resolve to the
 * workspace packages as a user gets them — their built `dist/` (types and code; `pnpm test` builds
 * first), not their sources, which the type-check test checks once rather than once per program
 * here — and every other import to the version the workspace pins. Each block is its own file and is type-checked with
 * `strict` under `"module": "nodenext"` and under `"moduleResolution": "bundler"`
 * (`"module": "esnext"`), in the environment it is written for:
 *
 * - **Workers** (a block that imports `@sluice/cloudflare` or `cloudflare:*`, or names a Workers
 *   type such as `KVNamespace`): the compiler options of the `tsconfig.json` the Cloudflare docs
 *   give (`lib: ["ES2022"]`, `types: ["@cloudflare/workers-types"]`), read from the package's
 *   README and its page on the site;
 * - **Node.js** (every other block): `lib: ["ES2022", "DOM", "DOM.Iterable"]`, `types: ["node"]`;
 *   the blocks that use `@sluice/client` alone also without the DOM library, as the client
 *   promises (the Fetch types of @types/node are enough).
 *
 * Every Node.js block is also run from the project, as "run it with `npx tsx example.mts`" does:
 * esbuild strips the types (tsx's own transform: esbuild, its target the running Node.js) into a
 * `.run.mjs` beside the block, which `node` runs. It must exit 0 within 60 s. (One transform in
 * this process instead of tsx starting in every child: the same code runs, at a third of the CPU
 * time of 41 `tsx` start-ups.) A block that appears twice (a
 * package README's example is also on its page) runs once. Markers after the language in the
 * fence's info string opt out, and nothing else may be written there: `no-run` — the block needs a
 * service (Redis, Upstash, the running demo) or serves forever; `no-check` — it cannot compile
 * alone on purpose (neither is compiled nor run). The site's contributing page says this; Workers
 * blocks are compiled only (they need workerd).
 *
 * Each of the six programs is incremental (compile-worker.mjs; its `.tsbuildinfo` under
 * `node_modules/.cache/readme-snippets/`, see build-info.ts): a run checks again the blocks and the
 * sources a change can affect, and takes the rest's diagnostics from the last run. So the project's
 * directory stays between runs, each block's file rewritten only when the block changed (under a
 * temporary name, then renamed: a run beside this one never reads half a file).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { buildInfoPath, withBuildInfo } from "./build-info.js";
import { compiler } from "./compile-client.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

type Environment = "node" | "workers";

interface Snippet {
  /** Markdown file (a README or a page of the site), relative to the repository root. */
  readme: string;
  /** 1-based line of the opening fence. */
  line: number;
  markers: string[];
  code: string;
  environment: Environment;
  /** The file it is written to, relative to the project. */
  file: string;
}

const MARKERS = new Set(["no-run", "no-check"]);

/** The site's Markdown pages (apps/docs), without what is generated or installed there. */
function sitePages(dir = "apps/docs"): string[] {
  const skip = new Set(["node_modules", "dist", "api", "public", "snippets", "test", "scripts", ".vitepress"]);
  return readdirSync(join(rootDir, dir), { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return skip.has(entry.name) ? [] : sitePages(path);
      return entry.name.endsWith(".md") && entry.name !== "README.md" ? [path] : [];
    });
}

/** Every README.md of the repository (the root's, then packages/*, then apps/*), then the site's pages. */
function readmes(): string[] {
  const found = ["README.md"];
  for (const group of ["packages", "apps"]) {
    for (const entry of readdirSync(join(rootDir, group), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (!entry.isDirectory()) continue;
      const path = join(group, entry.name, "README.md");
      try {
        readFileSync(join(rootDir, path));
        found.push(path);
      } catch {
        // no README
      }
    }
  }
  return [...found, ...sitePages()];
}

/** The fenced blocks of a Markdown file (CommonMark fences of backticks, indented up to 3 spaces). */
function fences(markdown: string): { line: number; language: string; markers: string[]; code: string }[] {
  const lines = markdown.split("\n");
  const out: { line: number; language: string; markers: string[]; code: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( {0,3})(`{3,})\s*([^`]*)$/.exec(lines[i] as string);
    if (open === null) continue;
    const [, indent, ticks, info] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] as string;
      if (new RegExp(`^ {0,3}\`{${ticks.length},}\\s*$`).test(line)) break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    const [language = "", ...markers] = info.trim().split(/\s+/).filter(Boolean);
    out.push({ line: i + 1, language: language.toLowerCase(), markers, code: `${body.join("\n")}\n` });
    i = j;
  }
  return out;
}

const WORKERS = /from\s+["'](@sluice\/cloudflare|cloudflare:[\w-]+)["']|\b(KVNamespace|DurableObjectNamespace|DurableObjectState|ExecutionContext|ExportedHandler)\b/;

const snippets: Snippet[] = readmes().flatMap((readme) => {
  const slug = readme.replace(/\/?README\.md$/, "").replace(/\.md$/, "").replace(/[^\w]+/g, "-") || "root";
  return fences(readFileSync(join(rootDir, readme), "utf8"))
    .filter((block) => block.language === "ts" || block.language === "typescript")
    .map((block, index) => ({
      readme,
      line: block.line,
      markers: block.markers,
      code: block.code,
      environment: WORKERS.test(block.code) ? ("workers" as const) : ("node" as const),
      file: `${slug}-${index + 1}.ts`,
    }));
});
const checked = snippets.filter((s) => !s.markers.includes("no-check"));
const where = (s: Snippet) => `${s.readme}:${s.line}`;

// A user's project: an ES module package. Its node_modules are this package's (two levels up).
const project = join(packageDir, ".snippets", "project");

// the blocks import the packages as users do: their built dist
const unbuilt = readdirSync(join(rootDir, "packages")).filter((name) => {
  const manifest = join(rootDir, "packages", name, "package.json");
  return existsSync(manifest) && !(JSON.parse(readFileSync(manifest, "utf8")) as { private?: boolean }).private && !existsSync(join(rootDir, "packages", name, "dist"));
});
if (unbuilt.length > 0) {
  throw new Error(`the READMEs' blocks import the built packages, and packages/${unbuilt.join(", packages/")} ${unbuilt.length === 1 ? "has" : "have"} no dist/: run \`pnpm run build\` at the repository root first (\`pnpm test\` does)`);
}
mkdirSync(project, { recursive: true });

/** Writes a file of the project unless it holds `content` already: a temporary name, then a rename. */
function writeIfChanged(file: string, content: string): void {
  const path = join(project, file);
  try {
    if (readFileSync(path, "utf8") === content) return;
  } catch {
    // not there yet
  }
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content);
  renameSync(temporary, path);
}

writeIfChanged("package.json", `${JSON.stringify({ name: "readme-snippets", private: true, type: "module" }, null, 2)}\n`);
for (const snippet of snippets) writeIfChanged(snippet.file, snippet.code);
/** The JavaScript a Node.js block runs as: its file with the types stripped, as tsx would (see above). */
const runFile = (s: Snippet) => s.file.replace(/\.ts$/, ".run.mjs");
// the files of blocks that are gone
const current = new Set(snippets.flatMap((s) => [s.file, runFile(s)]));
for (const file of readdirSync(project)) if ((file.endsWith(".ts") || file.endsWith(".mjs")) && !current.has(file)) rmSync(join(project, file), { force: true });

const base: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  // a block without an import is still a module (top-level await), as the files users save are
  moduleDetection: ts.ModuleDetectionKind.Force,
};

const MODULE_SETTINGS: [string, ts.CompilerOptions][] = [
  ["nodenext", { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }],
  ["bundler", { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }],
];

/** Blocks that use `@sluice/client` alone: it promises to need no DOM library (Fetch types from @types/node suffice). */
const clientOnly = (s: Snippet) => /from\s+["']@sluice\/client["']/.test(s.code) && !/from\s+["']@sluice\/(?!client["'])/.test(s.code);

/**
 * The tsconfig.json the Cloudflare docs tell users to write (packages/cloudflare's README and its
 * page on the site, which must be the same): the Workers blocks compile with its options.
 */
function workersTsconfig(): { options: ts.CompilerOptions; sources: string[] } {
  const found = ["packages/cloudflare/README.md", "apps/docs/packages/cloudflare.md"].map((readme) => {
    const blocks = fences(readFileSync(join(rootDir, readme), "utf8")).filter((b) => b.language === "json" && b.code.includes('"@cloudflare/workers-types"'));
    expect(blocks, `${readme}: one tsconfig.json block naming @cloudflare/workers-types`).toHaveLength(1);
    return { readme, code: (blocks[0] as { code: string }).code };
  });
  expect(new Set(found.map((f) => f.code)).size, "the README and the site give the same tsconfig.json").toBe(1);
  const json = JSON.parse((found[0] as { code: string }).code) as { compilerOptions: object };
  const { options, errors } = ts.convertCompilerOptionsFromJson(json.compilerOptions, project);
  expect(errors.map((e) => ts.flattenDiagnosticMessageText(e.messageText, "\n"))).toEqual([]);
  return { options, sources: found.map((f) => f.readme) };
}

const ENVIRONMENTS: [string, (s: Snippet) => boolean, ts.CompilerOptions][] = [
  ["Node.js (ES2022 + DOM + @types/node)", (s) => s.environment === "node", { lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"], types: ["node"] }],
  ["@sluice/client on Node.js without the DOM library", (s) => s.environment === "node" && clientOnly(s), { lib: ["lib.es2022.d.ts"], types: ["node"] }],
  ["Workers (the quick start's tsconfig.json: ES2022 + @cloudflare/workers-types)", (s) => s.environment === "workers", {}],
];

/** The compile worker (compile-worker.mjs), shared by the six programs: they reuse what it parsed. */
const programs = compiler();
afterAll(() => programs.close());

/**
 * Type-checks the blocks as one program, in the compile worker (compile-worker.mjs), its
 * incremental state kept as `<name>.tsbuildinfo`: its diagnostics, at the Markdown's lines.
 */
async function compile(name: string, files: Snippet[], options: ts.CompilerOptions): Promise<string[]> {
  const byFile = new Map(files.map((s) => [join(project, s.file), s]));
  const diagnostics = await withBuildInfo(buildInfoPath("readme-snippets", name), async (buildInfo) => {
    return programs.compile({ rootNames: [...byFile.keys()], options: { ...base, ...options }, cwd: project, buildInfo });
  });
  return diagnostics.map(({ file, line, message }) => {
    if (file === undefined) return message;
    const snippet = byFile.get(file);
    // a block's line n is the Markdown's line (fence + n)
    const at = snippet === undefined ? `${relative(rootDir, file)}:${line + 1}` : `${snippet.readme}:${snippet.line + line + 1}`;
    return `${at}: ${message}`;
  });
}

describe("TypeScript blocks of the READMEs and the site", () => {
  it("are found in every README and on the site's pages, each with known markers only", () => {
    expect(snippets.length).toBeGreaterThan(40);
    for (const readme of [
      "README.md",
      "packages/core/README.md",
      "packages/redis/README.md",
      "packages/cloudflare/README.md",
      "packages/next/README.md",
      "apps/docs/concepts/algorithms.md",
      "apps/docs/concepts/protection.md",
      "apps/docs/packages/hono.md",
      "apps/docs/migration.md",
    ]) {
      expect(snippets.some((s) => s.readme === readme), readme).toBe(true);
    }
    expect(snippets.flatMap((s) => s.markers.filter((m) => !MARKERS.has(m)).map((m) => `${where(s)}: unknown marker "${m}"`))).toEqual([]);
    expect(snippets.filter((s) => s.markers.includes("no-run") && s.markers.includes("no-check")).map(where)).toEqual([]);
  });

  for (const [moduleName, moduleOptions] of MODULE_SETTINGS) {
    for (const [environmentName, belongs, environmentOptions] of ENVIRONMENTS) {
      it(`compile under ${moduleName}: ${environmentName}`, async () => {
        const files = checked.filter(belongs);
        expect(files.length).toBeGreaterThan(0);
        // Workers: the README's tsconfig.json as written (bundler), or with module nodenext
        const options = environmentName.startsWith("Workers")
          ? { skipLibCheck: false, ...workersTsconfig().options, ...(moduleName === "nodenext" ? moduleOptions : {}) }
          : { ...moduleOptions, ...environmentOptions };
        if (environmentName.startsWith("Workers")) {
          expect(options.types).toEqual(["@cloudflare/workers-types"]);
          expect(options.moduleResolution).toBe(moduleName === "nodenext" ? ts.ModuleResolutionKind.NodeNext : ts.ModuleResolutionKind.Bundler);
        }
        expect(await compile(`${moduleName} ${environmentName.split(" (")[0]}`, files, options)).toEqual([]);
        // ~10 s alone, over a minute beside the rest of the suite on a loaded 2-core machine
      }, 420_000);
    }
  }

  // a block that appears twice (a package README's example is also on its page) runs once
  const runnable = checked
    .filter((s) => s.environment === "node" && !s.markers.includes("no-run"))
    .filter((s, i, all) => all.findIndex((other) => other.code === s.code) === i);
  it.each(runnable.map((s) => [where(s), s] as const))("%s runs (its types stripped by esbuild, as tsx does) and exits 0", async (_where, snippet) => {
    writeIfChanged(runFile(snippet), transformSync(snippet.code, { loader: "ts", format: "esm", target: `node${process.versions.node}`, sourcefile: snippet.file, sourcemap: "inline" }).code);
    // as from a shell: without the NODE_ENV=test that Vitest sets (Next.js's types declare NODE_ENV
    // required on ProcessEnv; this environment has none on purpose)
    const inherited = Object.entries(process.env).filter(([name]) => name !== "NODE_ENV");
    const env = { ...Object.fromEntries(inherited), NO_COLOR: "1", NEXT_TELEMETRY_DISABLED: "1" } as unknown as NodeJS.ProcessEnv;
    const child = spawn(process.execPath, ["--enable-source-maps", runFile(snippet)], {
      cwd: project,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    clearTimeout(timer);
    expect(code, output).toBe(0);
  });
});
