/**
 * Runs the documentation's quick starts as a reader would: each one's files live in
 * `apps/docs/snippets/quickstart/<id>/` (the getting-started pages import them, so the pages show
 * exactly what runs here):
 *
 * - `install.sh`: the shell steps, run with `bash -euo pipefail` in a new, empty directory outside
 *   the repository, with `SLUICE_TARBALLS` pointing at the packed packages (what `pnpm pack:all`
 *   tells the reader to export);
 * - every other file but `run.sh`: the project's files, copied to the same relative path;
 * - `run.sh`: the one command that starts it (`exec`-ed; for a server, the test may append
 *   `--port`-like arguments where the tool has no environment variable for them, and says so).
 *
 * Installs go through pnpm's store with `prefer-offline` (`npm_config_prefer_offline`), so a
 * package already in the store is not fetched again; nothing of the repository leaks in: PATH
 * loses every `node_modules/.bin` and gains only the pinned `bun` and `deno` binaries, and the
 * variables pnpm and Vitest set for this process are dropped.
 *
 * @module
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { accessSync, constants as fsConstants, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative } from "node:path";
import { createClient } from "redis";
import { afterAll, beforeAll, inject } from "vitest";
import { ROOT_DIR } from "./tarballs.js";

export { ROOT_DIR, tarballNames } from "./tarballs.js";
/** Where the quick starts' files live. */
export const SNIPPETS_DIR = join(ROOT_DIR, "apps/docs/snippets/quickstart");

/** The quick starts, in the order of the getting-started pages. */
export const QUICK_START_IDS = ["hono-node", "ioredis", "node-redis", "upstash", "bun", "deno", "workers", "next16", "next15", "vercel-edge"] as const;
export type QuickStartId = (typeof QUICK_START_IDS)[number];

/** Files of a quick start's directory that are steps, not project files. */
const STEP_FILES = new Set(["install.sh", "run.sh"]);

export interface QuickStart {
  readonly id: QuickStartId;
  readonly dir: string;
  /** install.sh as written. */
  readonly install: string;
  /** The command of run.sh (its one line that is not a comment). */
  readonly run: string;
  /** The project's files, relative to `dir` (sorted). */
  readonly files: readonly string[];
}

function filesUnder(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name), base) : [relative(base, join(dir, entry.name))],
  );
}

/** Reads a quick start's directory; throws if install.sh or a one-command run.sh is missing. */
export function loadQuickStart(id: QuickStartId): QuickStart {
  const dir = join(SNIPPETS_DIR, id);
  const read = (name: string) => {
    const path = join(dir, name);
    if (!existsSync(path)) throw new Error(`[sluice] quick start ${id}: no ${relative(ROOT_DIR, path)}`);
    return readFileSync(path, "utf8");
  };
  const commands = read("run.sh")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  if (commands.length !== 1) throw new Error(`[sluice] quick start ${id}: run.sh must hold exactly one command, found ${commands.length}`);
  return {
    id,
    dir,
    install: read("install.sh"),
    run: commands[0] as string,
    files: filesUnder(dir)
      .filter((file) => !STEP_FILES.has(file))
      .sort(),
  };
}

/** The pinned Bun and Deno binaries of the root package.json (what a reader installs from their sites). */
function runtimeBinaries(): Record<"bun" | "deno", string> {
  const found = { bun: join(ROOT_DIR, "node_modules/bun/bin/bun.exe"), deno: join(ROOT_DIR, "node_modules/deno/deno") };
  for (const [name, path] of Object.entries(found)) {
    try {
      accessSync(path, fsConstants.X_OK);
    } catch {
      throw new Error(`[sluice] ${name} not found at ${path}: run \`pnpm install\` at the repository root (the root package.json pins it; \`pnpm rebuild ${name}\` if scripts were off)`);
    }
  }
  return found;
}

