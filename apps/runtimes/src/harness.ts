/**
 * The Node.js side of the runtime smoke suite: finds the pinned `bun` and `deno` binaries in the
 * root's node_modules, starts a private redis-server (free port, no persistence) with the
 * Upstash-REST bridge in front of it, runs `bun test` / `deno test` on the suite with the bridge's
 * address in the environment, and reads the runner's report back.
 *
 * Nothing is downloaded at test time: Deno resolves npm packages from the installed node_modules
 * (`--node-modules-dir=manual`, `--cached-only`, `--no-remote`, an empty `DENO_DIR`), Bun's
 * auto-install is off (bunfig.toml), and both see an unreachable npm registry, so any attempt to
 * fetch fails loudly instead of going out.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { accessSync, constants as fsConstants, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startRedisServer } from "@sluice/testing/redis-server";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { UPSTASH_TOKEN_ENV, UPSTASH_URL_ENV } from "./suite.js";

export type RuntimeName = "bun" | "deno";
export const RUNTIMES: readonly RuntimeName[] = ["bun", "deno"];

/** apps/runtimes */
export const APP_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** The repository root (its package.json pins the runtimes). */
export const ROOT_DIR = resolve(APP_DIR, "../..");

/** The suite file each runtime's runner is given, relative to {@link APP_DIR}. */
export const SUITE_FILES: Readonly<Record<RuntimeName, string>> = { bun: "./bun/smoke.test.ts", deno: "./deno/smoke.test.ts" };

/** Where each npm package puts its native binary, relative to the package directory. */
const BINARY_IN_PACKAGE: Readonly<Record<RuntimeName, string>> = { bun: "bin/bun.exe", deno: "deno" };

/** The version pinned in the root package.json's devDependencies. */
export function pinnedVersion(runtime: RuntimeName): string {
  const pkg = JSON.parse(readFileSync(join(ROOT_DIR, "package.json"), "utf8")) as { devDependencies?: Record<string, string> };
  const version = pkg.devDependencies?.[runtime];
  if (version === undefined) throw new Error(`the root package.json pins no ${runtime} in devDependencies`);
  return version;
}

function howToGet(runtime: RuntimeName): string {
  return (
    `The ${runtime} binary ships inside the \`${runtime}\` npm package, a devDependency of the root package.json ` +
    `(pinned ${pinnedVersion(runtime)}). Run \`pnpm install\` at the repository root: its postinstall puts the binary ` +
    `in node_modules/${runtime}/${BINARY_IN_PACKAGE[runtime]} (pnpm runs it because pnpm-workspace.yaml lists ${runtime} ` +
    `in onlyBuiltDependencies). If the install ran with scripts disabled, run \`pnpm rebuild ${runtime}\`. ` +
    `\`pnpm exec ${runtime} --version\` should then print ${pinnedVersion(runtime)}.`
  );
}

/**
 * The native binary of `runtime` from the root's node_modules (`root` only for tests); throws an
 * error that says how to get it when it is missing.
 */
export function runtimeBinary(runtime: RuntimeName, root = ROOT_DIR): string {
  const path = join(root, "node_modules", runtime, BINARY_IN_PACKAGE[runtime]);
  try {
    accessSync(path, fsConstants.X_OK);
  } catch {
    throw new Error(`[sluice] [runtimes] ${runtime} not found at ${path}. ${howToGet(runtime)}`);
  }
  return path;
}

/** The environment for a runtime: `extra` (the bridge's address), no telemetry, no colour, no registry. */
export function runtimeEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const unreachableRegistry = "http://127.0.0.1:9/"; // the discard port: any fetch fails at once
  const { FORCE_COLOR: _forceColor, ...inherited } = process.env; // Deno colours with any FORCE_COLOR
  return {
    ...inherited,
    ...extra,
    NO_COLOR: "1",
    DO_NOT_TRACK: "1",
    NODE_ENV: "test",
    // Bun: bunfig.toml turns auto-install off; this makes any registry request fail too
    BUN_CONFIG_REGISTRY: unreachableRegistry,
    // Deno: no update check, no registry
    DENO_NO_UPDATE_CHECK: "1",
    NPM_CONFIG_REGISTRY: unreachableRegistry,
  };
}

/** The variables @upstash/redis 1.39 reads when a client is made (platform and telemetry hints). */
const UPSTASH_CLIENT_ENV = ["UPSTASH_DISABLE_TELEMETRY", "UPSTASH_CONSOLE", "VERCEL", "AWS_REGION"];

/**
 * Deno's flags for running from the installed node_modules: npm packages resolved there (pnpm's
 * layout), nothing fetched or cached from elsewhere, no lock file or config written or read, no
 * type-check (the root tsc checks src/suite.ts; Deno strips the types), never a permission prompt.
 */
export function denoOfflineFlags(): string[] {
  return ["--node-modules-dir=manual", "--cached-only", "--no-remote", "--no-lock", "--no-config", "--no-check", "--no-prompt"];
}

/** The command line that runs the suite under `runtime`. */
export function runtimeCommand(runtime: RuntimeName): { bin: string; args: string[] } {
  const bin = runtimeBinary(runtime);
  if (runtime === "bun") return { bin, args: ["test", "--timeout=30000", SUITE_FILES.bun] };
  return {
    bin,
    args: [
      "test",
      ...denoOfflineFlags(),
      "--allow-net=127.0.0.1",
      // the bridge's address; NODE_ENV for @sluice/redis/testing's fence; what @upstash/redis reads
      `--allow-env=${[UPSTASH_URL_ENV, UPSTASH_TOKEN_ENV, "NODE_ENV", ...UPSTASH_CLIENT_ENV].join(",")}`,
      SUITE_FILES.deno,
    ],
  };
}

