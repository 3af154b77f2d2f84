/**
 * An Upstash-REST-compatible HTTP server in front of a real (local) redis-server, so that
 * `@upstash/redis` can be tested over real HTTP without the Upstash service. It is a pass-through:
 * every command goes to Redis as sent (each argument `String()`-ed) through one node-redis
 * connection with `RESP: 2`, and the raw RESP2 reply comes back in the shapes `@upstash/redis`
 * 1.39.0 parses:
 *
 * - `POST /` with `["cmd", ...args]` → `200 {"result": reply}`, or `400 {"error": "<redis error>"}`
 *   (the Redis message unchanged, e.g. `NOSCRIPT No matching script. Please use EVAL.`).
 * - `POST /pipeline` with `[[...], ...]` → `200 [{"result": ...} | {"error": "..."}, ...]`: the
 *   commands are pipelined on the connection (not atomic), each item succeeds or fails alone.
 * - `POST /multi-exec` → the same array shape from one `MULTI … EXEC`: an item that fails at run
 *   time (`WRONGTYPE`, say) is an `{"error"}` item while the others keep their effects (Redis
 *   semantics). A command refused while queueing (unknown command, wrong arity) aborts the whole
 *   transaction like Redis does: `400 {"error": "EXECABORT Transaction discarded because of
 *   previous errors: <first error>"}` and nothing is applied.
 * - `Authorization: Bearer <token>` on every path, else `401 {"error": "Unauthorized: …"}`.
 * - `Upstash-Encoding: base64` → every string of a result is base64 (UTF-8 bytes), recursively in
 *   arrays; integers and `null` stay JSON numbers/null; a top-level `"OK"` stays `"OK"` (the
 *   documented Upstash exception, which the client special-cases too). Errors are never encoded.
 * - Redis unreachable (stopped, restarting) → `503 {"error": "…"}` at once (no offline queue), so a
 *   store sees a failure rather than a hang; once Redis is back the bridge reconnects by itself.
 *   A paused (SIGSTOP) Redis is a hang: the HTTP request waits like a real client would.
 *
 * Scripts: Upstash accepts the shebang flag `allow-key-locking` (`#!lua flags=allow-key-locking`,
 * which `@upstash/ratelimit` 2.2 writes), redis-server refuses it. The bridge drops that flag from
 * a script sent with `EVAL`/`EVAL_RO`/`SCRIPT LOAD` and answers, and accepts, the SHA-1 of the
 * script as the client sent it (`EVALSHA` of it runs the rewritten script; `SCRIPT LOAD` answers
 * it), so a client's script cache works unchanged. Every other script passes as sent.
 *
 * Hostile mode (`scriptReply`): script calls are answered with a result the test chose, as JSON
 * text, so that `@upstash/redis` parses a misbehaving server's reply for real.
 *
 * Commands that would change the state of the shared connection (`MULTI`, `EXEC`, `WATCH`,
 * `SUBSCRIBE`, `SELECT`, `CLIENT REPLY`, …) are refused with a 400 error, as the Upstash REST API
 * refuses them. Blocking commands (`BLPOP`, …) work but block the bridge's single connection.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ErrorReply, MultiErrorReply, createClient } from "redis";

/** Options of {@link startUpstashBridge}. */
export interface UpstashBridgeOptions {
  /** The Redis to forward to, e.g. `redis://127.0.0.1:6390` (a server the test started). */
  redisUrl: string;
  /**
   * The bearer token clients must send.
   * @default a random token
   */
  token?: string;
  /**
   * The HTTP port on 127.0.0.1.
   * @default a free port picked by the operating system
   */
  port?: number;
  /**
   * A hostile server, for tests of what a store makes of a reply: every script call (`EVAL`,
   * `EVALSHA` and their `_RO` forms) is answered with what this returns instead of Redis's reply —
   * `{ result }`, the JSON text of the result as sent (numbers of any size, strings already in
   * base64 when `base64` is true), or `{ error }`, a failed command. Other commands go to Redis.
   */
  scriptReply?: (command: readonly string[], base64: boolean) => { result: string } | { error: string };
}

