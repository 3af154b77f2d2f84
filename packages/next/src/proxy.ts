/**
 * The guard for `proxy.ts` (Next.js 16) and `middleware.ts` (Next.js 15 and earlier, and the
 * edge runtime in 16).
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { type NextFetchEvent, type NextRequest, NextResponse } from "next/server.js";
import { type RateLimitOptions, buildGuard, keepAlive, kind, sleep } from "./options.js";

/** What a proxy (or middleware) function may return: a response, or nothing to continue. */
export type ProxyResult = Response | null | undefined | void;

/** A proxy function as Next.js calls it (the shape of `NextProxy` from `next/server`). */
export type ProxyFunction = (request: NextRequest, event: NextFetchEvent) => ProxyResult | Promise<ProxyResult>;

/** Options of {@link rateLimitProxy}: the common options, plus an existing proxy to run for allowed requests. */
export type RateLimitProxyOptions = RateLimitOptions & {
  /**
   * Your own proxy function, run for every request that is allowed (or skipped). Its response —
   * `NextResponse.next()`, a rewrite, a redirect, a response of its own, or nothing (meaning
   * `NextResponse.next()`) — gets the rate-limit headers, unless it already has them.
   */
  proxy?: ProxyFunction;
};

/**
 * What {@link rateLimitProxy} returns: a function to export as `proxy` from `proxy.ts` (or as
 * `middleware` from `middleware.ts`). It always resolves to a `NextResponse`.
 */
export type RateLimitProxy = (request: NextRequest, event?: NextFetchEvent) => Promise<NextResponse>;

