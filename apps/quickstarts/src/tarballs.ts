/**
 * The packed packages the quick starts install: what `pnpm pack:all` names them and how the tests
 * make them. Node.js only (the Vitest global setup imports it).
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The version of each public package, from its package.json: the tarballs are named after it. */
export function tarballNames(): string[] {
  return readdirSync(join(ROOT_DIR, "packages"), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(ROOT_DIR, "packages", entry.name, "package.json")))
    .map((entry) => JSON.parse(readFileSync(join(ROOT_DIR, "packages", entry.name, "package.json"), "utf8")) as { name: string; version: string; private?: boolean })
    .filter((pkg) => pkg.private !== true)
    .map((pkg) => `${pkg.name.replace(/^@/, "").replace("/", "-")}-${pkg.version}.tgz`)
    .sort();
}

/**
 * `node scripts/pack-all.mjs --no-build --out <dir>` (what `pnpm pack:all` runs after its build;
 * `pnpm test` has built the packages already). Returns the directory.
 */
export function packTarballs(out: string): string {
  const missing = ["core", "hono", "redis", "next", "cloudflare"].filter((name) => !existsSync(join(ROOT_DIR, `packages/${name}/dist/index.js`)));
  if (missing.length > 0) {
    throw new Error(`[sluice] the quick starts install the packed packages, and ${missing.map((n) => `@sluice/${n}`).join(", ")} is not built: run \`pnpm run build\` first (\`pnpm test\` does)`);
  }
  execFileSync(process.execPath, [join(ROOT_DIR, "scripts/pack-all.mjs"), "--no-build", "--out", out], { cwd: ROOT_DIR, stdio: "pipe" });
  return out;
}