/** HTTP requests served by a bridge, counted since start or the last `resetCounts()`. */
export interface UpstashBridgeCounts {
  /** Every HTTP request received, whatever its path or outcome (401s included). */
  total: number;
  /** Requests per URL path: `"/"` (single commands), `"/pipeline"`, `"/multi-exec"`, others. */
  byPath: Record<string, number>;
  /** Redis commands forwarded (a pipeline of 10 counts 10). */
  commands: number;
  /** Authorized requests that asked for base64 results (`Upstash-Encoding: base64`). */
  base64: number;
}

/** A running bridge. */
export interface UpstashBridge {
  /** `http://127.0.0.1:<port>`: pass as `url` to `new Redis({ url, token })`. */
  readonly url: string;
  /** The bearer token to pass as `token`. */
  readonly token: string;
  readonly port: number;
  /** A snapshot of the counters (a fresh object on every read). */
  readonly counts: UpstashBridgeCounts;
  /** Zeroes the counters. */
  resetCounts(): void;
  /**
   * Resolves once the bridge's Redis connection is up: after the redis-server was stopped and
   * started again, await this before expecting commands to pass (the bridge reconnects by itself
   * within ~250 ms). Rejects after `timeoutMs`.
   */
  redisReady(timeoutMs?: number): Promise<void>;
  /** Closes every HTTP connection and the Redis connection. Idempotent. */
  close(): Promise<void>;
}

type Arg = string | number | boolean;

const SCRIPT_CALLS = new Set(["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO"]);

/**
 * A result whose JSON text is given as it is (a hostile reply: see `scriptReply`), written into the
 * response body in place of the placeholder string that stands for it.
 */
class RawResult {
  constructor(readonly text: string) {}
}
type Command = string[];
type Item = { result: unknown } | { error: string };

const HOST = "127.0.0.1";
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Commands that would alter the shared connection's state; the Upstash REST API refuses them too. */
const CONNECTION_STATE_COMMANDS = new Set([
  "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH",
  "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
  "MONITOR", "SYNC", "PSYNC", "QUIT", "RESET", "SELECT", "HELLO", "AUTH",
]);

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** An error that Redis itself replied (as opposed to a connection failure). */
class RefusedCommand extends Error {}

function isArg(value: unknown): value is Arg {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

function toCommand(value: unknown, what: string): Command {
  if (!Array.isArray(value) || value.length === 0 || !value.every(isArg)) {
    throw new HttpError(400, `ERR ${what} must be a non-empty JSON array of strings, numbers or booleans`);
  }
  return value.map((arg) => String(arg));
}

function toCommands(value: unknown): Command[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, "ERR the body must be a non-empty JSON array of commands");
  }
  return value.map((command, i) => toCommand(command, `command ${i + 1}`));
}