function toNextResponse(response: Response, where: string): NextResponse {
  if (response instanceof NextResponse) return response;
  if (typeof response !== "object" || response === null || typeof (response as Partial<Response>).status !== "number") {
    throw new SluiceConfigError(`${where}: proxy must return a Response, a NextResponse or nothing; got ${kind(response)}`);
  }
  if (response.type === "error" || response.status === 0) {
    throw new SluiceConfigError(`${where}: a network error (Response.error()) cannot be returned from a proxy; return a response with a status`);
  }
  // a copy: a plain Response's headers may be immutable (Response.redirect(), a fetch() response)
  return new NextResponse(response.body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * The event handed to your `proxy` when the returned function is called without one (a unit test
 * calling `proxy(request)`): `next/server` exports `NextFetchEvent` as a type only, so this is a
 * stand-in whose `waitUntil` passes the promise to the `waitUntil` option, if any (else the
 * promise simply runs: outside Next.js there is no invocation to keep alive).
 */
function standInEvent(request: NextRequest, waitUntil: ((promise: Promise<unknown>) => void) | undefined): NextFetchEvent {
  const event = {
    sourcePage: request.nextUrl.pathname,
    waitUntil(promise: Promise<unknown>): void {
      waitUntil?.(promise);
    },
  };
  return event as unknown as NextFetchEvent;
}

function addMissing(response: NextResponse, headers: Headers): NextResponse {
  for (const [name, value] of headers) if (!response.headers.has(name)) response.headers.set(name, value);
  return response;
}

/**
 * Rate limiting in `proxy.ts` (Next.js 16) or `middleware.ts` (earlier versions; the edge
 * runtime). Each request that the `config.matcher` lets through is keyed (`key`, or the client
 * address with `trust`) and checked against the limiter (or its tier's limits). A denied request
 * is answered here with the 429 (`application/problem+json`, RFC 9457) or `onLimited`'s
 * response, and never reaches the route. An allowed one continues with `NextResponse.next()` —
 * or the response of your own `proxy` — carrying the rate-limit headers, which Next.js merges
 * into the route's response. A decision that asks to be shaped (`delayMs > 0`, a `leakyBucket`
 * with a `queue`) waits `delayMs` first. Misconfiguration throws `SluiceConfigError` naming the
 * option when `rateLimitProxy()` is called, i.e. when the proxy module loads.
 *
 * In Next.js 16 `proxy.ts` runs on the Node.js runtime (it cannot be configured); for the edge
 * runtime keep `middleware.ts` ({@link rateLimitMiddleware}). Either way the state belongs in a
 * shared store (`UpstashStore` from `@sluice/redis`) once there is more than one instance: a
 * `MemoryStore` counts per process (per isolate on the edge).
 *
 * @param {RateLimitProxyOptions} options - The options.
 * @param {RateLimiter} [options.limiter] - The limiter to check requests against. Give this, or `tiers` and `tier`.
 * @param {Record<string, Policy | Policy[]>} [options.tiers] - Tier name → its limits; each tier gets its own namespace.
 * @param {(request: NextRequest, key: string) => string | Promise<string>} [options.tier] - The tier of a request (required with `tiers`); cached per key.
 * @param {number} [options.tierCacheTtlMs=300_000] - How long a key's tier is cached, in ms; 0 disables the cache.
 * @param {number} [options.tierCacheMaxKeys=10_000] - The most keys whose tier is cached.
 * @param {Store} [options.store=new MemoryStore()] - With `tiers`: where the state lives.
 * @param {string} [options.prefix="sluice"] - With `tiers`: tier `t` uses the prefix `${prefix}:${t}`.
 * @param {"fallback" | "allow" | "deny"} [options.onStoreError="fallback"] - With `tiers`: what to do when the store fails.
 * @param {number} [options.timeoutMs] - With `tiers`: ms a store call may take before it counts as failed.
 * @param {(error: unknown) => void} [options.onStoreFailure] - With `tiers`: called on each store failure.
 * @param {(request: NextRequest) => string | Promise<string>} [options.key] - The rate-limit key of a request. Give `key` or `trust`.
 * @param {"vercel" | "cloudflare" | number} [options.trust] - Key by client address from the named platform's header; requests without a trusted address share the key `"unknown"`.
 * @param {number} [options.ipv6Subnet=64] - With `trust`: IPv6 clients are keyed by this prefix length.
 * @param {number | ((request: NextRequest) => number | Promise<number>)} [options.cost=1] - Units a request consumes.
 * @param {(request: NextRequest) => boolean | Promise<boolean>} [options.skip] - Requests for which this returns `true` are not limited and get no headers.
 * @param {HeaderStyle | HeaderStyle[] | false} [options.headers=["ietf", "legacy"]] - Header styles to write.
 * @param {(request: NextRequest, decision: Decision) => Response | Promise<Response>} [options.onLimited] - The response for a denied request; default an RFC 9457 429.
 * @param {(promise: Promise<unknown>) => void} [options.waitUntil] - Where `decision.pending` goes when Next.js passed no event (e.g. `after`); default: awaited.
 * @param {ProxyFunction} [options.proxy] - Your own proxy, run for allowed (and skipped) requests.
 * @returns {RateLimitProxy} The proxy function.
 *
 * @example proxy.ts
 * ```ts
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { rateLimitProxy } from "@sluice/next";
 *
 * export const proxy = rateLimitProxy({
 *   limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *   trust: "vercel", // key by x-vercel-forwarded-for; behind your own proxy: trust: 1
 * });
 *
 * export const config = { matcher: "/api/:path*" };
 * ```
 *
 * @example Around an existing proxy
 * ```ts
 * export const proxy = rateLimitProxy({
 *   limiter,
 *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
 *   proxy: (request) => {
 *     if (!request.headers.has("x-api-key")) return NextResponse.redirect(new URL("/login", request.url));
 *   },
 * });
 * ```
 */
export function rateLimitProxy(options: RateLimitProxyOptions): RateLimitProxy {
  const where = "rateLimitProxy";
  const guard = buildGuard<[]>(options, where);
  const inner = options.proxy;
  const waitUntil = options.waitUntil;
  if (inner !== undefined && typeof inner !== "function") {
    throw new SluiceConfigError(`${where}: proxy must be a function (request, event) => response or nothing; got ${kind(inner)}`);
  }

  return async function rateLimitProxy(request: NextRequest, event?: NextFetchEvent): Promise<NextResponse> {
    const { decision, headers, response } = await guard({ request, extra: [] });
    if (decision !== undefined) await keepAlive(decision.pending, event, waitUntil);
    if (response !== undefined) return toNextResponse(response, where);
    if (decision !== undefined && decision.delayMs > 0) await sleep(decision.delayMs);
    const result = inner === undefined ? undefined : await inner(request, event ?? standInEvent(request, waitUntil));
    if (result === undefined || result === null) return NextResponse.next({ headers });
    return addMissing(toNextResponse(result, where), headers);
  };
}

/**
 * {@link rateLimitProxy} under the name of the older convention, for `middleware.ts` (Next.js 15
 * and earlier, or the edge runtime in Next.js 16, where `proxy.ts` is Node.js only).
 *
 * @example middleware.ts
 * ```ts
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { UpstashStore } from "@sluice/redis";
 * import { rateLimitMiddleware } from "@sluice/next";
 * import { Redis } from "@upstash/redis";
 *
 * export const middleware = rateLimitMiddleware({
 *   limiter: new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *   trust: "vercel",
 * });
 *
 * export const config = { matcher: "/api/:path*" };
 * ```
 */
export const rateLimitMiddleware: (options: RateLimitProxyOptions) => RateLimitProxy = rateLimitProxy;
