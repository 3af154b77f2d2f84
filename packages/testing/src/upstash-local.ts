/**
 * `pnpm upstash:local`: an Upstash Redis REST endpoint on this machine, for developing against
 * `@upstash/redis` and `UpstashStore` without an Upstash account. It starts a private
 * `redis-server` on a free port (no persistence; or uses `--redis <url>`), puts the Upstash-REST
 * bridge of this package in front of it (see `upstash-bridge.ts` for what it implements), prints
 * the variables `Redis.fromEnv()` reads, and runs until stopped:
 *
 * ```sh
 * $ pnpm upstash:local
 * # Upstash REST endpoint for Redis.fromEnv() (@upstash/redis), in front of redis://127.0.0.1:41231
 * UPSTASH_REDIS_REST_URL=http://127.0.0.1:38297
 * UPSTASH_REDIS_REST_TOKEN=0Ptq1Xr1sX2rjkv1lQ2WzJqQ
 * REDIS_URL=redis://127.0.0.1:41231
 * # Ctrl-C stops it (and the redis-server it started)
 * ```
 *
 * The lines are a valid `.env` file (`node --env-file=.env`, `tsx --env-file=.env`, Next.js's
 * `.env.local`). Options: `--redis <url>` (an existing Redis: it is left running on exit),
 * `--port <port>` (the HTTP port; default a free one), `--token <token>` (default a random one).
 * SIGINT (Ctrl-C) and SIGTERM close the bridge and stop the redis-server it started, then exit 0.
 *
 * It is a development stand-in, not Upstash: one connection, no TLS, 127.0.0.1 only.
 *
 * @module
 */
import { pathToFileURL } from "node:url";
import { type RedisServer, startRedisServer } from "./redis-server.js";
import { type UpstashBridge, startUpstashBridge } from "./upstash-bridge.js";

/** Options of {@link startUpstashLocal}, as parsed from the command line. */
export interface UpstashLocalOptions {
  /** An existing Redis (`redis://host:port`); default: a private redis-server started here. */
  redisUrl?: string;
  /** The bridge's HTTP port on 127.0.0.1; default: a free port. */
  port?: number;
  /** The bearer token; default: a random one. */
  token?: string;
}

/** A running endpoint. */
export interface UpstashLocal {
  /** The lines to print: a `.env` file (comments, `UPSTASH_REDIS_REST_URL`, `UPSTASH_REDIS_REST_TOKEN`, `REDIS_URL`). */
  readonly envLines: readonly string[];
  readonly bridge: UpstashBridge;
  /** The redis-server started here; undefined with `redisUrl`. */
  readonly server: RedisServer | undefined;
  /** Closes the bridge and stops the redis-server it started. Idempotent. */
  stop(): Promise<void>;
}

const USAGE = "usage: pnpm upstash:local [--redis <redis://host:port>] [--port <port>] [--token <token>]";

/** Parses the command line; throws an error with the usage on anything unknown. */
export function parseUpstashLocalArgs(argv: readonly string[]): UpstashLocalOptions {
  const options: UpstashLocalOptions = {};
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = (argv[i] as string).split(/=(.*)/s, 2) as [string, string | undefined];
    const value = inline ?? argv[++i];
    if (value === undefined || value === "") throw new Error(`[sluice] ${flag} needs a value\n${USAGE}`);
    if (flag === "--redis") {
      if (!/^rediss?:\/\//.test(value)) throw new Error(`[sluice] --redis must be a redis:// URL, got ${JSON.stringify(value)}\n${USAGE}`);
      options.redisUrl = value;
    } else if (flag === "--port") {
      const port = Number(value);
      if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`[sluice] --port must be an integer in 1..65535, got ${JSON.stringify(value)}\n${USAGE}`);
      options.port = port;
    } else if (flag === "--token") {
      options.token = value;
    } else {
      throw new Error(`[sluice] unknown option ${JSON.stringify(flag)}\n${USAGE}`);
    }
  }
  return options;
}

/**
 * Starts the endpoint (and, without `redisUrl`, its redis-server).
 *
 * @example
 * ```ts
 * const local = await startUpstashLocal();
 * process.env.UPSTASH_REDIS_REST_URL = local.bridge.url;
 * process.env.UPSTASH_REDIS_REST_TOKEN = local.bridge.token;
 * const limiter = new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits: fixedWindow({ limit: 3, window: "1m" }) });
 * await local.stop();
 * ```
 */
export async function startUpstashLocal(options: UpstashLocalOptions = {}): Promise<UpstashLocal> {
  const server = options.redisUrl === undefined ? await startRedisServer() : undefined;
  const redisUrl = options.redisUrl ?? (server as RedisServer).url;
  let bridge: UpstashBridge;
  try {
    bridge = await startUpstashBridge({ redisUrl, port: options.port, token: options.token });
  } catch (error) {
    await server?.stop();
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    envLines: [
      `# Upstash REST endpoint for Redis.fromEnv() (@upstash/redis), in front of ${redisUrl}`,
      `UPSTASH_REDIS_REST_URL=${bridge.url}`,
      `UPSTASH_REDIS_REST_TOKEN=${bridge.token}`,
      `REDIS_URL=${redisUrl}`,
      `# Ctrl-C stops it${server === undefined ? "" : " (and the redis-server it started)"}`,
    ],
    bridge,
    server,
    stop() {
      stopped ??= (async () => {
        await bridge.close();
        await server?.stop();
      })();
      return stopped;
    },
  };
}

async function main(): Promise<void> {
  let options: UpstashLocalOptions;
  try {
    options = parseUpstashLocalArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  const local = await startUpstashLocal(options);
  const stop = () => {
    void local.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`[sluice] stopping failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  process.stdout.write(`${local.envLines.join("\n")}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}` : String(error)}\n`);
    process.exitCode = 1;
  });
}
