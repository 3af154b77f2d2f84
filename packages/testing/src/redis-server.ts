/**
 * A private `redis-server` for tests: each call starts its own process on a free port of
 * 127.0.0.1, with no persistence (`--save '' --appendonly no`) and its own working directory, and
 * stops it again. It never talks to a Redis it did not start (and never flushes anything).
 *
 * The binary is `REDIS_SERVER_BIN` if set, else `redis-server` on `PATH`. When neither is there the
 * start fails with an error that says how to install it: the Redis tests fail loudly, they never
 * skip.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants as fsConstants, readFileSync, rmSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** The command that installs `redis-server` on Debian/Ubuntu; quoted in every "not found" error. */
export const REDIS_SERVER_INSTALL_HINT = "apt-get update && apt-get install -y redis-server";

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * The port to listen on (127.0.0.1 only).
   * @default a free port picked by the operating system
   */
  port?: number;
  /**
   * The `redis-server` binary: a path, or a name looked up on `PATH`.
   * @default process.env.REDIS_SERVER_BIN, else "redis-server" on PATH
   */
  bin?: string;
  /** Extra `redis-server` arguments, appended after the defaults (e.g. `["--maxmemory", "10mb"]`). */
  args?: readonly string[];
  /**
   * How long to wait for the first `PONG` before giving up.
   * @default 10_000
   */
  startTimeoutMs?: number;
}

/** A running (or stopped, restartable) private `redis-server`. */
export interface RedisServer {
  /** Always `"127.0.0.1"`. */
  readonly host: string;
  /** The TCP port; the same across {@link RedisServer.start} after {@link RedisServer.stop}. */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`, for ioredis / node-redis / the Upstash bridge. */
  readonly url: string;
  /** The process id while running, else `undefined`. */
  readonly pid: number | undefined;
  /** Whether the process is alive (a paused process is still running). */
  readonly running: boolean;
  /** Whether the process is stopped with SIGSTOP (see {@link RedisServer.pause}). */
  readonly paused: boolean;
  /**
   * Stops the server (SIGTERM; SIGKILL after 5 s) and waits for the process to exit; the port is
   * free afterwards. Idempotent.
   */
  stop(): Promise<void>;
  /**
   * Starts the server again on the same port, with an empty dataset and an empty script cache
   * (nothing is persisted), and waits until it answers PING. Throws if it is already running.
   */
  start(): Promise<void>;
  /** {@link RedisServer.stop} then {@link RedisServer.start}. */
  restart(): Promise<void>;
  /** Kills the process with SIGKILL (a crash: no shutdown sequence) and waits for it to exit. */
  kill(): Promise<void>;
  /**
   * Freezes the process with SIGSTOP and resolves once it is stopped: connections stay open but
   * nothing is answered, like a hung server. Commands sent meanwhile are answered after
   * {@link RedisServer.resume}.
   */
  pause(): Promise<void>;
  /** Thaws a paused process with SIGCONT and resolves once it runs again. */
  resume(): Promise<void>;
  /** The most recent output of the process (its log, at `warning` level), for error messages. */
  output(): string;
}

const HOST = "127.0.0.1";
const STOP_GRACE_MS = 5_000;
const OUTPUT_LIMIT = 8_192;
/** Port collisions (another process took the port between probe and bind) are retried this often. */
const PORT_ATTEMPTS = 5;

/** Every child this module started and has not seen exit: killed if the test process exits first. */
const liveChildren = new Set<ChildProcess>();
/** Every working directory not removed yet: removed if the test process exits first. */
const liveDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of liveChildren) {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
    for (const dir of liveDirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // best effort
      }
    }
    liveChildren.clear();
    liveDirs.clear();
  });
}

function notFound(what: string): Error {
  return new Error(
    `[sluice] [testing] redis-server not found (${what}). The Redis tests need a real redis-server ` +
      `binary: install it with \`${REDIS_SERVER_INSTALL_HINT}\` (Debian/Ubuntu; \`brew install redis\` ` +
      `on macOS), or set REDIS_SERVER_BIN to its path.`,
  );
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves the `redis-server` binary: `bin`, else `REDIS_SERVER_BIN`, else `redis-server` on
 * `PATH`. Throws an error naming the install command when it cannot be found.
 */
