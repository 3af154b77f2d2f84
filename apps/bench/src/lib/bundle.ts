/**
 * Bundles a benchmark entry point the way users run Sluice: the workspace packages compiled from
 * their TypeScript sources by esbuild for ES2022 (as `tsup` builds the published `dist`), every
 * other package left to Node's resolution from `apps/bench/node_modules`, and no `tsx` loader in
 * the measured process.
 *
 * Why not `--import tsx`: tsx compiles with `keepNames`, which wraps every function expression in
 * a `__name(fn, "name")` call (an `Object.defineProperty` per closure created). A closure built per
 * request then costs a property definition per request that the published build never pays: the
 * profile of the HTTP benchmark showed it.
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const SKIP = Symbol("resolving");

/** Where bundles go (git-ignored, inside the package so that Node finds its node_modules). */
export const BUILD_DIR = new URL("../../.build/", import.meta.url);

/**
 * Bundles `entry` (a URL) to `.build/<name>.mjs` and returns the output path. Workspace packages
 * (`@sluice/*`) and relative imports are compiled in, resolved through the `@sluice/source`
 * condition; anything else stays an import.
 */
export async function bundleEntry(entry: URL, name: string): Promise<string> {
  mkdirSync(BUILD_DIR, { recursive: true });
  const outfile = fileURLToPath(new URL(`${name}.mjs`, BUILD_DIR));
  await build({
    entryPoints: [fileURLToPath(entry)],
    outfile,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "es2022",
    conditions: ["@sluice/source"],
    keepNames: false,
    logLevel: "silent",
    plugins: [
      {
        name: "external-packages-but-sluice",
        setup(b) {
          // a package imported by a workspace package's source resolves from that package (its own
          // dependencies), to the file esbuild would pick; Node then loads it from there
          b.onResolve({ filter: /^[^./]/ }, async (args) => {
            if (args.path.startsWith("@sluice/") || args.pluginData === SKIP || args.path.startsWith("node:")) return undefined;
            const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: SKIP });
            if (found.errors.length > 0 || found.external || !isAbsolute(found.path)) return { path: args.path, external: true };
            return { path: found.path, external: true };
          });
        },
      },
    ],
  });
  return outfile;
}
