/**
 * The guard for `proxy.ts` (Next.js 16) and `middleware.ts` (Next.js 15 and earlier, and the
 * edge runtime in 16).
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { type Outcome, describeValue, holdsLeases, isPolicy } from "@sluice/core/adapter";
import { type NextFetchEvent, type NextRequest, NextResponse } from "next/server.js";
import { FORWARDED_HEADERS, encodeForwarded } from "./forward.js";
import { type RateLimitOptions, nextPipeline } from "./options.js";

/** What a proxy (or middleware) function may return: a response, or nothing to continue. */
export type ProxyResult = Response | null | undefined | void;

/** A proxy function as Next.js calls it (the shape of `NextProxy` from `next/server`). */
export type ProxyFunction = (request: NextRequest, event: NextFetchEvent) => ProxyResult | Promise<ProxyResult>;

/**
 * Options of {@link rateLimitProxy}: the common options over `(request, event)` — so
 * `onLimited(request, event, decision)` — plus an existing proxy to run for allowed requests, and
 * the routes that write the headers themselves.
 */
export type RateLimitProxyOptions = RateLimitOptions<[event: NextFetchEvent]> & {
  /**
   * Your own proxy function, run for every request that is allowed (or skipped). Its response —
   * `NextResponse.next()`, a rewrite, a redirect, a response of its own, or nothing (meaning
   * `NextResponse.next()`) — gets the rate-limit headers, unless it already has them.
   */
  proxy?: ProxyFunction;
  /**
   * The requests whose route is wrapped with `withRateLimit` too (two layers on one request):
   * for them the proxy does not write its rate-limit headers on its `NextResponse.next()` — Next.js
   * would send those in place of the route's own, so a 429 from the route would carry the proxy's
   * headers — but hands them to the route in a request header, and the route writes one set with
   * the policies of both layers (one IETF list; the single-policy styles and `Retry-After` from the
   * layer that binds), on its 429 too. `true` for every request the proxy lets through; a function
   * of `(request, event)` to choose. A route that is not wrapped gets no rate-limit headers from a
   * request forwarded this way. Only a request the proxy answers with `NextResponse.next()` (your
   * `proxy` returned nothing) is forwarded; any other response gets the headers as usual.
   * @default false
   * @example
   * ```ts
   * export const proxy = rateLimitProxy({
   *   limiter,
   *   trust: "vercel",
   *   // app/api/hello/route.ts has a limit of its own (withRateLimit)
   *   forwardHeaders: (request) => request.nextUrl.pathname === "/api/hello",
   * });
   * ```
   */
  forwardHeaders?: boolean | ((request: NextRequest, event: NextFetchEvent) => boolean);
};

/**
 * What {@link rateLimitProxy} returns: a function to export as `proxy` from `proxy.ts` (or as
 * `middleware` from `middleware.ts`). It always resolves to a `NextResponse`.
 */
export type RateLimitProxy = (request: NextRequest, event?: NextFetchEvent) => Promise<NextResponse>;