export function resolveRedisServerBin(bin?: string): string {
  const fromEnv = process.env.REDIS_SERVER_BIN;
  const requested = bin ?? (fromEnv !== undefined && fromEnv !== "" ? fromEnv : undefined);
  const name = requested ?? "redis-server";
  const source = bin !== undefined ? "option bin" : requested !== undefined ? "REDIS_SERVER_BIN" : "PATH";
  if (name.includes("/")) {
    if (isExecutableFile(name)) return name;
    throw notFound(`${source} is ${JSON.stringify(name)}, which is not an executable file`);
  }
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  throw notFound(`no ${JSON.stringify(name)} on PATH${source === "PATH" ? " and REDIS_SERVER_BIN is unset" : ` (from ${source})`}`);
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("[sluice] [testing] could not determine a free port"));
      });
    });
  });
}

/** Sends PING over a fresh connection; true iff the answer is `+PONG` within `timeoutMs`. */
export function pingRedis(port: number, timeoutMs = 500): Promise<boolean> {
  return ask(port, "PING", timeoutMs, (data) => (data.includes("\r\n") ? data.startsWith("+PONG\r\n") : undefined)).then(
    (answer) => answer === true,
  );
}

/**
 * The `process_id` reported by `INFO server` of whatever answers on the port, or undefined. Used
 * to be sure the server that answers is the one this module started (another process may have
 * taken the port between the probe and the bind).
 */
function serverProcessId(port: number, timeoutMs: number): Promise<number | undefined> {
  return ask(port, "INFO server", timeoutMs, (data) => {
    const header = /^\$(\d+)\r\n/.exec(data);
    if (header === null) return data.includes("\r\n") ? null : undefined; // an error reply (e.g. LOADING)
    const length = Number(header[1]);
    if (Buffer.byteLength(data, "utf8") < header[0].length + length + 2) return undefined;
    const match = /\r\nprocess_id:(\d+)\r\n/.exec(data);
    return match === null ? null : Number(match[1]);
  }).then((answer) => (typeof answer === "number" ? answer : undefined));
}

/**
 * Sends one inline command over a fresh connection and feeds the accumulated answer to `parse`
 * until it returns something other than `undefined`; resolves `undefined` on error or timeout.
 */
function ask<T>(port: number, command: string, timeoutMs: number, parse: (data: string) => T | undefined): Promise<T | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port });
    let data = "";
    let finished = false;
    const done = (answer: T | undefined) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.setEncoding("utf8");
    socket.once("connect", () => socket.write(`${command}\r\n`));
    socket.on("data", (chunk: string) => {
      data += chunk;
      const answer = parse(data);
      if (answer !== undefined) done(answer);
    });
    socket.once("error", () => done(undefined));
    socket.once("close", () => done(undefined));
  });
}