const UPSTASH_ONLY_FLAG = /^(#!lua[^\n]*?flags=)([^\s\n]*)/;

function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

/** The script without Upstash's `allow-key-locking` shebang flag, or undefined if it has none. */
function withoutUpstashFlags(script: string): string | undefined {
  const match = UPSTASH_ONLY_FLAG.exec(script);
  if (match === null) return undefined;
  const flags = (match[2] as string).split(",").filter((flag) => flag !== "allow-key-locking");
  if (flags.length === (match[2] as string).split(",").length) return undefined;
  const shebang = flags.length === 0 ? "#!lua" : `${match[1] as string}${flags.join(",")}`;
  return shebang + script.slice(match[0].length);
}

/**
 * Rewrites scripts that carry Upstash-only shebang flags (see the module notes): returns the
 * command to send and how to map its reply back. `shas` maps a client's SHA-1 to the rewritten
 * script's.
 */
function translateScripts(command: Command, shas: Map<string, string>): { command: Command; reply?: (value: unknown) => unknown } {
  const name = command[0]!.toUpperCase();
  if ((name === "EVAL" || name === "EVAL_RO") && command[1] !== undefined) {
    const rewritten = withoutUpstashFlags(command[1]);
    if (rewritten === undefined) return { command };
    shas.set(sha1(command[1]), sha1(rewritten));
    return { command: [command[0]!, rewritten, ...command.slice(2)] };
  }
  if ((name === "EVALSHA" || name === "EVALSHA_RO") && command[1] !== undefined) {
    const mapped = shas.get(command[1].toLowerCase());
    return mapped === undefined ? { command } : { command: [command[0]!, mapped, ...command.slice(2)] };
  }
  if (name === "SCRIPT" && command[1]?.toUpperCase() === "LOAD" && command[2] !== undefined) {
    const rewritten = withoutUpstashFlags(command[2]);
    if (rewritten === undefined) return { command };
    const original = sha1(command[2]);
    shas.set(original, sha1(rewritten));
    return { command: [command[0]!, command[1]!, rewritten], reply: () => original };
  }
  return { command };
}

/** Why the bridge refuses a command, or undefined if it forwards it. */
function refusal(command: Command): string | undefined {
  const name = command[0]!.toUpperCase();
  const sub = command[1]?.toUpperCase();
  if (CONNECTION_STATE_COMMANDS.has(name) || (name === "CLIENT" && sub === "REPLY")) {
    return `ERR '${command.slice(0, name === "CLIENT" ? 2 : 1).join(" ")}' is not supported over the REST API`;
  }
  return undefined;
}

function encodeValue(value: unknown, base64: boolean, top: boolean): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "number") return value;
  if (typeof value === "string") {
    if (!base64 || (top && value === "OK")) return value;
    return Buffer.from(value, "utf8").toString("base64");
  }
  if (Buffer.isBuffer(value)) return base64 ? value.toString("base64") : value.toString("utf8");
  if (Array.isArray(value)) return value.map((item) => encodeValue(item, base64, false));
  // A nested error reply (e.g. inside a Lua table) has no JSON form in the protocol: its message.
  if (value instanceof Error) return encodeValue(value.message, base64, false);
  return encodeValue(String(value), base64, top);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, "ERR request body too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  // raw results (hostile replies) go in as their text, in place of a placeholder
  const raws: string[] = [];
  const json = JSON.stringify(body, (_key, value: unknown) => (value instanceof RawResult ? `\u0000raw${raws.push(value.text) - 1}` : value)).replace(
    /"\\u0000raw(\d+)"/g,
    (_match, i: string) => raws[Number(i)] as string,
  );
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(json),
  });
  res.end(json);
}

type RedisConnection = ReturnType<typeof createClient>;

/**
 * One node-redis connection to `redisUrl` with no offline queue (a command while Redis is down
 * fails at once, a 503) that reconnects by itself; `lastError()` is its latest connection error.
 */
async function connectRedis(redisUrl: string): Promise<{ redis: RedisConnection; lastError: () => Error | undefined }> {
  const redis = createClient({
    url: redisUrl,
    RESP: 2,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: (retries: number) => Math.min(25 * (retries + 1), 250) },
  });
  let lastError: Error | undefined;
  redis.on("error", (error: Error) => {
    lastError = error;
  });
  try {
    await redis.connect();
  } catch (error) {
    redis.destroy();
    throw new Error(`[sluice] [testing] the Upstash bridge could not connect to ${redisUrl}`, { cause: error });
  }
  return { redis, lastError: () => lastError };
}

/** What the bridge does with the commands of one request: `POST /`, `/pipeline` and `/multi-exec`. */
interface Forwarder {
  single(command: Command, base64: boolean): Promise<unknown>;
  pipeline(commands: Command[], base64: boolean): Promise<Item[]>;
  multiExec(commands: Command[], base64: boolean): Promise<Item[]>;
}