/** `response` as a `NextResponse`; `option` names the callback that answered it (`"proxy"`, `"onLimited"`) in the error. */
function toNextResponse(response: Response, option: "proxy" | "onLimited"): NextResponse {
  if (response instanceof NextResponse) return response;
  if (typeof response !== "object" || response === null || typeof (response as Partial<Response>).status !== "number") {
    throw new SluiceConfigError(`[sluice] [next] ${option} must return a Response, a NextResponse or nothing; got ${describeValue(response)}`, { option });
  }
  if (response.type === "error" || response.status === 0) {
    throw new SluiceConfigError(
      `[sluice] [next] ${option} must return a response with a status; got a network error (Response.error()), which a proxy cannot return`,
      { option },
    );
  }
  // a copy: a plain Response's headers may be immutable (Response.redirect(), a fetch() response)
  return new NextResponse(response.body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The option that holds a concurrency() limit (`"limiter"`, `"tiers.pro"`, `"tiers.pro.limits"`), if one does. */
function concurrencyLimitIn(options: RateLimitProxyOptions): string | undefined {
  const isConcurrency = (policy: unknown) => isPolicy(policy) && holdsLeases(policy);
  const limiter = (options as { limiter?: { policies?: unknown } }).limiter;
  if (Array.isArray(limiter?.policies) && limiter.policies.some(isConcurrency)) return "limiter";
  const tiers = (options as { tiers?: unknown }).tiers;
  if (typeof tiers !== "object" || tiers === null) return undefined;
  for (const [name, entry] of Object.entries(tiers)) {
    const objectForm = typeof entry === "object" && entry !== null && !Array.isArray(entry) && "limits" in entry;
    const limits: unknown = objectForm ? (entry as { limits: unknown }).limits : entry;
    if (Array.isArray(limits) ? limits.some(isConcurrency) : isConcurrency(limits)) return objectForm ? `tiers.${name}.limits` : `tiers.${name}`;
  }
  return undefined;
}

/** Marks the event made up for a call without one. */
const STAND_IN = Symbol("sluice.standInEvent");

/**
 * The event used when the returned function is called without one (a unit test calling
 * `proxy(request)`): `next/server` exports `NextFetchEvent` as a type only, so this is a stand-in
 * whose `waitUntil` passes the promise to the `waitUntil` option, if any (else the promise simply
 * runs: outside Next.js there is no invocation to keep alive).
 */
function standInEvent(request: NextRequest, waitUntil: ((promise: Promise<unknown>) => void) | undefined): NextFetchEvent {
  const event = {
    [STAND_IN]: true,
    sourcePage: request.nextUrl.pathname,
    waitUntil(promise: Promise<unknown>): void {
      waitUntil?.(promise);
    },
  };
  return event as unknown as NextFetchEvent;
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
 * A `concurrency()` limit is refused here (`SluiceConfigError`): a proxy lets the request through
 * to the route and never sees the route's response end, so it could only release the lease at
 * once. Put the concurrency limit on the route handler with {@link withRateLimit}, which holds the
 * lease until the response (or its stream) has been produced.
 *
 * In Next.js 16 `proxy.ts` runs on the Node.js runtime (it cannot be configured); for the edge
 * runtime keep `middleware.ts` ({@link rateLimitMiddleware}). Either way the state belongs in a
 * shared store (`UpstashStore` from `@sluice/redis`) once there is more than one instance: a
 * `MemoryStore` counts per process (per isolate on the edge).
 *
 * Where a route is wrapped with {@link withRateLimit} as well, give `forwardHeaders` for it: the
 * route then answers with one set of rate-limit headers that lists the policies of both layers, so
 * its own 429 carries headers that agree with its body.
 *
 * @param options - `limiter` (or `tiers` + `tier`), `key` (or `trust`), `cost`, `skip`, `headers`,
 *   `onLimited`, `onDecision`, `onCallbackError`, `waitUntil` (see `RateLimitCommonOptions`, and
 *   `TierSettings` in `@sluice/core`), `proxy` and `forwardHeaders`. Callbacks get Next.js's
 *   `(request, event)`, then what Sluice adds: `tier(request, event, key)`,
 *   `onLimited(request, event, decision)`, `onDecision(request, event, decision, info)`.
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
  const waitUntil = options?.waitUntil;
  const { checkNow, delay, finish } = nextPipeline<[event: NextFetchEvent]>(options, {
    where,
    tag: "next",
    params: "request, event",
    request: (request) => request,
    // Next.js's event; without one, the waitUntil option, else the work is awaited
    waitUntil: (_request, event) => (STAND_IN in event ? waitUntil : (promise) => event.waitUntil(promise)),
  });
  const holder = concurrencyLimitIn(options);
  if (holder !== undefined) {
    throw new SluiceConfigError(
      `[sluice] [next] ${holder} must hold no concurrency() limit in a proxy: a lease needs the end of the route's response, which a proxy never sees (it would release the lease at once); put it on the route handler with withRateLimit`,
      { option: holder },
    );
  }
  const inner = options.proxy;
  if (inner !== undefined && typeof inner !== "function") {
    throw new SluiceConfigError(`[sluice] [next] proxy must be a function (request, event) => response or nothing; got ${describeValue(inner)}`, { option: "proxy" });
  }
  const forward = options.forwardHeaders ?? false;
  if (typeof forward !== "boolean" && typeof forward !== "function") {
    throw new SluiceConfigError(`[sluice] [next] forwardHeaders must be true, false or a function (request, event) => boolean; got ${describeValue(forward)}`, {
      option: "forwardHeaders",
    });
  }

  return async function rateLimitProxy(request: NextRequest, event?: NextFetchEvent): Promise<NextResponse> {
    const nextEvent = event ?? standInEvent(request, waitUntil);
    // an in-memory limiter decides in place: awaited only when it answers with a promise
    const checked = checkNow(request, nextEvent);
    const outcome = checked instanceof Promise ? await checked : (checked as Outcome);
    if (outcome.response !== undefined) return toNextResponse(outcome.response, "onLimited");
    if (outcome.decision !== undefined && outcome.decision.delayMs > 0) await delay(outcome);
    const result = inner === undefined ? undefined : await inner(request, nextEvent);
    if (result !== undefined && result !== null) return toNextResponse(await finish(outcome, toNextResponse(result, "proxy")), "proxy");
    // continue to the route; a forwarded request carries the headers in a request header instead
    const forwarding = outcome.headers.length > 0 && (forward === true || (forward !== false && forward(request, nextEvent) === true));
    if (!forwarding && !request.headers.has(FORWARDED_HEADERS)) {
      // without countWhen (and a proxy holds no lease) finish answers in place: no promise to await
      const finished = finish(outcome, NextResponse.next());
      return toNextResponse(finished instanceof Promise ? await finished : finished, "proxy");
    }
    const upstream = new Headers(request.headers);
    // what a client sent under that name never reaches the route
    if (forwarding) upstream.set(FORWARDED_HEADERS, encodeForwarded(outcome.headers));
    else upstream.delete(FORWARDED_HEADERS);
    return toNextResponse(await finish(outcome, NextResponse.next({ request: { headers: upstream } }), forwarding), "proxy");
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
