/**
 * The API reference: TypeDoc over every published entry point, rendered to Markdown by
 * typedoc-plugin-markdown into `api/` (generated at build time, not committed).
 */
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Application, LogLevel, type ProjectReflection } from "typedoc";

const docsDir = fileURLToPath(new URL("..", import.meta.url));
const rootDir = join(docsDir, "..", "..");

/** Public entry points: module name → source file. An entry whose file does not exist yet is left out. */
export const ENTRY_POINTS: Record<string, string> = {
  "@sluice/core": "packages/core/src/index.ts",
  "@sluice/core/store": "packages/core/src/store.ts",
  "@sluice/core/adapter": "packages/core/src/adapter.ts",
  "@sluice/redis": "packages/redis/src/index.ts",
  "@sluice/cloudflare": "packages/cloudflare/src/index.ts",
  "@sluice/hono": "packages/hono/src/index.ts",
  "@sluice/next": "packages/next/src/index.ts",
  "@sluice/otel": "packages/otel/src/index.ts",
  "@sluice/client": "packages/client/src/index.ts",
};

export interface ApiResult {
  modules: string[];
  warnings: string[];
}

export async function generateApi(outDir = join(docsDir, "api")): Promise<ApiResult> {
  const entries = Object.entries(ENTRY_POINTS).filter(([, file]) => existsSync(join(rootDir, file)));
  rmSync(outDir, { recursive: true, force: true });
  const app = await Application.bootstrapWithPlugins({
    entryPoints: entries.map(([, file]) => join(rootDir, file)),
    entryPointStrategy: "resolve",
    tsconfig: join(docsDir, "tsconfig.typedoc.json"),
    plugin: ["typedoc-plugin-markdown"],
    out: outDir,
    readme: "none",
    name: "API reference",
    skipErrorChecking: true,
    // "Defined in" links to the repository (the checkout's git remote is not used)
    disableGit: true,
    basePath: rootDir,
    gitRevision: "main",
    // without git, TypeDoc's {path} is relative to the entry points' common directory (packages/)
    sourceLinkTemplate: "https://github.com/sluice-js/sluice/blob/{gitRevision}/packages/{path}#L{line}",
    excludePrivate: true,
    excludeInternal: true,
    sort: ["kind", "instance-first", "alphabetical-ignoring-documents"],
    logLevel: LogLevel.Warn,
    // typedoc-plugin-markdown
    entryFileName: "index.md",
    // a page for each class and interface; functions, type aliases and variables are sections of
    // their module's page (a page each made 217 of the site's 255 pages, most of them a few lines,
    // and the site's build and link check twice as long)
    membersWithOwnFile: ["Class", "Interface"],
    // an explicit anchor per member heading: TypeDoc links to `#quota_exceeded_type`, while
    // VitePress would slug the heading QUOTA_EXCEEDED_TYPE as `#quota-exceeded-type`
    useHTMLAnchors: true,
    hidePageHeader: true,
    hideBreadcrumbs: true,
    useCodeBlocks: true,
    parametersFormat: "table",
    interfacePropertiesFormat: "table",
    classPropertiesFormat: "table",
    typeDeclarationFormat: "table",
    sanitizeComments: true,
  } as never);
  const warnings: string[] = [];
  const log = app.logger.log.bind(app.logger);
  app.logger.log = (message, level) => {
    if (level >= LogLevel.Warn) warnings.push(String(message));
    log(message, level);
  };
  const project = (await app.convert()) as ProjectReflection | undefined;
  if (project === undefined) throw new Error("[sluice] [docs] TypeDoc could not convert the packages' entry points");
  // name each module after its package entry, not after its file path
  const byFile = new Map(entries.map(([name, file]) => [join(rootDir, file), name]));
  for (const module of project.children ?? []) {
    const file = module.sources?.[0]?.fullFileName;
    const name = file === undefined ? undefined : byFile.get(file);
    if (name !== undefined) module.name = name;
  }
  await app.generateOutputs(project);
  return { modules: (project.children ?? []).map((m) => m.name), warnings };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { modules, warnings } = await generateApi();
  console.log(`[docs] API reference: ${modules.join(", ")} (${warnings.length} TypeDoc warnings)`);
}