/**
 * Forwards commands to `redis`, their scripts translated (see the module notes), or answers script
 * calls with `scriptReply`'s hostile results. A connection failure is a 503 (`unavailable`); an
 * error Redis replied is the command's own error.
 */
function forwarder(redis: RedisConnection, scriptReply: UpstashBridgeOptions["scriptReply"], lastRedisError: () => Error | undefined): Forwarder {
  /** Client script SHA-1 → the SHA-1 of the script as rewritten for redis-server. */
  const shas = new Map<string, string>();
  const unavailable = (error: unknown) => {
    const last = lastRedisError();
    return new HttpError(503, `ERR redis unavailable: ${error instanceof Error ? error.message : String(error)}` + (last !== undefined && last !== error ? ` (${last.message})` : ""));
  };
  /** A hostile answer to a script call (see `scriptReply`): the raw result, or a refused command. */
  const hostile = (command: Command, base64: boolean): RawResult | undefined => {
    if (scriptReply === undefined || !SCRIPT_CALLS.has(command[0]!.toUpperCase())) return undefined;
    const answer = scriptReply(command, base64);
    if ("error" in answer) throw new RefusedCommand(answer.error);
    return new RawResult(answer.result);
  };
  const sendTranslated = async (command: Command): Promise<unknown> => {
    const t = translateScripts(command, shas);
    const reply: unknown = await redis.sendCommand(t.command);
    return t.reply === undefined ? reply : t.reply(reply);
  };
  return {
    async single(command, base64) {
      const refused = refusal(command);
      if (refused !== undefined) throw new HttpError(400, refused);
      try {
        return { result: hostile(command, base64) ?? encodeValue(await sendTranslated(command), base64, true) };
      } catch (error) {
        if (error instanceof ErrorReply || error instanceof RefusedCommand) throw new HttpError(400, error.message);
        throw unavailable(error);
      }
    },
    async pipeline(commands, base64) {
      // All sent in the same tick: node-redis writes them back to back on the one connection.
      const settled = await Promise.allSettled(
        commands.map(async (command) => {
          const refused = refusal(command);
          if (refused !== undefined) throw new RefusedCommand(refused);
          return hostile(command, base64) ?? sendTranslated(command);
        }),
      );
      return settled.map((outcome): Item => {
        if (outcome.status === "fulfilled") return { result: outcome.value instanceof RawResult ? outcome.value : encodeValue(outcome.value, base64, true) };
        const reason: unknown = outcome.reason;
        if (reason instanceof ErrorReply || reason instanceof RefusedCommand) return { error: reason.message };
        throw unavailable(reason);
      });
    },
    async multiExec(commands, base64) {
      for (const command of commands) {
        const refused = refusal(command);
        if (refused !== undefined) throw new HttpError(400, `EXECABORT Transaction discarded because of previous errors: ${refused}`);
      }
      const multi = redis.multi();
      for (const command of commands) multi.addCommand(translateScripts(command, shas).command);
      let replies: unknown[];
      try {
        replies = await multi.exec();
      } catch (error) {
        // Run-time errors: EXEC ran every command; the failed ones are ErrorReply items.
        if (error instanceof MultiErrorReply) {
          return error.replies.map((reply: unknown): Item => (reply instanceof ErrorReply ? { error: reply.message } : { result: encodeValue(reply, base64, true) }));
        }
        // Refused while queueing: Redis discards the whole transaction (EXECABORT).
        if (error instanceof ErrorReply) throw new HttpError(400, `EXECABORT Transaction discarded because of previous errors: ${error.message}`);
        throw unavailable(error);
      }
      return replies.map((reply): Item => ({ result: encodeValue(reply, base64, true) }));
    },
  };
}

