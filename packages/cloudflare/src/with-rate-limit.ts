/**
 * `withRateLimit(handler, options)`: rate limiting around a module Worker's `fetch(request, env, ctx)`.
 *
 * @module
 */
import {
  type ClientIpTrust,
  type Decision,
  type Guard,
  type GuardOptions,
  type HeadersOption,
  type Policy,
  RateLimiter,
  SluiceConfigError,
  type Store,
  type StoreErrorMode,
  UNKNOWN_CLIENT_KEY,
  addRateLimitHeaders,
  clientIp,
  createGuard,
  fixedWindow,
  validateClientIpOptions,
} from "@sluice/core";

export { UNKNOWN_CLIENT_KEY };

/** A Worker's `fetch` with the request's decision as a fourth argument (`undefined` when `skip` said so). */
export type RateLimitedFetch<Env> = (
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rateLimit: Decision | undefined,
) => Response | Promise<Response>;

/** A module Worker's handler object whose `fetch` gets the decision as a fourth argument. */
export interface RateLimitedHandler<Env> {
  fetch: RateLimitedFetch<Env>;
}

/** What {@link withRateLimit} returns: the handler, its `fetch` rate-limited. */
export type WithRateLimitHandler<Env, H = object> = Omit<H, "fetch"> & {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response>;
};

/** Options every form of {@link withRateLimit} takes. Functions receive the Worker's `(request, env, ctx)`. */
export interface WithRateLimitCommonOptions<Env> {
  /** The rate-limit key of a request (an API key, a user id). Give exactly one of `key` and `trust`. */
  key?: (request: Request, env: Env, ctx: ExecutionContext) => string | Promise<string>;
  /**
   * Key requests by client address with `clientIp(request, { trust })` from `@sluice/core`. On
   * Workers, `"cloudflare"` reads `CF-Connecting-IP`, which Cloudflare's edge sets. A request whose
   * address cannot be established is keyed `"unknown"` (one shared quota). Give exactly one of
   * `key` and `trust`.
   */
  trust?: ClientIpTrust;
  /**
   * With `trust`: IPv6 clients are keyed by this prefix length.
   * @default 64
   */
  ipv6Subnet?: number;
  /**
   * Units a request consumes: a positive safe integer, or a function of the request.
   * @default 1
   */
  cost?: number | ((request: Request, env: Env, ctx: ExecutionContext) => number | Promise<number>);
  /** Requests for which this returns `true` are not limited: no decision, no headers. */
  skip?: (request: Request, env: Env, ctx: ExecutionContext) => boolean | Promise<boolean>;
  /**
   * Header styles: `"ietf"`, `"draft-7"`, `"draft-6"`, `"legacy"`, a list of them, or `false`.
   * @default ["ietf", "legacy"]
   */
  headers?: HeadersOption;
  /** The response for a denied request instead of the RFC 9457 429; the rate-limit headers are added to it. */
  onLimited?: (request: Request, env: Env, ctx: ExecutionContext, decision: Decision) => Response | Promise<Response>;
}

/** {@link withRateLimit} over one limiter. */
export interface WithRateLimitLimiterOptions<Env> extends WithRateLimitCommonOptions<Env> {
  /**
   * The limiter, or — since a Durable Object store needs the namespace binding from `env` — a
   * factory `(env) => RateLimiter`, called once per `env` object (the runtime passes the same one
   * to every request of an isolate) and cached.
   */
  limiter: RateLimiter | ((env: Env) => RateLimiter);
}

/** {@link withRateLimit} with plans: each tier its own limits and key namespace. */
export interface WithRateLimitTieredOptions<Env> extends WithRateLimitCommonOptions<Env> {
  /** Tier name → its limits, e.g. `{ free: [...], pro: [...] }`. */
  tiers: Readonly<Record<string, Policy | readonly Policy[]>>;
  /** The tier of a request and its key (a KV or D1 lookup, say); cached per key for `tierCacheTtlMs`. */
  tier: (request: Request, env: Env, key: string) => string | Promise<string>;
  /**
   * Where every tier's state lives: a store, or a factory `(env) => Store` (called once per `env`),
   * e.g. `(env) => new DurableObjectStore(env.SLUICE)`.
   * @default a MemoryStore per isolate
   */
  store?: Store | ((env: Env) => Store);
  /** Tier `t` keeps its counters under `${prefix}:${t}`. @default "sluice" */
  prefix?: string;
  /** @default 300_000 */
  tierCacheTtlMs?: number;
  /** @default 10_000 */
  tierCacheMaxKeys?: number;
  /** @default "fallback" */
  onStoreError?: StoreErrorMode;
  timeoutMs?: number;
  onStoreFailure?: (error: unknown) => void;
}

