#!/usr/bin/env node
/**
 * `pnpm pack:all`: builds every package and packs each public one (`private` unset in its
 * package.json) into `tarballs/` at the repository root, as `npm publish` would upload it
 * (`workspace:` ranges replaced by versions). Until the packages are on the npm registry, these
 * tarballs are how a project outside this repository installs them:
 *
 * ```sh
 * pnpm pack:all                       # prints: export SLUICE_TARBALLS=/…/tarballs
 * export SLUICE_TARBALLS=/…/tarballs  # the line it printed
 * cd ~/my-app && pnpm add "$SLUICE_TARBALLS"/sluice-core-0.1.0.tgz "$SLUICE_TARBALLS"/sluice-hono-0.1.0.tgz hono
 * ```
 *
 * Options: `--out <dir>` (default `tarballs`), `--no-build` (pack what `dist/` holds now). Old
 * `sluice-*.tgz` files in the output directory are removed first, so it holds one version of each.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The repository root. */
export const ROOT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The public packages under packages/: name, version and the tarball `pnpm pack` names.
 * @returns {{ name: string, version: string, dir: string, tarball: string }[]}
 */
export function publicPackages() {
  const dir = join(ROOT_DIR, "packages");
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => ({ dir: join(dir, entry.name), manifest: join(dir, entry.name, "package.json") }))
    .flatMap(({ dir: packageDir, manifest }) => {
      let pkg;
      try {
        pkg = JSON.parse(readFileSync(manifest, "utf8"));
      } catch {
        return [];
      }
      if (pkg.private === true) return [];
      // what `pnpm pack` writes: the scope's "@" dropped, "/" as "-"
      const tarball = `${pkg.name.replace(/^@/, "").replace("/", "-")}-${pkg.version}.tgz`;
      return [{ name: pkg.name, version: pkg.version, dir: packageDir, tarball }];
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The pnpm that runs this script (`pnpm pack:all`), else the one on PATH. */
function pnpm() {
  const execPath = process.env.npm_execpath;
  if (execPath !== undefined && /pnpm(\.c?js)?$/.test(execPath)) {
    return execPath.endsWith("js") ? [process.execPath, execPath] : [execPath];
  }
  return ["pnpm"];
}

/**
 * Runs pnpm in the repository root; `quiet` keeps its output unless it fails.
 * @param {string[]} args
 * @param {boolean} [quiet]
 */
function run(args, quiet = false) {
  const [command, ...prefix] = pnpm();
  const result = spawnSync(command, [...prefix, ...args], {
    cwd: ROOT_DIR,
    stdio: ["ignore", quiet ? "pipe" : "inherit", quiet ? "pipe" : "inherit"],
    encoding: "utf8",
  });
  if (result.status !== 0) {
    const output = quiet ? `\n${result.stdout ?? ""}${result.stderr ?? ""}` : "";
    throw new Error(`[sluice] \`pnpm ${args.join(" ")}\` failed (${result.error?.message ?? `exit code ${result.status}`})${output}`);
  }
}

/**
 * Builds (unless `build: false`) and packs the public packages into `out`; returns the tarballs'
 * absolute paths.
 *
 * @param {{ out?: string, build?: boolean }} [options]
 * @returns {string[]}
 * @example
 * ```js
 * import { packAll } from "./scripts/pack-all.mjs";
 * const tarballs = packAll({ out: "/tmp/sluice-tarballs", build: false });
 * ```
 */
export function packAll(options = {}) {
  const out = resolve(ROOT_DIR, options.out ?? "tarballs");
  const packages = publicPackages();
  if (options.build !== false) run(["run", "build"]);
  mkdirSync(out, { recursive: true });
  for (const file of readdirSync(out)) if (/^sluice-.*\.tgz$/.test(file)) rmSync(join(out, file));
  // one pnpm process for all of them; its file lists are kept unless it fails
  run(["-r", ...packages.flatMap((p) => ["--filter", p.name]), "pack", "--pack-destination", out], true);
  const made = new Set(readdirSync(out));
  const absent = packages.filter((p) => !made.has(p.tarball));
  if (absent.length > 0) throw new Error(`[sluice] pnpm pack wrote no ${absent.map((p) => p.tarball).join(", ")} in ${out}`);
  return packages.map((p) => join(out, p.tarball));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf("--out");
  const unknown = args.filter((arg, i) => arg !== "--no-build" && arg !== "--out" && !(outAt >= 0 && i === outAt + 1));
  if (unknown.length > 0 || (outAt >= 0 && args[outAt + 1] === undefined)) {
    process.stderr.write(`usage: pnpm pack:all [--out <dir>] [--no-build]\n`);
    process.exit(2);
  }
  const tarballs = packAll({ out: outAt >= 0 ? args[outAt + 1] : undefined, build: !args.includes("--no-build") });
  const out = dirname(tarballs[0] ?? resolve(ROOT_DIR, "tarballs"));
  process.stdout.write(`\nPacked ${tarballs.length} packages into ${out}:\n`);
  for (const file of tarballs) process.stdout.write(`  ${file.slice(out.length + 1)}\n`);
  process.stdout.write(`\nIn the shell where you follow a quick start:\n\nexport SLUICE_TARBALLS=${out}\n`);
}
