#!/usr/bin/env node
/**
 * The first step of `pnpm test`: the system packages the tests need, installed when they are
 * missing and this process may install them, otherwise a stop at once with the exact command to run.
 *
 * | command        | needed by                                          | Debian/Ubuntu package | or set            |
 * |----------------|----------------------------------------------------|-----------------------|-------------------|
 * | `redis-server` | every Redis test starts its own on a free port     | `redis-server`        | `REDIS_SERVER_BIN` |
 * | `chromium`     | the browser tests (headless, driven by playwright) | `chromium`            | `CHROMIUM_PATH`   |
 *
 * When something is missing and `apt-get` is on `PATH`: as root it runs `apt-get update && apt-get
 * install -y <packages>`; as another user with passwordless sudo (`sudo -n true` succeeds), the
 * same through `sudo`. Anything else (a password would be asked, no sudo, no apt-get) stops with
 * exit code 1 and the command to run, before the build starts: a test run never finds out twenty
 * minutes in. With everything present it prints one line and costs a few milliseconds.
 *
 * `.ci/run` calls `pnpm test` on a fresh machine, so CI exercises the real installation.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants as fsConstants, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * What the tests need from the system.
 * @type {ReadonlyArray<{ command: string, aptPackage: string, override: string, neededBy: string }>}
 */
export const REQUIREMENTS = [
  { command: "redis-server", aptPackage: "redis-server", override: "REDIS_SERVER_BIN", neededBy: "the Redis tests (each starts its own redis-server on a free port)" },
  { command: "chromium", aptPackage: "chromium", override: "CHROMIUM_PATH", neededBy: "the browser tests (headless Chromium)" },
];

/** @param {string} path */
function isExecutableFile(path) {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The absolute path of `command` on `PATH`, or undefined.
 * @param {string} command
 * @param {Record<string, string | undefined>} env
 */
export function which(command, env) {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, command);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/**
 * The requirements that are neither on `PATH` nor given by their variable.
 * @param {Record<string, string | undefined>} env
 */
export function missingRequirements(env) {
  return REQUIREMENTS.filter(({ command, override }) => {
    const given = env[override];
    if (given !== undefined && given !== "") return !isExecutableFile(given);
    return which(command, env) === undefined;
  });
}

/**
 * The exact install command for someone who is not root.
 * @param {readonly string[]} packages
 * @param {boolean} hasSudo
 */
export function installCommand(packages, hasSudo) {
  const list = packages.join(" ");
  return hasSudo
    ? `sudo apt-get update && sudo apt-get install -y ${list}`
    : `su -c "apt-get update && apt-get install -y ${list}"`;
}

/**
 * Checks, installs when it may, and reports. Returns the exit code (0: everything is there).
 *
 * @param {{ env?: Record<string, string | undefined>, uid?: number, log?: (line: string) => void }} [options]
 *   `env` (its `PATH` finds the commands, apt-get and sudo; default `process.env`), `uid` (0 is root;
 *   default the process's), `log` (one call per line; default stderr).
 * @returns {number}
 * @example
 * ```js
 * import { preflight } from "./scripts/preflight.mjs";
 * process.exitCode = preflight(); // what `node scripts/preflight.mjs` does
 * ```
 */
export function preflight(options = {}) {
  const env = options.env ?? process.env;
  const uid = options.uid ?? (typeof process.getuid === "function" ? process.getuid() : -1);
  const log = options.log ?? ((line) => process.stderr.write(`${line}\n`));

  const missing = missingRequirements(env);
  if (missing.length === 0) {
    log(`[preflight] ${REQUIREMENTS.map((r) => r.command).join(" and ")} found`);
    return 0;
  }
  const packages = missing.map((r) => r.aptPackage);
  const why = missing.map((r) => `  ${r.command}: needed by ${r.neededBy} (or set ${r.override} to its path)`);
  log(`[preflight] \`pnpm test\` needs ${missing.map((r) => r.command).join(" and ")}, not found on PATH:`);
  for (const line of why) log(line);

  if (which("apt-get", env) === undefined) {
    log("[preflight] there is no apt-get here, so nothing was installed. Install them with your system's package manager");
    log(`  (macOS: \`brew install redis\` and \`brew install --cask chromium\`), or set ${missing.map((r) => r.override).join(" / ")}, then run \`pnpm test\` again.`);
    return 1;
  }

  /** @type {string[] | undefined} how to run apt-get with the right to install */
  let prefix;
  if (uid === 0) prefix = [];
  else if (which("sudo", env) !== undefined && spawnSync("sudo", ["-n", "true"], { env, stdio: "ignore" }).status === 0) prefix = ["sudo"];

  if (prefix === undefined) {
    log("[preflight] installing them needs root, and this user is not root and has no passwordless sudo. Run:");
    log("");
    log(`  ${installCommand(packages, which("sudo", env) !== undefined)}`);
    log("");
    log("[preflight] then `pnpm test` again.");
    return 1;
  }

  const aptEnv = { ...env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["apt-get", "update"], ["apt-get", "install", "-y", ...packages]]) {
    const command = [...prefix, ...args];
    log(`[preflight] $ ${command.join(" ")}`);
    const result = spawnSync(command[0], command.slice(1), { env: aptEnv, stdio: ["ignore", "inherit", "inherit"] });
    if (result.status !== 0) {
      log(`[preflight] \`${command.join(" ")}\` failed (${result.error?.message ?? `exit code ${result.status}`}); nothing else was run.`);
      return 1;
    }
  }
  const stillMissing = missingRequirements(env);
  if (stillMissing.length > 0) {
    log(`[preflight] installed ${packages.join(" ")}, yet ${stillMissing.map((r) => r.command).join(" and ")} is still not on PATH (${env.PATH ?? ""}).`);
    return 1;
  }
  log(`[preflight] installed ${packages.join(" ")}`);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  process.exitCode = preflight();
}
