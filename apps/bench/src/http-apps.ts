/**
 * The Hono apps of the HTTP benchmark, one per contender. Every app serves `GET /` with
 * `c.text("ok")`; what differs is the middleware in front of it:
 *
 * | contender | middleware |
 * |---|---|
 * | bare app | none |
 * | no-op async middleware | `async (c, next) => { await next(); }` |
 * | no-op + the 5 default headers, static | the no-op plus five `c.header()` calls with constant values, the fields and values `@sluice/hono` writes by default: what writing them through Hono's `c.header()` costs (a Fetch `Headers` object per response, converted again by `@hono/node-server`), the least any middleware that writes them there can cost |
 * | `@sluice/hono`, IETF headers | `rateLimiter({ limiter, key, headers: "ietf" })`, fixed window 1e9/min, memory store |
 * | `@sluice/hono`, IETF + legacy | the default headers `["ietf", "legacy"]` |
 * | `@sluice/hono`, headers off | `headers: false` |
 * | `@sluice/hono`, most denied | a fixed window of 100 per day (no window edge inside a run, where an hour's fell into one): after the first 100 requests every one is a 429 |
 * | hono-rate-limiter | `rateLimiter({ windowMs: 60_000, limit: 1e9, keyGenerator })`, its `MemoryStore`, its default headers (draft-6), as its users configure it |
 * | hono-rate-limiter, IETF + legacy headers | the same with `standardHeaders: false`, wrapped to write `@sluice/hono`'s default header set from `c.get("rateLimit")` through `c.header()` (what a user who wants those headers writes): both limiters then send the same fields |
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
export const STATIC_HEADERS = "no-op + the 5 default headers, static";
export const SLUICE_IETF = "@sluice/hono, IETF headers";
export const SLUICE_DEFAULT = "@sluice/hono, IETF + legacy headers";
export const SLUICE_OFF = "@sluice/hono, headers off";
export const SLUICE_DENIED = "@sluice/hono, most denied (429)";
export const HONO_RATE_LIMITER = "hono-rate-limiter";
/** hono-rate-limiter writing the header set of {@link SLUICE_DEFAULT} (see {@link withDefaultHeaders}). */
export const HONO_RATE_LIMITER_SAME = "hono-rate-limiter, IETF + legacy headers";
export const SLUICE_REDIS = "@sluice/hono + RedisStore, IETF headers";
/**
 * hono-rate-limiter with a quota of 100 per day: after the first 100 requests every one is a 429.
 * Measured in process only (the in-app section), beside {@link SLUICE_DENIED}.
 */
export const HONO_RATE_LIMITER_DENIED = "hono-rate-limiter, most denied (429)";

/** Every HTTP contender, in table order. */
export const HTTP_CONTENDERS = [
  BARE,
  NOOP,
  STATIC_HEADERS,
  SLUICE_IETF,
  SLUICE_DEFAULT,
  SLUICE_OFF,
  SLUICE_DENIED,
  HONO_RATE_LIMITER,
  HONO_RATE_LIMITER_SAME,
  SLUICE_REDIS,
] as const;
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

/** The policy name `@sluice/hono` writes for the quota of the allowed contenders. */
const NEVER_POLICY = '"1000000000-per-1m"';

/** What hono-rate-limiter puts at `c.get("rateLimit")`. */
interface HonoRateLimitInfo {
  limit: number;
  remaining: number;
  resetTime?: Date;
}

/**
 * hono-rate-limiter (its headers off) wrapped to write `@sluice/hono`'s default header set
 * (`["ietf", "legacy"]`) for a one-minute window, from what it puts at `c.get("rateLimit")`, before
 * the handler (as `c.header()` must be), on allowed requests.
 */
function withDefaultHeaders(limit: number): MiddlewareHandler {
  const limiter = honoRateLimiter({ windowMs: 60_000, limit, keyGenerator: keyOf, standardHeaders: false });
  const policy = `${NEVER_POLICY};q=${limit};w=60`;
  return (c, next) =>
    limiter(c, () => {
      const info = c.get("rateLimit") as HonoRateLimitInfo;
      const resetMs = info.resetTime?.getTime() ?? Date.now();
      c.header("RateLimit-Policy", policy);
      c.header("RateLimit", `${NEVER_POLICY};r=${info.remaining};t=${Math.max(0, Math.ceil((resetMs - Date.now()) / 1000))}`);
      c.header("X-RateLimit-Limit", String(info.limit));
      c.header("X-RateLimit-Remaining", String(info.remaining));
      c.header("X-RateLimit-Reset", String(Math.ceil(resetMs / 1000)));
      return next();
    });
}

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
    case STATIC_HEADERS: {
      // lowercase names, as @sluice/hono hands them to c.header(): the cheapest form
      const reset = String(Math.ceil(Date.now() / 60_000) * 60);
      app.use(async (c, next) => {
        c.header("ratelimit-policy", `${NEVER_POLICY};q=1000000000;w=60`);
        c.header("ratelimit", `${NEVER_POLICY};r=999999999;t=60`);
        c.header("x-ratelimit-limit", "1000000000");
        c.header("x-ratelimit-remaining", "999999999");
        c.header("x-ratelimit-reset", reset);
        await next();
      });
      break;
    }
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
    case HONO_RATE_LIMITER_SAME:
      app.use(withDefaultHeaders(NEVER));
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
