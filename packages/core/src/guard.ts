/**
 * The request-level piece every adapter wraps: key the request, pick the limiter (or the tier's
 * limiter), decide, write headers, and build the 429.
 *
 * @module
 */
import { type Policy, isPolicy, validateName } from "./algorithms.js";
import { SluiceConfigError, SluiceInputError, describe } from "./errors.js";
import { type HeaderStyle, type HeadersOption, ietfPolicyHeader, resolveHeaderStyles, setRateLimitHeaders } from "./headers.js";
import { RateLimiter, type StoreErrorMode, assertKey } from "./limiter.js";
import { MemoryStore } from "./memory-store.js";
import { addRateLimitHeaders, limitedResponse } from "./response.js";
import type { Decision, Store } from "./types.js";

/** Options every guard takes. `C` is what the adapter hands in: a `Request` for the core guard. */
export interface GuardCommonOptions<C> {
  /** The rate-limit key of a request, e.g. an API key or `clientIp(request, { trust })`. Must return a non-empty string. */
  key: (ctx: C) => string | Promise<string>;
  /**
   * Units a request consumes: a number, or a function of the request.
   * @default 1
   */
  cost?: number | ((ctx: C) => number | Promise<number>);
  /** Requests for which this returns `true` are not limited (no decision, no headers). */
  skip?: (ctx: C) => boolean | Promise<boolean>;
  /**
   * Header styles to write.
   * @default ["ietf", "legacy"]
   */
  headers?: HeadersOption;
  /** Builds the response for a denied request instead of the default RFC 9457 429. Rate-limit headers are added to it. */
  onLimited?: (decision: Decision, ctx: C) => Response | Promise<Response>;
}

/** A guard over one limiter. */
export interface LimiterGuardOptions<C> extends GuardCommonOptions<C> {
  limiter: RateLimiter;
}

/**
 * The settings of a tiered guard that do not depend on the request type, shared by every adapter.
 */
export interface TierSettings {
  /** Tier name → its limits, e.g. `{ free: [...], pro: [...], enterprise: [...] }`. */
  tiers: Readonly<Record<string, Policy | readonly Policy[]>>;
  /**
   * How long a key's tier is cached, in ms; 0 disables the cache.
   * @default 300_000
   */
  tierCacheTtlMs?: number;
  /**
   * The most keys whose tier is cached.
   * @default 10_000
   */
  tierCacheMaxKeys?: number;
  /**
   * Where every tier's state lives.
   * @default new MemoryStore()
   */
  store?: Store;
  /**
   * Tier `t` keeps its counters under `${prefix}:${t}`.
   * @default "sluice"
   */
  prefix?: string;
  /**
   * On a store failure: `"fallback"`, `"allow"` or `"deny"` (see `RateLimiter`).
   * @default "fallback"
   */
  onStoreError?: StoreErrorMode;
  /** Milliseconds a store call may take before it counts as a failure. */
  timeoutMs?: number;
  /** Called with the error whenever a store call fails or times out. */
  onStoreFailure?: (error: unknown) => void;
}

/** A guard with plans: each tier its own limits and its own key namespace. */
export interface TieredGuardOptions<C> extends GuardCommonOptions<C>, TierSettings {
  /** The tier of a request (a database lookup, say). Its answers are cached per key for `tierCacheTtlMs`. */
  tier: (ctx: C, key: string) => string | Promise<string>;
}

/** Options of {@link createGuard}: either `limiter` or `tiers` + `tier`. */
export type GuardOptions<C = Request> = LimiterGuardOptions<C> | TieredGuardOptions<C>;

/** What a guard returns for one request. */
export interface GuardResult {
  /** The decision; `undefined` if `skip` said so. */
  decision: Decision | undefined;
  /** Rate-limit headers to put on the response (empty if skipped). */
  headers: Headers;
  /** The response to return when denied (the 429, or `onLimited`'s). `undefined` when allowed. */
  response: Response | undefined;
}

