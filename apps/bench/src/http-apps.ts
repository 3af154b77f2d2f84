/**
 * The Hono apps of the HTTP benchmark, one per contender. Every app serves `GET /` with
 * `c.text("ok")`; what differs is the middleware in front of it:
 *
 * | contender | middleware |
 * |---|---|
 * | bare app | none |
 * | no-op async middleware | `async (c, next) => { await next(); }` |
 * | no-op + 2 static headers | the no-op plus two `c.header()` calls with constant values: what writing two headers through Hono's `c.header()` costs (a Fetch `Headers` object per response; `@sluice/hono` sets its headers on Node's `ServerResponse` instead, see its README) |
 * | `@sluice/hono`, IETF headers | `rateLimiter({ limiter, key, headers: "ietf" })`, fixed window 1e9/min, memory store |
 * | `@sluice/hono`, IETF + legacy | the default headers `["ietf", "legacy"]` |
 * | `@sluice/hono`, headers off | `headers: false` |
 * | `@sluice/hono`, most denied | a fixed window of 100 per day (no window edge inside a run, where an hour's fell into one): after the first 100 requests every one is a 429 |
 * | hono-rate-limiter | `rateLimiter({ windowMs: 60_000, limit: 1e9, keyGenerator })`, its `MemoryStore`, its default headers (draft-6) |
 * | hono-rate-limiter, most denied | 100 per day, then 429s (in-app section only) |
 * | `@sluice/hono` + `RedisStore` | IETF headers, fixed window, `RedisStore` over ioredis on the bench's private redis-server |
 *
 * Every limiter keys requests by the `x-api-key` header (the load generator sends one key), with
 * the same key function, so they all do the same work to find the key.
 *
 * @module
 */
import { MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { rateLimiter } from "@sluice/hono";
import { RedisStore } from "@sluice/redis";
import { Hono, type Context, type MiddlewareHandler } from "hono";
import { rateLimiter as honoRateLimiter } from "hono-rate-limiter";
import IORedis from "ioredis";

export const BARE = "bare app";
export const NOOP = "no-op async middleware";
export const STATIC_HEADERS = "no-op + 2 static headers";
export const SLUICE_IETF = "@sluice/hono, IETF headers";
export const SLUICE_DEFAULT = "@sluice/hono, IETF + legacy headers";
export const SLUICE_OFF = "@sluice/hono, headers off";
export const SLUICE_DENIED = "@sluice/hono, most denied (429)";
export const HONO_RATE_LIMITER = "hono-rate-limiter";
export const SLUICE_REDIS = "@sluice/hono + RedisStore, IETF headers";
/**
 * hono-rate-limiter with a quota of 100 per day: after the first 100 requests every one is a 429.
 * Measured in process only (the in-app section), beside {@link SLUICE_DENIED}.
 */
export const HONO_RATE_LIMITER_DENIED = "hono-rate-limiter, most denied (429)";

/** Every HTTP contender, in table order. */
export const HTTP_CONTENDERS = [BARE, NOOP, STATIC_HEADERS, SLUICE_IETF, SLUICE_DEFAULT, SLUICE_OFF, SLUICE_DENIED, HONO_RATE_LIMITER, SLUICE_REDIS] as const;
export type HttpContender = (typeof HTTP_CONTENDERS)[number];

/** Contenders whose requests are denied (all but the first 100): they answer 429, not 200. */
export const DENYING: ReadonlySet<string> = new Set([SLUICE_DENIED]);
/** Contenders that need the private redis-server. */
export const NEEDS_REDIS: ReadonlySet<string> = new Set([SLUICE_REDIS]);

export interface HttpServerOptions {
  /** The private redis-server, for {@link SLUICE_REDIS}. */
  redisUrl?: string;
}

/** The quota of the allowed contenders: never reached in a run. */
const NEVER = 1_000_000_000;
/** The quota of {@link SLUICE_DENIED}: the first requests pass, then every one is a 429. */
const DENIED_QUOTA = 100;

const keyOf = (c: Context): string => c.req.header("x-api-key") ?? "anonymous";

function sluice(limiter: RateLimiter, headers: "ietf" | false | undefined): MiddlewareHandler {
  return headers === undefined ? rateLimiter({ limiter, key: keyOf }) : rateLimiter({ limiter, key: keyOf, headers });
}

/** Builds one contender's app; `close` releases what it holds (a Redis connection). */
export async function buildApp(name: string, options: HttpServerOptions = {}): Promise<{ app: Hono; close: () => Promise<void> }> {
  const app = new Hono();
  let close = async (): Promise<void> => {};
  const memoryLimiter = (limit: number) =>
    new RateLimiter({ store: new MemoryStore(), limits: fixedWindow({ limit, window: limit === NEVER ? "1m" : "1d" }) });
  switch (name) {
    case BARE:
      break;
    case NOOP:
      app.use(async (_c, next) => {
        await next();
      });
      break;
    case STATIC_HEADERS:
      app.use(async (c, next) => {
        c.header("RateLimit-Policy", '"1000000000-per-1m";q=1000000000;w=60');
        c.header("RateLimit", '"1000000000-per-1m";r=999999999;t=60');
        await next();
      });
      break;
    case SLUICE_IETF:
      app.use(sluice(memoryLimiter(NEVER), "ietf"));
      break;
    case SLUICE_DEFAULT:
      app.use(sluice(memoryLimiter(NEVER), undefined));
      break;
    case SLUICE_OFF:
      app.use(sluice(memoryLimiter(NEVER), false));
      break;
    case SLUICE_DENIED:
      app.use(sluice(memoryLimiter(DENIED_QUOTA), "ietf"));
      break;
    case HONO_RATE_LIMITER:
      app.use(honoRateLimiter({ windowMs: 60_000, limit: NEVER, keyGenerator: keyOf }));
      break;
    case HONO_RATE_LIMITER_DENIED:
      app.use(honoRateLimiter({ windowMs: 86_400_000, limit: DENIED_QUOTA, keyGenerator: keyOf }));
      break;
    case SLUICE_REDIS: {
      if (options.redisUrl === undefined) throw new Error(`${name} needs redisUrl`);
      const client = new IORedis(options.redisUrl, { enableAutoPipelining: false, lazyConnect: true });
      await client.connect();
      const limiter = new RateLimiter({
        store: new RedisStore(client),
        limits: fixedWindow({ limit: NEVER, window: "1m" }),
        prefix: "bench-http",
        onStoreError: "deny", // a store failure must not be measured as a fallback decision
      });
      app.use(sluice(limiter, "ietf"));
      close = async () => {
        client.disconnect();
      };
      break;
    }
    default:
      throw new Error(`unknown HTTP contender ${JSON.stringify(name)}; have ${HTTP_CONTENDERS.join(", ")}`);
  }
  app.get("/", (c) => c.text("ok"));
  return { app, close };
}