/** A private redis-server and the Upstash bridge in front of it, for one run. */
export interface Backends {
  /** The variables that point the suite at the bridge. */
  readonly env: Record<string, string>;
  close(): Promise<void>;
}

export async function startBackends(): Promise<Backends> {
  const redis = await startRedisServer();
  try {
    const bridge = await startUpstashBridge({ redisUrl: redis.url });
    return {
      env: { [UPSTASH_URL_ENV]: bridge.url, [UPSTASH_TOKEN_ENV]: bridge.token },
      async close() {
        await bridge.close();
        await redis.stop();
      },
    };
  } catch (error) {
    await redis.stop();
    throw error;
  }
}

/** What one run printed and how it ended. */
export interface RunResult {
  readonly runtime: RuntimeName;
  readonly command: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
  readonly durationMs: number;
  readonly timedOut: boolean;
}

export interface RunOptions {
  /** Extra environment (the bridge's address). */
  env?: Record<string, string>;
  /** Killed after this long. @default 120_000 */
  timeoutMs?: number;
  /** Streams the runner's output here as it comes (the CLI passes process.stdout). */
  echo?: NodeJS.WritableStream;
}

/** Runs the suite under `runtime` and collects its output (stdout and stderr, interleaved). */
export async function runSuite(runtime: RuntimeName, options: RunOptions = {}): Promise<RunResult> {
  const { bin, args } = runtimeCommand(runtime);
  const denoDir = runtime === "deno" ? await mkdtemp(join(tmpdir(), "sluice-deno-dir-")) : undefined;
  const env = runtimeEnv({ ...options.env, ...(denoDir === undefined ? {} : { DENO_DIR: denoDir }) });
  const started = performance.now();
  try {
    return await new Promise<RunResult>((resolvePromise, reject) => {
      const child = spawn(bin, args, { cwd: APP_DIR, env, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      let timedOut = false;
      const collect = (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        output += text;
        options.echo?.write(text);
      };
      child.stdout.on("data", collect);
      child.stderr.on("data", collect);
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill("SIGKILL");
      }, options.timeoutMs ?? 120_000);
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(new Error(`[sluice] [runtimes] could not run ${bin}: ${error.message}. ${howToGet(runtime)}`, { cause: error }));
      });
      child.once("close", (code, signal) => {
        clearTimeout(timer);
        resolvePromise({
          runtime,
          command: [bin, ...args].join(" "),
          code,
          signal,
          output,
          durationMs: performance.now() - started,
          timedOut,
        });
      });
    });
  } finally {
    if (denoDir !== undefined) await rm(denoDir, { recursive: true, force: true });
  }
}

/** What a runner reported: its totals and each test's outcome by name. */
export interface Report {
  readonly passed: number;
  readonly failed: number;
  /** Skipped, todo or filtered-out tests: must be 0. */
  readonly skipped: number;
  readonly tests: ReadonlyMap<string, "pass" | "fail" | "skip">;
}

// Colour codes, should a runner print them despite NO_COLOR.
const ANSI = /\u001b\[[0-9;]*m/g;

function count(output: string, pattern: RegExp): number | undefined {
  const match = pattern.exec(output);
  return match === null ? undefined : Number(match[1]);
}

/**
 * Reads `bun test`'s report (`(pass) name [1.00ms]` per test; ` 21 pass`, ` 0 fail` at the end) or
 * `deno test`'s (`name ... ok (1ms)` per test, steps indented below it; `ok | 21 passed | 0 failed (2s)` at the end).
 * Throws when the totals are missing: a runner that crashed before reporting is a failure too.
 */
export function parseReport(runtime: RuntimeName, rawOutput: string): Report {
  const output = rawOutput.replace(ANSI, "");
  const tests = new Map<string, "pass" | "fail" | "skip">();
  let passed: number | undefined;
  let failed: number | undefined;
  let skipped = 0;
  if (runtime === "bun") {
    for (const match of output.matchAll(/^\((pass|fail|skip|todo)\) (.+?)(?: \[[\d.]+m?s\])?$/gm)) {
      const status = match[1] === "pass" ? "pass" : match[1] === "fail" ? "fail" : "skip";
      tests.set((match[2] as string).trim(), status);
    }
    passed = count(output, /^\s*(\d+) pass$/m);
    failed = count(output, /^\s*(\d+) fail$/m);
    skipped = (count(output, /^\s*(\d+) skip$/m) ?? 0) + (count(output, /^\s*(\d+) todo$/m) ?? 0);
  } else {
    for (const match of output.matchAll(/^(\S.*?) \.\.\. (ok|FAILED|ignored)(?: \(|$)/gm)) {
      const status = match[2] === "ok" ? "pass" : match[2] === "FAILED" ? "fail" : "skip";
      tests.set((match[1] as string).trim(), status);
    }
    const totals = /^(?:ok|FAILED) \| (\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed(?: \(\d+ steps?\))?(?: \| (\d+) ignored)?(?: \| (\d+) filtered out)?/m.exec(
      output,
    );
    if (totals !== null) {
      passed = Number(totals[1]);
      failed = Number(totals[2]);
      skipped = Number(totals[3] ?? 0) + Number(totals[4] ?? 0);
    }
  }
  if (passed === undefined || failed === undefined) {
    throw new Error(`[sluice] [runtimes] ${runtime} printed no test totals; its output:\n${rawOutput}`);
  }
  return { passed, failed, skipped, tests };
}
