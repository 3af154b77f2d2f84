/**
 * scripts/preflight.mjs, the first step of `pnpm test`, in made-up machines: a PATH of stubs in a
 * temporary directory (a `redis-server` or `chromium` that is only a file, an `apt-get` that logs
 * what it was asked and "installs" by writing the stub, a `sudo` that asks for a password or does
 * not), and the user id passed in (0 is root). The real installation runs where it is real: on a
 * fresh machine, `.ci/run` calls `pnpm test`.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ROOT_DIR } from "../src/harness.js";

const SCRIPT = join(ROOT_DIR, "scripts/preflight.mjs");

let dir: string;
let bin: string;
let log: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "sluice-preflight-"));
  bin = join(dir, "bin");
  log = join(dir, "apt-get.log");
  spawnSync("mkdir", [bin]);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function stub(name: string, body: string): string {
  const path = join(bin, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** An apt-get that logs `DEBIAN_FRONTEND args` and, on install, writes each package's command as a stub. */
function aptGet(exitCode = 0): void {
  stub(
    "apt-get",
    [
      `echo "$DEBIAN_FRONTEND $*" >> ${JSON.stringify(log)}`,
      `[ ${exitCode} -ne 0 ] && exit ${exitCode}`,
      `if [ "$1" = install ]; then for p in "$@"; do`,
      `  case "$p" in redis-server|chromium) printf '#!/bin/sh\\n' > ${JSON.stringify(bin)}/$p; /bin/chmod +x ${JSON.stringify(bin)}/$p;; esac`,
      `done; fi`,
      "exit 0",
    ].join("\n"),
  );
}

const aptLog = () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []);

/** Runs `preflight({ uid })` in a node process whose environment is `env` alone. */
function preflight(uid: number, env: Record<string, string> = {}) {
  const code = `import { preflight } from ${JSON.stringify(pathToFileURL(SCRIPT).href)}; process.exitCode = preflight({ uid: ${uid} });`;
  const result = spawnSync(process.execPath, ["--input-type=module", "-e", code], { env: { PATH: bin, ...env } as unknown as NodeJS.ProcessEnv, encoding: "utf8", timeout: 30_000 });
  return { code: result.status, lines: `${result.stdout}${result.stderr}`.split("\n") };
}

describe("scripts/preflight.mjs", () => {
  it("without chromium, not root and sudo asking for a password: stops at once with the exact command, installs nothing", () => {
    stub("redis-server", "exit 0");
    stub("sudo", 'echo "sudo: a password is required" >&2; exit 1');
    aptGet();
    const { code, lines } = preflight(1000);
    expect(code).toBe(1);
    expect(lines).toContain("[preflight] `pnpm test` needs chromium, not found on PATH:");
    expect(lines).toContain("  sudo apt-get update && sudo apt-get install -y chromium");
    expect(lines.join("\n")).not.toMatch(/redis-server: needed/);
    expect(aptLog()).toEqual([]);
  });

  it("without either, not root and no sudo at all: the command to run as root", () => {
    aptGet();
    const { code, lines } = preflight(1000);
    expect(code).toBe(1);
    expect(lines).toContain('  su -c "apt-get update && apt-get install -y redis-server chromium"');
    expect(aptLog()).toEqual([]);
  });

  it("as root: apt-get update, then apt-get install -y of what is missing, non-interactive; then it is found", () => {
    stub("redis-server", "exit 0");
    aptGet();
    const { code, lines } = preflight(0);
    expect(code, lines.join("\n")).toBe(0);
    expect(aptLog()).toEqual(["noninteractive update", "noninteractive install -y chromium"]);
    expect(lines).toContain("[preflight] $ apt-get install -y chromium");
    expect(lines).toContain("[preflight] installed chromium");
  });

  it("with passwordless sudo: the same through sudo", () => {
    // (`true` is a shell builtin here: the stub PATH has no /bin)
    stub("sudo", '[ "$1" = -n ] && shift; [ "$1" = true ] && exit 0; exec "$@"');
    aptGet();
    const { code, lines } = preflight(1000);
    expect(code, lines.join("\n")).toBe(0);
    expect(lines).toContain("[preflight] $ sudo apt-get update");
    expect(aptLog()).toEqual(["noninteractive update", "noninteractive install -y redis-server chromium"]);
    expect(existsSync(join(bin, "chromium")) && existsSync(join(bin, "redis-server"))).toBe(true);
  });

  it("a failing apt-get stops the run with its command and exit code, nothing after it", () => {
    stub("redis-server", "exit 0");
    aptGet(100);
    const { code, lines } = preflight(0);
    expect(code).toBe(1);
    expect(lines).toContain("[preflight] `apt-get update` failed (exit code 100); nothing else was run.");
    expect(aptLog()).toEqual(["noninteractive update"]);
  });

  it("without apt-get: names what is missing, the variables that point at it, and installs nothing", () => {
    stub("redis-server", "exit 0");
    const { code, lines } = preflight(0);
    expect(code).toBe(1);
    expect(lines.join("\n")).toMatch(/there is no apt-get here, so nothing was installed/);
    expect(lines.join("\n")).toMatch(/set CHROMIUM_PATH/);
  });

  it("CHROMIUM_PATH and REDIS_SERVER_BIN stand in for the commands on PATH", () => {
    const chromium = stub("my-chromium", "exit 0");
    const redis = stub("my-redis-server", "exit 0");
    expect(preflight(1000, { CHROMIUM_PATH: chromium, REDIS_SERVER_BIN: redis })).toEqual({ code: 0, lines: ["[preflight] redis-server and chromium found", ""] });
    // a variable that names no executable file is missing, whatever PATH holds
    stub("chromium", "exit 0");
    expect(preflight(1000, { CHROMIUM_PATH: join(dir, "nowhere"), REDIS_SERVER_BIN: redis }).code).toBe(1);
  });

  it("is the first step of `pnpm test`, before the build; here it finds both", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT_DIR, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(pkg.scripts.test).toMatch(/^node scripts\/preflight\.mjs && pnpm run build && /);
    const result = spawnSync(process.execPath, [SCRIPT], { encoding: "utf8", timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toBe("[preflight] redis-server and chromium found\n");
  });

  it(".ci/run calls exactly the README's test command and installs no system package itself", () => {
    const ci = readFileSync(join(ROOT_DIR, ".ci/run"), "utf8");
    const commands = ci.split("\n").filter((line) => line.trim() !== "" && !line.trim().startsWith("#"));
    expect(commands.at(-1)).toBe("pnpm test");
    expect(commands.join("\n")).not.toMatch(/apt-get|sudo/);
  });
});