/** A place for one test file's projects, with a bin directory that holds `bun` and `deno`. */
export interface Workspace {
  readonly dir: string;
  /** The environment every step runs in. */
  readonly env: NodeJS.ProcessEnv;
  /** Removes the directory. */
  remove(): void;
}

/** Variables of this process that a reader's shell would not have. */
const DROPPED = /^(npm_|PNPM_|VITEST|NODE_ENV$|NODE_OPTIONS$|INIT_CWD$|TEST$|FORCE_COLOR$|UPSTASH_|REDIS_URL$|PORT$)/i;

/** Makes a workspace in the system temp directory (outside the repository). */
export function createWorkspace(tarballs: string, extra: Record<string, string> = {}): Workspace {
  const dir = mkdtempSync(join(tmpdir(), "sluice-quickstart-"));
  const bin = join(dir, "bin");
  mkdirSync(bin);
  for (const [name, path] of Object.entries(runtimeBinaries())) symlinkSync(path, join(bin, name));
  const path = [bin, ...(process.env.PATH ?? "").split(delimiter).filter((entry) => entry !== "" && !entry.includes("node_modules"))].join(delimiter);
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !DROPPED.test(name)));
  const env = {
    ...inherited,
    PATH: path,
    SLUICE_TARBALLS: tarballs,
    npm_config_prefer_offline: "true",
    NO_COLOR: "1",
    NEXT_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
    ...extra,
  } as unknown as NodeJS.ProcessEnv;
  return { dir, env, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A workspace for the test file (made before its tests, removed after them) with the tarballs the
 * global setup packed; call it at the top of the file and read the workspace inside the tests.
 */
export function useWorkspace(): () => Workspace {
  let workspace: Workspace | undefined;
  beforeAll(() => {
    workspace = createWorkspace(inject("sluiceTarballs"));
  });
  afterAll(() => workspace?.remove());
  return () => {
    if (workspace === undefined) throw new Error("[sluice] useWorkspace(): read the workspace inside a test or hook");
    return workspace;
  };
}

/** What a finished process printed (stdout and stderr interleaved) and how it ended. */
export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

/** Every process started here, killed with its group if the test process exits first. */
const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) if (child.pid !== undefined) killGroup(child.pid, "SIGKILL");
});

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Spawns `bash -c <script>` in its own process group, collecting its output. */
function spawnShell(script: string, cwd: string, env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string; exited: Promise<Finished> } {
  const child = spawn("bash", ["-euo", "pipefail", "-c", script], { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-50_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<Finished>((resolvePromise) => {
    child.once("error", (error) => {
      output += `\n${error.message}`;
    });
    child.once("close", (code, signal) => {
      live.delete(child);
      resolvePromise({ code, signal, output });
    });
  });
  return { child, output: () => output, exited };
}

/** Runs a script to its end (killed after `timeoutMs`). */
export async function runToEnd(script: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Finished> {
  const run = spawnShell(script, cwd, env);
  const timer = setTimeout(() => {
    if (run.child.pid !== undefined) killGroup(run.child.pid, "SIGKILL");
  }, timeoutMs);
  const finished = await run.exited;
  clearTimeout(timer);
  if (finished.signal === "SIGKILL") return { ...finished, output: `${finished.output}\n[killed after ${timeoutMs} ms]` };
  return finished;
}

/**
 * Makes the project of `ids` (a quick start, or a base and the quick start that extends it) in a
 * new directory of the workspace: each one's install.sh in turn, then its files.
 */
export async function createProject(workspace: Workspace, name: string, ids: readonly QuickStartId[], timeoutMs = 180_000): Promise<string> {
  const project = join(workspace.dir, name);
  mkdirSync(project);
  for (const id of ids) await addQuickStart(workspace, project, id, timeoutMs);
  return project;
}

/** Runs a quick start's install.sh in `project` and copies its files there. */
export async function addQuickStart(workspace: Workspace, project: string, id: QuickStartId, timeoutMs = 180_000): Promise<void> {
  const quickStart = loadQuickStart(id);
  const installed = await runToEnd(quickStart.install, project, workspace.env, timeoutMs);
  if (installed.code !== 0) throw new Error(`[sluice] quick start ${id}: install.sh exited with ${installed.code ?? installed.signal}:\n${installed.output}`);
  for (const file of quickStart.files) {
    mkdirSync(dirname(join(project, file)), { recursive: true });
    cpSync(join(quickStart.dir, file), join(project, file));
  }
}

/** Runs run.sh's command to its end, e.g. a script that must exit by itself. */
export function runCommand(project: string, id: QuickStartId, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<Finished> {
  return runToEnd(`exec ${loadQuickStart(id).run}`, project, env, timeoutMs);
}

/** A server started by run.sh. */
export interface Server {
  /** Everything printed so far. */
  output(): string;
  /** SIGTERM to its process group (SIGKILL after 10 s); resolves once every process of it is gone. */
  stop(): Promise<Finished>;
}

/** Processes still in process group `pgid`. */
function groupMembers(pgid: number): string[] {
  const out = execFileSync("ps", ["-eo", "pid=,pgid=,comm="], { encoding: "utf8" });
  return out
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 3 && Number(fields[1]) === pgid)
    .map((fields) => `${fields[0]} ${fields.slice(2).join(" ")}`);
}

/**
 * Starts run.sh's command (plus `extraArgs`) and resolves once `ready(output)` returns a base URL
 * (and, with `readyPath`, that path answers with any status) — or rejects with the output after
 * `timeoutMs`.
 */
export async function startServer(
  project: string,
  id: QuickStartId,
  env: NodeJS.ProcessEnv,
  options: { ready: (output: string) => string | undefined; readyPath?: string; extraArgs?: readonly string[]; timeoutMs?: number },
): Promise<Server & { base: string }> {
  const command = [loadQuickStart(id).run, ...(options.extraArgs ?? [])].join(" ");
  const run = spawnShell(`exec ${command}`, project, env);
  let finished: Finished | undefined;
  void run.exited.then((result) => {
    finished = result;
  });
  const pgid = run.child.pid as number;
  const stop = async (): Promise<Finished> => {
    if (finished === undefined) {
      killGroup(pgid, "SIGTERM");
      const timer = setTimeout(() => killGroup(pgid, "SIGKILL"), 10_000);
      await run.exited;
      clearTimeout(timer);
    }
    // the group's other members (workerd, a Next.js worker) may outlive the leader by a moment
    const deadline = Date.now() + 10_000;
    while (groupMembers(pgid).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const left = groupMembers(pgid);
    if (left.length > 0) {
      killGroup(pgid, "SIGKILL");
      throw new Error(`[sluice] quick start ${id}: processes outlived ${command}: ${left.join(", ")}`);
    }
    return (await run.exited) as Finished;
  };
  const deadline = Date.now() + (options.timeoutMs ?? 90_000);
  for (;;) {
    if (finished !== undefined) throw new Error(`[sluice] quick start ${id}: \`${command}\` exited with ${finished.code ?? finished.signal} before serving:\n${finished.output}`);
    const base = options.ready(run.output());
    if (base !== undefined) {
      if (options.readyPath === undefined) return { base, output: run.output, stop };
      try {
        await fetch(`${base}${options.readyPath}`, { signal: AbortSignal.timeout(30_000) });
        return { base, output: run.output, stop };
      } catch {
        // not answering yet
      }
    }
    if (Date.now() > deadline) {
      await stop().catch(() => undefined);
      throw new Error(`[sluice] quick start ${id}: \`${command}\` did not serve within ${options.timeoutMs ?? 90_000} ms:\n${run.output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A response as the tests see it: status, headers (lower-case names), body text. */
export interface Seen {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** `count` GETs of `url`, one after another. */
export async function requests(url: string, count: number, headers: Record<string, string> = {}): Promise<Seen[]> {
  const seen: Seen[] = [];
  for (let i = 0; i < count; i++) {
    const response = await fetch(url, { headers });
    seen.push({ status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() });
  }
  return seen;
}

/** The problem+json body of a 429, parsed, with the fields every 429 has checked. */
export function problemOf(seen: Seen): { detail: string; retryAfter: number; "violated-policies": string[] } {
  if (seen.status !== 429) throw new Error(`expected a 429, got ${seen.status}: ${seen.body}`);
  if (seen.headers["content-type"] !== "application/problem+json") throw new Error(`a 429 with content-type ${seen.headers["content-type"]}`);
  const body = JSON.parse(seen.body) as { type: string; status: number; detail: string; retryAfter: number; "violated-policies": string[] };
  if (body.type !== "https://iana.org/assignments/http-problem-types#quota-exceeded" || body.status !== 429) throw new Error(`not the problem+json 429: ${seen.body}`);
  return body;
}

/** The pnpm that runs this test (`pnpm test`, `pnpm vitest …`), else the one on PATH, as a shell word list. */
function pnpmWords(): string {
  const execPath = process.env.npm_execpath;
  if (execPath !== undefined && /pnpm(\.c?js)?$/.test(execPath)) {
    return execPath.endsWith("js") ? `"${process.execPath}" "${execPath}"` : `"${execPath}"`;
  }
  return "pnpm";
}

/** A running `pnpm upstash:local`. */
export interface UpstashLocalRun {
  /** The lines it printed for a `.env` file, as printed (from its first comment to its last). */
  readonly envLines: readonly string[];
  /** Those lines' variables. */
  readonly vars: Readonly<Record<string, string>>;
  /** Sends `signal` to its process group (as Ctrl-C does with SIGINT) and waits for it to end. */
  stop(signal?: NodeJS.Signals): Promise<Finished>;
}

/**
 * `pnpm upstash:local <args>` in the repository root, as a reader starts it in a terminal of its
 * own; resolves once it has printed its variables.
 */
export async function startUpstashLocalCommand(args: readonly string[] = [], timeoutMs = 30_000): Promise<UpstashLocalRun> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !DROPPED.test(name))) as NodeJS.ProcessEnv;
  const run = spawnShell(`exec ${pnpmWords()} upstash:local ${args.join(" ")}`, ROOT_DIR, env);
  const pgid = run.child.pid as number;
  let finished: Finished | undefined;
  void run.exited.then((result) => {
    finished = result;
  });
  const stop = async (signal: NodeJS.Signals = "SIGINT") => {
    if (finished === undefined) killGroup(pgid, signal);
    const timer = setTimeout(() => killGroup(pgid, "SIGKILL"), 10_000);
    const result = await run.exited;
    clearTimeout(timer);
    return result;
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = run.output().split("\n");
    const first = lines.findIndex((line) => line.startsWith("# Upstash REST endpoint"));
    const last = lines.findIndex((line, i) => i > first && line.startsWith("# Ctrl-C"));
    if (first >= 0 && last > first) {
      const envLines = lines.slice(first, last + 1);
      const vars = Object.fromEntries(envLines.filter((line) => !line.startsWith("#")).map((line) => line.split(/=(.*)/s, 2) as [string, string]));
      return { envLines, vars, stop };
    }
    if (finished !== undefined || Date.now() > deadline) {
      await stop("SIGKILL");
      throw new Error(`[sluice] \`pnpm upstash:local\` printed no variables${finished === undefined ? ` within ${timeoutMs} ms` : ` (exited with ${finished.code})`}:\n${run.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The keys a Redis holds, sorted: where a quick start's counts went. */
export async function keysOf(url: string): Promise<string[]> {
  const client = createClient({ url, RESP: 2 });
  await client.connect();
  try {
    return (await client.keys("*")).sort();
  } finally {
    await client.close();
  }
}