/** The first error of a request, before its commands are read: a bad token, path or method. */
function requestProblem(req: IncomingMessage, path: string, token: string): HttpError | undefined {
  if (req.headers.authorization !== `Bearer ${token}`) return new HttpError(401, "Unauthorized: missing or invalid bearer token");
  if (path !== "/" && path !== "/pipeline" && path !== "/multi-exec") return new HttpError(404, `ERR no such endpoint: ${req.method ?? "?"} ${path}`);
  if (req.method !== "POST") return new HttpError(405, `ERR method ${req.method ?? "?"} not allowed: send the command as a POST body`);
  return undefined;
}

/**
 * The bridge's HTTP handler: checks the request, counts it in `counts()` (the counters of the
 * moment: `resetCounts` replaces them), and answers with `forward`'s reply.
 */
function bridgeHandler(token: string, counts: () => UpstashBridgeCounts, forward: Forwarder) {
  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://bridge").pathname;
    counts().total += 1;
    counts().byPath[path] = (counts().byPath[path] ?? 0) + 1;
    try {
      const problem = requestProblem(req, path, token);
      if (problem !== undefined) {
        req.resume();
        throw problem;
      }
      const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
      if (base64) counts().base64 += 1;
      const text = await readBody(req);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new HttpError(400, "ERR the body is not valid JSON");
      }
      if (path === "/") {
        const command = toCommand(body, "the body");
        counts().commands += 1;
        send(res, 200, await forward.single(command, base64));
        return;
      }
      const commands = toCommands(body);
      counts().commands += commands.length;
      send(res, 200, path === "/pipeline" ? await forward.pipeline(commands, base64) : await forward.multiExec(commands, base64));
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof HttpError) send(res, error.status, { error: error.message });
      else send(res, 500, { error: `ERR bridge failure: ${error instanceof Error ? error.message : String(error)}` });
    }
  };
}

/** Resolves once `redis` is ready (at once if it is); rejects after `timeoutMs`. */
function whenReady(redis: RedisConnection, timeoutMs: number): Promise<void> {
  if (redis.isReady) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      redis.off("ready", onReady);
      reject(new Error(`[sluice] [testing] the bridge's Redis connection was not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    redis.once("ready", onReady);
  });
}

/** Listens on `HOST:port` (0: a free port); resolves with the port. */
async function listen(server: Server, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, HOST, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/**
 * Starts the bridge on 127.0.0.1 and connects it to `redisUrl` (failing if Redis is not there).
 *
 * @example
 * ```ts
 * const server = await startRedisServer();
 * const bridge = await startUpstashBridge({ redisUrl: server.url });
 * const redis = new Redis({ url: bridge.url, token: bridge.token, retry: false });
 * await redis.set("k", "v");
 * expect(bridge.counts.byPath["/pipeline"]).toBe(1); // auto-pipelining is on by default
 * await bridge.close();
 * await server.stop();
 * ```
 */
export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  const token = options.token ?? randomBytes(18).toString("base64url");
  if (token === "" || /\s/.test(token)) {
    throw new Error("[sluice] [testing] option token must be a non-empty string without whitespace");
  }
  const { redis, lastError } = await connectRedis(options.redisUrl);
  let counts: UpstashBridgeCounts = { total: 0, byPath: {}, commands: 0, base64: 0 };
  const handle = bridgeHandler(token, () => counts, forwarder(redis, options.scriptReply, lastError));
  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });
  // Longer than undici's default keep-alive, so the client never reuses a socket we just closed.
  server.keepAliveTimeout = 30_000;
  let port: number;
  try {
    port = await listen(server, options.port ?? 0);
  } catch (error) {
    redis.destroy();
    throw error;
  }
  let closed: Promise<void> | undefined;

  return {
    url: `http://${HOST}:${port}`,
    token,
    port,
    get counts(): UpstashBridgeCounts {
      return { ...counts, byPath: { ...counts.byPath } };
    },
    resetCounts() {
      counts = { total: 0, byPath: {}, commands: 0, base64: 0 };
    },
    redisReady: (timeoutMs = 5_000) => whenReady(redis, timeoutMs),
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => {
        redis.destroy();
      });
      return closed;
    },
  };
}
