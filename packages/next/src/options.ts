/**
 * The options both Next.js entry points share, and the translation of them into a core guard.
 *
 * @module
 */
import {
  type ClientIpTrust,
  type Decision,
  type Guard,
  type GuardOptions,
  type HeadersOption,
  type RateLimiter,
  SluiceConfigError,
  type TierSettings,
  UNKNOWN_CLIENT_KEY,
  addRateLimitHeaders,
  clientIp,
  createGuard,
  validateClientIpOptions,
} from "@sluice/core";
import type { NextFetchEvent, NextRequest } from "next/server.js";

export { UNKNOWN_CLIENT_KEY };

/**
 * Options every form takes. Every function receives the `NextRequest` first; `Extra` is what
 * follows it: nothing in a proxy, the route context (`{ params }`) in a route handler.
 */
export interface RateLimitCommonOptions<Extra extends unknown[] = []> {
  /**
   * The rate-limit key of a request: an API key, a user id, a session. Must return a non-empty
   * string. Give exactly one of `key` and `trust`.
   */
  key?: (request: NextRequest, ...extra: Extra) => string | Promise<string>;
  /**
   * Key requests by client address, read with `clientIp(request, { trust })` from `@sluice/core`:
   * `"vercel"` believes `x-vercel-forwarded-for` (else `x-real-ip`), `"cloudflare"` believes
   * `CF-Connecting-IP`, a number N believes the N-th address from the right of `X-Forwarded-For`
   * (N reverse proxies of yours in front of `next start`). No header is believed without it. A
   * request whose address cannot be established is keyed as {@link UNKNOWN_CLIENT_KEY}
   * (`"unknown"`): such requests share one quota, so a misconfigured proxy shows up as everyone
   * being limited together, not as nobody being limited. Give exactly one of `key` and `trust`.
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
  cost?: number | ((request: NextRequest, ...extra: Extra) => number | Promise<number>);
  /** Requests for which this returns `true` are not limited: no decision, no headers. */
  skip?: (request: NextRequest, ...extra: Extra) => boolean | Promise<boolean>;
  /**
   * Header styles: `"ietf"`, `"draft-7"`, `"draft-6"`, `"legacy"`, a list of them, or `false`.
   * @default ["ietf", "legacy"]
   */
  headers?: HeadersOption;
  /**
   * Builds the response for a denied request instead of the default RFC 9457
   * `application/problem+json` 429. The rate-limit headers (and `Retry-After`) are added to it
   * unless it already has them.
   */
  onLimited?: (request: NextRequest, decision: Decision, ...extra: Extra) => Response | Promise<Response>;
  /**
   * Where the decision's background work (`decision.pending`: analytics, sync) goes so the
   * response need not wait for it: pass `after` from `next/server`. A proxy called by Next.js uses
   * its event's `waitUntil` instead.
   * @default undefined (the work is awaited before the response is returned; no store in Sluice
   *   has background work today, so this costs nothing yet)
   */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** One `RateLimiter` for every request. */
export interface RateLimitLimiterOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra> {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/** Plans: each tier its own limits and its own key namespace. */
export interface RateLimitTieredOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra>, TierSettings {
  /**
   * The tier of a request (a database lookup, say). Answers are cached per key for
   * `tierCacheTtlMs`. A name that is not in `tiers` throws `SluiceConfigError` at that request.
   */
  tier: (request: NextRequest, key: string, ...extra: Extra) => string | Promise<string>;
}

/** `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type RateLimitOptions<Extra extends unknown[] = []> = RateLimitLimiterOptions<Extra> | RateLimitTieredOptions<Extra>;

/** What the core guard sees: the request and the arguments after it. */
export interface Call<Extra extends unknown[]> {
  request: NextRequest;
  extra: Extra;
}

export function kind(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "function") return "a function";
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

function requireOptionalFunction(value: unknown, option: string, where: string): void {
  if (value !== undefined && typeof value !== "function") {
    throw new SluiceConfigError(`${where}: ${option} must be a function; got ${kind(value)}`);
  }
}

/**
 * Validates the options (throwing `SluiceConfigError` naming the option) and builds the core
 * guard over `{ request, extra }`.
 */
export function buildGuard<Extra extends unknown[]>(options: RateLimitOptions<Extra>, where: string): Guard<Call<Extra>> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`${where} needs an options object with limiter (or tiers) and key (or trust); got ${kind(options)}`);
  }
  const { key, trust, ipv6Subnet, cost, skip, onLimited } = options;
  if (key !== undefined && trust !== undefined) {
    throw new SluiceConfigError(`${where}: give key or trust, not both (trust keys requests by client address)`);
  }
  let keyOf: (call: Call<Extra>) => string | Promise<string>;
  if (trust !== undefined) {
    validateClientIpOptions({ trust, ipv6Subnet }, where);
    const ipOptions = { trust, ipv6Subnet };
    keyOf = (call) => clientIp(call.request, ipOptions) ?? UNKNOWN_CLIENT_KEY;
  } else if (typeof key === "function") {
    if (ipv6Subnet !== undefined) {
      throw new SluiceConfigError(`${where}: ipv6Subnet applies only with trust; with key, normalize addresses yourself (normalizeIp)`);
    }
    keyOf = (call) => key(call.request, ...call.extra);
  } else {
    throw new SluiceConfigError(
      `${where}: key must be a function of the request (e.g. (request) => request.headers.get("x-api-key") ?? "anonymous"), or give trust ("vercel", "cloudflare" or a number of proxies) to key by client address; got key ${kind(key)}. No header is trusted by default.`,
    );
  }
  requireOptionalFunction(skip, "skip", where);
  requireOptionalFunction(onLimited, "onLimited", where);
  requireOptionalFunction(options.waitUntil, "waitUntil", where);
  const tiered = "tiers" in options && options.tiers !== undefined;
  if (tiered) {
    const { tier } = options as RateLimitTieredOptions<Extra>;
    if (typeof tier !== "function") throw new SluiceConfigError(`${where}: tier must be a function (request, key) => tier name; got ${kind(tier)}`);
  }
  // Functions are wrapped to take the request first; anything else goes to the core guard as it
  // is, which validates it and names the option.
  const guardOptions = {
    ...(options as object),
    key: keyOf,
    cost: typeof cost === "function" ? (call: Call<Extra>) => cost(call.request, ...call.extra) : cost,
    skip: skip === undefined ? undefined : (call: Call<Extra>) => skip(call.request, ...call.extra),
    onLimited:
      onLimited === undefined ? undefined : (decision: Decision, call: Call<Extra>) => onLimited(call.request, decision, ...call.extra),
  } as GuardOptions<Call<Extra>>;
  if (tiered) {
    const { tier } = options as RateLimitTieredOptions<Extra>;
    (guardOptions as { tier: unknown }).tier = (call: Call<Extra>, id: string) => tier(call.request, id, ...call.extra);
  }
  return createGuard<Call<Extra>>(guardOptions);
}

/** Waits `ms` milliseconds (a `leakyBucket` with a `queue` asks requests to wait before being served). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Hands the decision's background work (`decision.pending`) to the platform: `event.waitUntil` in
 * a proxy that Next.js called with its event, else the `waitUntil` option (e.g. `after` from
 * `next/server`), else it is awaited before the response is returned, so it is never lost.
 */
export async function keepAlive(
  pending: Promise<void>,
  event: NextFetchEvent | undefined,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
): Promise<void> {
  if (event !== undefined) event.waitUntil(pending);
  else if (waitUntil !== undefined) waitUntil(pending);
  else await pending;
}

/** Adds the rate-limit headers to a response (core's {@link addRateLimitHeaders}). */
export const withHeaders = addRateLimitHeaders;
