/**
 * The public packages as `pnpm pack` makes them (`scripts/pack-all.mjs --no-build`, what
 * `pnpm pack:all` runs after its build), packed once for every test that needs the tarballs a user
 * would install: the quick starts, the package checks (`publint`, `attw`) and the published-package
 * test. Node only: import it as `@sluice/testing/tarballs`.
 *
 * The tarballs are kept in `node_modules/.cache/sluice-tarballs/<key>/`, where the key is a hash of
 * every file of every public package (its `dist/`, sources, package.json, README, LICENSE — all but
 * `node_modules`): a rebuild that changes one byte that could be packed gets new tarballs, and
 * anything else reuses the ones made before, within a run and between runs. A directory is made
 * whole under a temporary name and then renamed, so a reader never sees half of one; entries not
 * used for a day are removed.
 *
 * @example
 * ```ts
 * const { dir, tarballs } = packedTarballs();
 * tarballs["@sluice/core"]; // …/sluice-core-0.1.0.tgz
 * ```
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** Where the packed tarballs are kept, one directory per key. */
export const TARBALL_CACHE_DIR = join(ROOT_DIR, "node_modules/.cache/sluice-tarballs");

/** A directory of the cache not used for this long is removed. */
const STALE_MS = 24 * 60 * 60 * 1000;

export interface PublicPackage {
  /** `@sluice/<folder>` */
  name: string;
  version: string;
  /** The folder under packages/. */
  folder: string;
  /** Its absolute directory. */
  dir: string;
  /** The file name `pnpm pack` gives its tarball: the scope's "@" dropped, "/" as "-". */
  tarball: string;
}

/** The public packages (each packages/* whose package.json is not `private`), by name. */
export function publicPackages(): PublicPackage[] {
  const packagesDir = join(ROOT_DIR, "packages");
  return readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(packagesDir, entry.name, "package.json")))
    .map((entry) => ({ folder: entry.name, manifest: JSON.parse(readFileSync(join(packagesDir, entry.name, "package.json"), "utf8")) as { name: string; version: string; private?: boolean } }))
    .filter(({ manifest }) => manifest.private !== true)
    .map(({ folder, manifest }) => ({
      name: manifest.name,
      version: manifest.version,
      folder,
      dir: join(packagesDir, folder),
      tarball: `${manifest.name.replace(/^@/, "").replace("/", "-")}-${manifest.version}.tgz`,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Every file under `dir` but node_modules, relative to `base`, sorted. */
function filesOf(dir: string, base: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.name !== "node_modules")
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return filesOf(path, base);
      return entry.isFile() ? [relative(base, path)] : [];
    })
    .sort();
}

/** The cache key of the packages as they are now: a hash of each one's files (names and contents). */
export function tarballKey(packages: readonly PublicPackage[] = publicPackages()): string {
  const hash = createHash("sha256");
  for (const pkg of packages) {
    for (const file of filesOf(pkg.dir, ROOT_DIR)) {
      hash.update(`${file}\0`);
      hash.update(readFileSync(join(ROOT_DIR, file)));
      hash.update("\0");
    }
  }
  return hash.digest("hex").slice(0, 20);
}

function removeStale(except: string): void {
  for (const entry of readdirSync(TARBALL_CACHE_DIR)) {
    if (entry === except) continue;
    const path = join(TARBALL_CACHE_DIR, entry);
    try {
      if (Date.now() - statSync(path).mtimeMs > STALE_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // removed meanwhile
    }
  }
}

/**
 * The tarballs of the public packages as built now, packed if no earlier call packed these very
 * files. Throws, naming the command to run, when a package is not built.
 */
export function packedTarballs(): { dir: string; tarballs: Record<string, string> } {
  const packages = publicPackages();
  const unbuilt = packages.filter((pkg) => !existsSync(join(pkg.dir, "dist"))).map((pkg) => pkg.name);
  if (unbuilt.length > 0) {
    throw new Error(`[sluice] the tests install the packed packages, and ${unbuilt.join(", ")} ${unbuilt.length === 1 ? "is" : "are"} not built: run \`pnpm run build\` at the repository root first (\`pnpm test\` does)`);
  }
  const key = tarballKey(packages);
  const dir = join(TARBALL_CACHE_DIR, key);
  const complete = () => packages.every((pkg) => existsSync(join(dir, pkg.tarball)));
  if (!complete()) {
    mkdirSync(TARBALL_CACHE_DIR, { recursive: true });
    const partial = mkdtempSync(join(TARBALL_CACHE_DIR, `${key}.partial-`));
    try {
      execFileSync(process.execPath, [join(ROOT_DIR, "scripts/pack-all.mjs"), "--no-build", "--out", partial], { cwd: ROOT_DIR, stdio: "pipe" });
      try {
        renameSync(partial, dir);
      } catch (error) {
        // another process made the same directory meanwhile: the same files, so use that one
        if (!complete()) throw error;
      }
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
    removeStale(key);
  } else {
    const now = new Date();
    utimesSync(dir, now, now);
  }
  return { dir, tarballs: Object.fromEntries(packages.map((pkg) => [pkg.name, join(dir, pkg.tarball)])) };
}