/** A guard: decides one request. */
export type Guard<C = Request> = (ctx: C) => Promise<GuardResult>;

interface Target {
  limiter: RateLimiter;
  ietfPolicy: string;
}

function targetOf(limiter: RateLimiter): Target {
  return { limiter, ietfPolicy: ietfPolicyHeader(limiter.policies) };
}

function requireFunction(value: unknown, option: string, optional: boolean): void {
  if (value === undefined && optional) return;
  if (typeof value !== "function") throw new SluiceConfigError(`${option} must be a function; got ${describe(value)}`);
}

/** `onLimited`'s response with the rate-limit headers added (see {@link addRateLimitHeaders}). */
function withHeaders(response: Response, headers: Headers): Response {
  if (typeof response !== "object" || response === null || typeof (response as Partial<Response>).status !== "number") {
    throw new SluiceConfigError(`onLimited must return a Response; got ${describe(response)}`);
  }
  return addRateLimitHeaders(response, headers);
}

/**
 * Builds the Fetch-level guard that adapters wrap. Configuration is validated here, synchronously.
 *
 * @example
 * ```ts
 * const guard = createGuard({
 *   limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *   key: (request) => clientIp(request, { trust: "cloudflare" }) ?? "unknown",
 * });
 * const { response, headers } = await guard(request);
 * if (response) return response; // the 429
 * ```
 *
 * @example Tiers
 * ```ts
 * const guard = createGuard({
 *   tiers: { free: [slidingWindow({ limit: 30, window: "1m" })], pro: [slidingWindow({ limit: 300, window: "1m" })] },
 *   tier: async (request, key) => (await db.plan(key)) ?? "free",
 *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
 * });
 * ```
 */
export function createGuard<C = Request>(options: GuardOptions<C>): Guard<C> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`createGuard needs an options object; got ${describe(options)}`);
  }
  requireFunction(options.key, "key", false);
  requireFunction(options.skip, "skip", true);
  requireFunction(options.onLimited, "onLimited", true);
  const { key, skip, onLimited } = options;
  const cost = options.cost;
  if (typeof cost !== "function" && cost !== undefined && !(typeof cost === "number" && Number.isSafeInteger(cost) && cost > 0)) {
    throw new SluiceConfigError(`cost must be a positive safe integer or a function; got ${describe(cost)}`);
  }
  const styles: readonly HeaderStyle[] = resolveHeaderStyles(options.headers);
  if ("tiers" in options && options.tiers !== undefined && (options as { limiter?: unknown }).limiter !== undefined) {
    throw new SluiceConfigError("createGuard takes either limiter or tiers, not both");
  }
  const pick = "tiers" in options && options.tiers !== undefined ? tieredPicker(options) : singlePicker(options as LimiterGuardOptions<C>);
  const limitOptions = typeof cost === "number" ? { cost } : undefined;

  return async function guard(ctx: C): Promise<GuardResult> {
    if (skip !== undefined && (await skip(ctx))) return { decision: undefined, headers: new Headers(), response: undefined };
    const id = await key(ctx);
    assertKey(id);
    const target = await pick(ctx, id);
    let options = limitOptions;
    if (typeof cost === "function") {
      const units = await cost(ctx);
      // `{ cost: undefined }` would mean the default, 1: a cost function must answer a number
      if (units === undefined) throw new SluiceInputError("cost must be a positive safe integer; got undefined");
      options = { cost: units };
    }
    const decision = await target.limiter.limit(id, options);
    const headers = new Headers();
    setRateLimitHeaders(headers, decision, styles, target.limiter.policies, target.ietfPolicy);
    if (decision.allowed) return { decision, headers, response: undefined };
    const response = onLimited === undefined ? limitedResponse(decision, headers) : withHeaders(await onLimited(decision, ctx), headers);
    return { decision, headers, response };
  };
}