/** Options of {@link withRateLimit}: `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type WithRateLimitOptions<Env> = WithRateLimitLimiterOptions<Env> | WithRateLimitTieredOptions<Env>;

/** What the guard sees of a request. */
interface WorkerContext<Env> {
  request: Request;
  env: Env;
  ctx: ExecutionContext;
}

function kind(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "function") return "a function";
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}


/**
 * Rate-limits a module Worker. Each request is keyed (`key`, or the client address with `trust`)
 * and checked against the limiter (or its tier's limits). Denied: the RFC 9457 429 (or
 * `onLimited`'s response) is returned and the handler is not called. Allowed: the handler's
 * `fetch` is called — with the decision as a fourth argument — after waiting `delayMs` if a
 * shaping `leakyBucket` asks for it, and the rate-limit headers are added to its response (a copy
 * if its headers are immutable). Either way `decision.pending` goes to `ctx.waitUntil`, so
 * background work outlives the response. Other handlers of the object (`scheduled`, `queue`, …)
 * are kept as they are.
 *
 * The limiter usually needs `env` (the Durable Object binding), so `limiter` (and, with tiers,
 * `store`) may be a factory of `env`; it is called at the first request of each `env` object and
 * cached. Misconfiguration throws `SluiceConfigError` when `withRateLimit()` is called (an
 * invalid limiter returned by the factory: at the first request).
 *
 * @param handler - `{ fetch(request, env, ctx, rateLimit) }` (plus any other handlers), or the `fetch` function alone.
 * @param options - `limiter` (or `tiers` + `tier`), `key` (or `trust`), and `cost`, `skip`, `headers`, `onLimited`.
 * @returns The handler object with its `fetch` rate-limited.
 *
 * @example
 * ```ts
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { DurableObjectStore, type SluiceLimiter, withRateLimit } from "@sluice/cloudflare";
 * export { SluiceLimiter } from "@sluice/cloudflare";
 *
 * interface Env { SLUICE: DurableObjectNamespace<SluiceLimiter> }
 *
 * export default withRateLimit<Env>(
 *   {
 *     async fetch(request, env, ctx, rateLimit) {
 *       return Response.json({ hello: "world", remaining: rateLimit?.remaining });
 *     },
 *   },
 *   {
 *     limiter: (env) =>
 *       new RateLimiter({ store: new DurableObjectStore(env.SLUICE), limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *     trust: "cloudflare",
 *   },
 * );
 * ```
 */
export function withRateLimit<Env = unknown, H extends RateLimitedHandler<Env> = RateLimitedHandler<Env>>(
  handler: H | RateLimitedFetch<Env>,
  options: WithRateLimitOptions<Env>,
): WithRateLimitHandler<Env, H> {
  const inner: RateLimitedHandler<Env> | undefined =
    typeof handler === "function"
      ? { fetch: handler }
      : typeof handler === "object" && handler !== null && typeof (handler as Partial<H>).fetch === "function"
        ? handler
        : undefined;
  if (inner === undefined) {
    throw new SluiceConfigError(`withRateLimit: handler must be a module Worker's { fetch(request, env, ctx) } or a fetch function; got ${kind(handler)}`);
  }
  const guardFor = guardFactory(options);

  async function fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const guard = guardFor(env);
    const { decision, headers, response } = await guard({ request, env, ctx });
    if (decision === undefined) return inner!.fetch(request, env, ctx, undefined);
    ctx?.waitUntil?.(decision.pending);
    if (response !== undefined) return response;
    if (decision.delayMs > 0) await sleep(decision.delayMs);
    return addRateLimitHeaders(await inner!.fetch(request, env, ctx, decision), headers);
  }

  const wrapped = typeof handler === "function" ? { fetch } : { ...handler, fetch };
  return wrapped as unknown as WithRateLimitHandler<Env, H>;
}

