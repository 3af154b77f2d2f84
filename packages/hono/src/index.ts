/**
 * @module
 * Rate Limiter Middleware for Hono, built on `@sluice/core`: one limiter or per-plan tiers, IETF
 * `RateLimit` headers (plus draft-7, draft-6 and legacy `X-RateLimit-*`), an RFC 9457
 * `application/problem+json` 429, and the decision at `c.get("rateLimit")`.
 */
import {
  type ClientIpTrust,
  type Decision,
  type GuardOptions,
  type HeadersOption,
  type Policy,
  type RateLimiter,
  SluiceConfigError,
  type Store,
  type TierSettings,
  UNKNOWN_CLIENT_KEY,
  clientIp,
  createGuard,
  validateClientIpOptions,
} from "@sluice/core";
import type { Context, MiddlewareHandler } from "hono";

export type { Decision } from "@sluice/core";

/** The context variables the middleware sets: `c.get("rateLimit")` is the request's {@link Decision}. */
export type RateLimitVariables = {
  /** The decision for this request. Not set when `skip` returned `true`. */
  rateLimit: Decision;
};

export { UNKNOWN_CLIENT_KEY };

/** Options every form of {@link rateLimiter} takes. Every function receives the Hono `Context` first. */
export interface RateLimiterCommonOptions {
  /**
   * The rate-limit key of a request: an API key, a user id, an address. Must return a non-empty
   * string. Give exactly one of `key` and `trust`.
   */
  key?: (c: Context) => string | Promise<string>;
  /**
   * Key requests by client address, read with `clientIp(c.req.raw, { trust })` from `@sluice/core`:
   * `"cloudflare"` believes `CF-Connecting-IP`, `"vercel"` believes `x-vercel-forwarded-for` (else
   * `x-real-ip`), a number N believes the N-th address from the right of `X-Forwarded-For` (N
   * trusted proxies in front of the app). No header is believed without it. A request whose address
   * cannot be established (header missing or not an IP address) is keyed as
   * {@link UNKNOWN_CLIENT_KEY} (`"unknown"`): all such requests share one quota, so a
   * misconfigured proxy shows up as everyone being limited together rather than as nobody being
   * limited. Give exactly one of `key` and `trust`.
   */
  trust?: ClientIpTrust;
  /**
   * With `trust`: IPv6 clients are keyed by this prefix length.
   * @default 64
   */
  ipv6Subnet?: number;
  /**
   * Units a request consumes: a positive safe integer, or a function of the context.
   * @default 1
   */
  cost?: number | ((c: Context) => number | Promise<number>);
  /**
   * Requests for which this returns `true` are not limited: no decision, no headers, and
   * `c.get("rateLimit")` is not set.
   */
  skip?: (c: Context) => boolean | Promise<boolean>;
  /**
   * Header styles: `"ietf"`, `"draft-7"`, `"draft-6"`, `"legacy"`, a list of them, or `false`.
   * @default ["ietf", "legacy"]
   */
  headers?: HeadersOption;
  /**
   * Builds the response for a denied request instead of the default RFC 9457 429. The rate-limit
   * headers (and `Retry-After`) are added to it unless it already has them.
   */
  onLimited?: (c: Context, decision: Decision) => Response | Promise<Response>;
}