function singlePicker<C>(options: LimiterGuardOptions<C>): (ctx: C, key: string) => Target {
  if (!(options.limiter instanceof RateLimiter)) {
    throw new SluiceConfigError(`createGuard needs limiter (a RateLimiter) or tiers; got limiter ${describe(options.limiter)}`);
  }
  const target = targetOf(options.limiter);
  return () => target;
}

function tieredPicker<C>(options: TieredGuardOptions<C>): (ctx: C, key: string) => Promise<Target> {
  const { tiers, tier } = options;
  if (typeof tiers !== "object" || tiers === null || Array.isArray(tiers) || Object.keys(tiers).length === 0) {
    throw new SluiceConfigError(`tiers must be an object of tier name → limits with at least one tier; got ${describe(tiers)}`);
  }
  requireFunction(tier, "tier", false);
  const ttlMs = options.tierCacheTtlMs ?? 300_000;
  if (typeof ttlMs !== "number" || !Number.isSafeInteger(ttlMs) || ttlMs < 0) {
    throw new SluiceConfigError(`tierCacheTtlMs must be a non-negative integer of milliseconds; got ${describe(ttlMs)}`);
  }
  const maxCached = options.tierCacheMaxKeys ?? 10_000;
  if (typeof maxCached !== "number" || !Number.isSafeInteger(maxCached) || maxCached <= 0) {
    throw new SluiceConfigError(`tierCacheMaxKeys must be a positive integer; got ${describe(maxCached)}`);
  }
  const prefix = options.prefix === undefined ? "sluice" : validateName(options.prefix, "prefix");
  const store = options.store ?? new MemoryStore();
  const targets = new Map<string, Target>();
  for (const [name, limits] of Object.entries(tiers)) {
    validateName(name, `tiers: tier name`);
    const list = Array.isArray(limits) ? limits : [limits];
    if (list.length === 0 || !list.every(isPolicy)) {
      throw new SluiceConfigError(`tiers.${name} must be a policy or a non-empty list of policies; got ${describe(limits)}`);
    }
    const names = list.map((p) => p.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) {
      throw new SluiceConfigError(`tiers.${name}: two limits are named ${describe(twice)}; give one a distinct name option`);
    }
    const limiter = new RateLimiter({
      store,
      limits: list,
      prefix: `${prefix}:${name}`,
      onStoreError: options.onStoreError,
      timeoutMs: options.timeoutMs,
      onStoreFailure: options.onStoreFailure,
    });
    targets.set(name, targetOf(limiter));
  }
  const known = [...targets.keys()].join(", ");
  // key → tier (or the lookup in flight, so a burst of requests for one key asks once)
  const cache = new Map<string, { tier: string | Promise<string>; expiresAt: number }>();

  const resolve = (ctx: C, key: string): string | Promise<string> => {
    if (ttlMs === 0) return tier(ctx, key);
    const now = Date.now();
    const hit = cache.get(key);
    if (hit !== undefined && hit.expiresAt > now) return hit.tier;
    if (hit !== undefined) cache.delete(key);
    else if (cache.size >= maxCached) cache.delete(cache.keys().next().value as string);
    const answer = tier(ctx, key);
    const entry = { tier: answer, expiresAt: now + ttlMs };
    cache.set(key, entry);
    if (typeof (answer as { then?: unknown } | undefined)?.then === "function") {
      (answer as Promise<string>).then(
        (name) => {
          if (cache.get(key) === entry) entry.tier = name;
        },
        () => {
          if (cache.get(key) === entry) cache.delete(key);
        },
      );
    }
    return answer;
  };

  return async (ctx, key) => {
    const name = await resolve(ctx, key);
    const target = targets.get(name);
    if (target === undefined) {
      cache.delete(key);
      throw new SluiceConfigError(`tier() returned ${describe(name)}, which is not a configured tier (${known})`);
    }
    return target;
  };
}