/** The scheduler state of a process from /proc (Linux), e.g. "T" when stopped; undefined elsewhere. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).charAt(0);
  } catch {
    return undefined;
  }
}

async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class AddressInUse extends Error {}

class RedisServerProcess implements RedisServer {
  readonly host = HOST;
  #port: number;
  readonly #portFixed: boolean;
  readonly #bin: string;
  readonly #extraArgs: readonly string[];
  readonly #startTimeoutMs: number;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #dir: string | undefined;
  #paused = false;
  #output = "";

  constructor(bin: string, port: number, portFixed: boolean, options: RedisServerOptions) {
    this.#bin = bin;
    this.#port = port;
    this.#portFixed = portFixed;
    this.#extraArgs = options.args ?? [];
    this.#startTimeoutMs = options.startTimeoutMs ?? 10_000;
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `redis://${HOST}:${this.#port}`;
  }

  get pid(): number | undefined {
    return this.running ? this.#child?.pid : undefined;
  }

  get running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  get paused(): boolean {
    return this.running && this.#paused;
  }

  output(): string {
    return this.#output;
  }

  async start(): Promise<void> {
    if (this.running) throw new Error(`[sluice] [testing] redis-server on port ${this.#port} is already running`);
    if (this.#dir !== undefined) {
      // left by a process that died on its own
      await removeDir(this.#dir);
      this.#dir = undefined;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#spawnAndWait();
        return;
      } catch (error) {
        if (!(error instanceof AddressInUse) || this.#portFixed || attempt >= PORT_ATTEMPTS) throw error;
        this.#port = await freePort();
      }
    }
  }

  async #spawnAndWait(): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), "sluice-redis-"));
    const args = [
      "--port", String(this.#port),
      "--bind", HOST,
      "--save", "",
      "--appendonly", "no",
      "--daemonize", "no",
      "--dir", dir,
      "--logfile", "",
      "--loglevel", "warning",
      ...this.#extraArgs,
    ];
    this.#output = "";
    this.#paused = false;
    const child = spawn(this.#bin, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    this.#dir = dir;
    installExitHook();
    liveChildren.add(child);
    liveDirs.add(dir);
    const append = (chunk: Buffer) => {
      this.#output = (this.#output + chunk.toString("utf8")).slice(-OUTPUT_LIMIT);
    };
    child.stdout?.on("data", append);
    child.stderr?.on("data", append);
    let spawnError: Error | undefined;
    this.#exited = new Promise<void>((resolve) => {
      child.once("error", (error) => {
        spawnError = error;
        // a child that failed to spawn emits "error" and maybe never "exit"
        if (child.pid === undefined) resolve();
      });
      // "close", not "exit": by then stdout/stderr are drained, so the output is complete.
      child.once("close", () => resolve());
    }).then(() => {
      liveChildren.delete(child);
    });
    const deadline = Date.now() + this.#startTimeoutMs;
    let exited = false;
    void this.#exited.then(() => {
      exited = true;
    });
    for (;;) {
      if (exited || spawnError !== undefined) {
        await this.#exited;
        await removeDir(dir);
        this.#dir = undefined;
        const code = (spawnError as NodeJS.ErrnoException | undefined)?.code;
        if (code === "ENOENT" || code === "EACCES") throw notFound(`${JSON.stringify(this.#bin)} could not be executed: ${code}`);
        const message =
          `[sluice] [testing] redis-server exited before answering PING on port ${this.#port}` +
          (spawnError !== undefined ? `: ${spawnError.message}` : "") +
          `\n${this.#output.trim()}`;
        if (/address already in use/i.test(this.#output)) throw new AddressInUse(message);
        throw new Error(message);
      }
      if ((await serverProcessId(this.#port, 250)) === child.pid) return;
      if (Date.now() > deadline) {
        await this.#terminate("SIGKILL");
        throw new Error(
          `[sluice] [testing] redis-server did not answer PING on port ${this.#port} within ` +
            `${this.#startTimeoutMs} ms\n${this.#output.trim()}`,
        );
      }
      await sleep(20);
    }
  }

  async #terminate(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    if (this.running) {
      if (this.#paused) child.kill("SIGCONT");
      child.kill(signal);
      if (signal !== "SIGKILL") {
        let timer: NodeJS.Timeout | undefined;
        const timedOut = await Promise.race([
          this.#exited.then(() => false),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), STOP_GRACE_MS);
          }),
        ]);
        clearTimeout(timer);
        if (timedOut && this.running) child.kill("SIGKILL");
      }
    }
    await this.#exited;
    this.#paused = false;
    if (this.#dir !== undefined) {
      await removeDir(this.#dir);
      this.#dir = undefined;
    }
  }

  stop(): Promise<void> {
    return this.#terminate("SIGTERM");
  }

  kill(): Promise<void> {
    return this.#terminate("SIGKILL");
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async pause(): Promise<void> {
    await this.#signalAndWait("SIGSTOP", (state) => state === "T");
    this.#paused = true;
  }

  async resume(): Promise<void> {
    await this.#signalAndWait("SIGCONT", (state) => state !== "T");
    this.#paused = false;
  }

  /** Sends the signal and waits (up to 2 s) until /proc shows its effect, where /proc exists. */
  async #signalAndWait(signal: NodeJS.Signals, reached: (state: string) => boolean): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running || child.pid === undefined) {
      throw new Error(`[sluice] [testing] redis-server on port ${this.#port} is not running`);
    }
    child.kill(signal);
    for (let i = 0; i < 200; i++) {
      const state = processState(child.pid);
      if (state === undefined || reached(state)) return;
      await sleep(10);
    }
    throw new Error(`[sluice] [testing] redis-server (pid ${child.pid}) did not react to ${signal}`);
  }
}

/**
 * Starts a private `redis-server` on 127.0.0.1 and resolves once it answers PING. Stop it with
 * `stop()` (an `afterAll` is the usual place); if the test process exits first, the server is
 * killed by an `exit` hook.
 *
 * @example
 * ```ts
 * let server: RedisServer;
 * beforeAll(async () => { server = await startRedisServer(); });
 * afterAll(() => server.stop());
 * test("…", async () => {
 *   const client = await createClient({ url: server.url }).connect();
 *   // …
 * });
 * ```
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const bin = resolveRedisServerBin(options.bin);
  const portFixed = options.port !== undefined;
  if (portFixed && !(Number.isInteger(options.port) && options.port! > 0 && options.port! < 65_536)) {
    throw new Error(`[sluice] [testing] option port must be an integer in 1..65535, got ${String(options.port)}`);
  }
  const server = new RedisServerProcess(bin, options.port ?? (await freePort()), portFixed, options);
  await server.start();
  return server;
}