/** {@link rateLimiter} over one `RateLimiter`. */
export interface RateLimiterLimiterOptions extends RateLimiterCommonOptions {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/** {@link rateLimiter} with plans: each tier its own limits and its own key namespace. */
export interface RateLimiterTieredOptions extends RateLimiterCommonOptions, TierSettings {
  /**
   * The tier of a request, from the context and its key (a database lookup, say). Answers are
   * cached per key for `tierCacheTtlMs`. A name that is not in `tiers` throws `SluiceConfigError`
   * (a 500 through Hono's error handler).
   */
  tier: (c: Context, key: string) => string | Promise<string>;
}

/** Options of {@link rateLimiter}: `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type HonoRateLimiterOptions = RateLimiterLimiterOptions | RateLimiterTieredOptions;

function kind(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "function") return "a function";
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

/** Waits `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Rate Limiter Middleware for Hono.
 *
 * Each request is keyed (`key`, or the client address with `trust`), checked against the limiter
 * (or its tier's limits), and then either passed on — with `c.get("rateLimit")` set and the
 * rate-limit headers added to the final response, whatever the handler returned — or answered
 * with the 429 (or `onLimited`'s response) without calling the handler. A decision that asks to
 * be shaped (`delayMs > 0`, a `leakyBucket` with a `queue`) waits `delayMs` before the handler
 * runs. Headers the handler (or an inner rate limiter) already set are left as they are.
 * Misconfiguration throws `SluiceConfigError` when `rateLimiter()` is called.
 *
 * @param {HonoRateLimiterOptions} options - The options for the rate limiter middleware.
 * @param {RateLimiter} [options.limiter] - The limiter to check requests against. Give this, or `tiers` and `tier`.
 * @param {Record<string, Policy | Policy[]>} [options.tiers] - Tier name → its limits; each tier gets its own namespace.
 * @param {(c: Context, key: string) => string | Promise<string>} [options.tier] - The tier of a request (required with `tiers`); cached per key.
 * @param {number} [options.tierCacheTtlMs=300_000] - How long a key's tier is cached, in ms; 0 disables the cache.
 * @param {number} [options.tierCacheMaxKeys=10_000] - The most keys whose tier is cached.
 * @param {Store} [options.store=new MemoryStore()] - With `tiers`: where the state lives.
 * @param {string} [options.prefix="sluice"] - With `tiers`: tier `t` uses the prefix `${prefix}:${t}`.
 * @param {"fallback" | "allow" | "deny"} [options.onStoreError="fallback"] - With `tiers`: what to do when the store fails.
 * @param {number} [options.timeoutMs] - With `tiers`: ms a store call may take before it counts as failed.
 * @param {(error: unknown) => void} [options.onStoreFailure] - With `tiers`: called on each store failure.
 * @param {(c: Context) => string | Promise<string>} [options.key] - The rate-limit key of a request. Give `key` or `trust`.
 * @param {"cloudflare" | "vercel" | number} [options.trust] - Key by client address from the named platform's header; requests without a trusted address share the key `"unknown"`.
 * @param {number} [options.ipv6Subnet=64] - With `trust`: IPv6 clients are keyed by this prefix length.
 * @param {number | ((c: Context) => number | Promise<number>)} [options.cost=1] - Units a request consumes.
 * @param {(c: Context) => boolean | Promise<boolean>} [options.skip] - Requests for which this returns `true` are not limited and get no headers.
 * @param {HeaderStyle | HeaderStyle[] | false} [options.headers=["ietf", "legacy"]] - Header styles to write.
 * @param {(c: Context, decision: Decision) => Response | Promise<Response>} [options.onLimited] - The response for a denied request; default an RFC 9457 429.
 * @returns {MiddlewareHandler} The middleware handler function; it sets `c.get("rateLimit")`.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { rateLimiter } from "@sluice/hono";
 *
 * const app = new Hono();
 *
 * app.use(
 *   "/api/*",
 *   rateLimiter({
 *     limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *     trust: "cloudflare", // key by CF-Connecting-IP
 *   }),
 * );
 *
 * app.get("/api/hello", (c) => c.json({ remaining: c.get("rateLimit").remaining }));
 * ```
 *
 * @example Tiers by API key
 * ```ts
 * app.use(
 *   "/api/*",
 *   rateLimiter({
 *     tiers: {
 *       free: [slidingWindow({ limit: 30, window: "1m" }), fixedWindow({ limit: 1000, window: "1d" })],
 *       pro: [slidingWindow({ limit: 300, window: "1m" }), fixedWindow({ limit: 50_000, window: "1d" })],
 *     },
 *     key: (c) => c.req.header("x-api-key") ?? "anonymous",
 *     tier: async (c, key) => (await db.planOf(key)) ?? "free",
 *     skip: (c) => c.req.method === "OPTIONS",
 *     onLimited: (c, decision) => c.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, 429),
 *   }),
 * );
 * ```
 */
export function rateLimiter(options: HonoRateLimiterOptions): MiddlewareHandler<{ Variables: RateLimitVariables }> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`rateLimiter needs an options object with limiter (or tiers) and key (or trust); got ${kind(options)}`);
  }
  const { key, trust, ipv6Subnet, onLimited } = options;
  if (key !== undefined && trust !== undefined) {
    throw new SluiceConfigError("rateLimiter: give key or trust, not both (trust keys requests by client address)");
  }
  let keyOf: (c: Context) => string | Promise<string>;
  if (trust !== undefined) {
    validateClientIpOptions({ trust, ipv6Subnet }, "rateLimiter");
    const ipOptions = { trust, ipv6Subnet };
    keyOf = (c) => clientIp(c.req.raw, ipOptions) ?? UNKNOWN_CLIENT_KEY;
  } else if (typeof key === "function") {
    if (ipv6Subnet !== undefined) {
      throw new SluiceConfigError("rateLimiter: ipv6Subnet applies only with trust; with key, normalize addresses yourself (normalizeIp)");
    }
    keyOf = key;
  } else {
    throw new SluiceConfigError(
      `rateLimiter: key must be a function of the context (e.g. (c) => c.req.header("x-api-key")), or give trust ("cloudflare", "vercel" or a number of proxies) to key by client address; got key ${kind(key)}. No header is trusted by default.`,
    );
  }
  if (onLimited !== undefined && typeof onLimited !== "function") {
    throw new SluiceConfigError(`rateLimiter: onLimited must be a function (c, decision) => Response; got ${kind(onLimited)}`);
  }
  const guard = createGuard<Context>({
    ...(options as GuardOptions<Context>),
    key: keyOf,
    onLimited: onLimited === undefined ? undefined : (decision, c) => onLimited(c, decision),
  });

  return async function rateLimiter(c, next) {
    const { decision, headers, response } = await guard(c);
    if (decision === undefined) {
      await next();
      return;
    }
    c.set("rateLimit", decision);
    if (response !== undefined) return response;
    if (decision.delayMs > 0) await sleep(decision.delayMs);
    await next();
    const missing = [...headers].filter(([name]) => !c.res.headers.has(name));
    try {
      for (const [name, value] of missing) c.res.headers.set(name, value);
    } catch {
      // immutable headers (Response.redirect(), a fetch() response): c.header copies the response
      for (const [name, value] of missing) c.header(name, value);
    }
  };
}
