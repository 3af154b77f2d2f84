/**
 * The packed packages the quick starts install: what `pnpm pack:all` names them (the tests get
 * them from `@sluice/testing/tarballs`, see the global setup). Node.js only.
 *
 * @module
 */
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