/** Validates `options` now and returns `env → guard`, building each `env`'s guard once. */
function guardFactory<Env>(options: WithRateLimitOptions<Env>): (env: Env) => Guard<WorkerContext<Env>> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`withRateLimit needs an options object with limiter (or tiers) and key (or trust); got ${kind(options)}`);
  }
  const { key, trust, ipv6Subnet, cost, skip, onLimited } = options;
  if (key !== undefined && trust !== undefined) {
    throw new SluiceConfigError("withRateLimit: give key or trust, not both (trust keys requests by client address)");
  }
  let keyOf: (c: WorkerContext<Env>) => string | Promise<string>;
  if (trust !== undefined) {
    validateClientIpOptions({ trust, ipv6Subnet }, "withRateLimit");
    const ipOptions = { trust, ipv6Subnet };
    keyOf = (c) => clientIp(c.request, ipOptions) ?? UNKNOWN_CLIENT_KEY;
  } else if (typeof key === "function") {
    if (ipv6Subnet !== undefined) throw new SluiceConfigError("withRateLimit: ipv6Subnet applies only with trust");
    keyOf = (c) => key(c.request, c.env, c.ctx);
  } else {
    throw new SluiceConfigError(
      `withRateLimit: key must be a function (request, env, ctx) => string, or give trust ("cloudflare" on Workers) to key by client address; got key ${kind(key)}`,
    );
  }
  for (const [name, value] of [
    ["skip", skip],
    ["onLimited", onLimited],
  ] as const) {
    if (value !== undefined && typeof value !== "function") throw new SluiceConfigError(`withRateLimit: ${name} must be a function; got ${kind(value)}`);
  }
  const common = {
    key: keyOf,
    headers: options.headers,
    cost: typeof cost === "function" ? (c: WorkerContext<Env>) => cost(c.request, c.env, c.ctx) : cost,
    skip: skip === undefined ? undefined : (c: WorkerContext<Env>) => skip(c.request, c.env, c.ctx),
    onLimited: onLimited === undefined ? undefined : (d: Decision, c: WorkerContext<Env>) => onLimited(c.request, c.env, c.ctx, d),
  };

  let build: (env: Env) => Guard<WorkerContext<Env>>;
  if ("tiers" in options && options.tiers !== undefined) {
    if ((options as { limiter?: unknown }).limiter !== undefined) throw new SluiceConfigError("withRateLimit takes either limiter or tiers, not both");
    const { tier, store } = options;
    if (typeof tier !== "function") throw new SluiceConfigError(`withRateLimit: tier must be a function (request, env, key) => string; got ${kind(tier)}`);
    if (store !== undefined && typeof store !== "function" && typeof (store as Partial<Store>).bind !== "function") {
      throw new SluiceConfigError(`withRateLimit: store must be a Store or a function (env) => Store; got ${kind(store)}`);
    }
    const tiered = (resolved: Store | undefined): GuardOptions<WorkerContext<Env>> => ({
      ...common,
      tiers: options.tiers,
      tier: (c, k) => tier(c.request, c.env, k),
      store: resolved,
      prefix: options.prefix,
      tierCacheTtlMs: options.tierCacheTtlMs,
      tierCacheMaxKeys: options.tierCacheMaxKeys,
      onStoreError: options.onStoreError,
      timeoutMs: options.timeoutMs,
      onStoreFailure: options.onStoreFailure,
    });
    if (typeof store === "function") {
      createGuard(tiered(undefined)); // validates every option now, against a throwaway MemoryStore
      build = (env) => createGuard(tiered(store(env)));
    } else {
      const guard = createGuard(tiered(store));
      build = () => guard;
    }
  } else {
    const { limiter } = options as WithRateLimitLimiterOptions<Env>;
    if (limiter instanceof RateLimiter) {
      const guard = createGuard<WorkerContext<Env>>({ ...common, limiter });
      build = () => guard;
    } else if (typeof limiter === "function") {
      createGuard<WorkerContext<Env>>({ ...common, limiter: new RateLimiter({ limits: fixedWindow({ limit: 1, window: 1000 }) }) });
      build = (env) => {
        const made = limiter(env);
        if (!(made instanceof RateLimiter)) {
          throw new SluiceConfigError(`withRateLimit: the limiter factory must return a RateLimiter; got ${kind(made)}`);
        }
        return createGuard<WorkerContext<Env>>({ ...common, limiter: made });
      };
    } else {
      throw new SluiceConfigError(`withRateLimit needs limiter (a RateLimiter or (env) => RateLimiter) or tiers; got limiter ${kind(limiter)}`);
    }
  }

  const byEnv = new WeakMap<object, Guard<WorkerContext<Env>>>();
  let withoutEnv: Guard<WorkerContext<Env>> | undefined;
  return (env) => {
    if (typeof env !== "object" || env === null) return (withoutEnv ??= build(env));
    let guard = byEnv.get(env);
    if (guard === undefined) {
      guard = build(env);
      byEnv.set(env, guard);
    }
    return guard;
  };
}
