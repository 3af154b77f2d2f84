/**
 * The options both Next.js entry points share, as a Next.js app writes them, and their request
 * pipeline. Every callback gets Next.js's arguments first — `(request, context)` in a route
 * handler, `(request, event)` in a proxy — then what Sluice adds (`key`, `response`, `decision`,
 * `info`). They are core's pipeline options over those arguments (`PipelineCommonOptions` in
 * `@sluice/core/adapter`, which validates them and gives the options that do not involve them,
 * such as `trust`, `headers` and `partitionKey`, their documentation); the callbacks are
 * documented here.
 *
 * @module
 */
import { type Decision, type RateLimiter, SluiceConfigError, UNKNOWN_CLIENT_KEY } from "@sluice/core";
import {
  type CallbackName,
  type DecisionInfo,
  type MaybePromise,
  type Pipeline,
  type PipelineCommonOptions,
  type PipelineOptions,
  type Platform,
  type TierSettings,
  createPipeline,
  describeValue,
} from "@sluice/core/adapter";
import type { NextRequest } from "next/server.js";

export { UNKNOWN_CLIENT_KEY };

/** Next.js's arguments: the request, then `Extra` (the `NextFetchEvent` in a proxy, the route context in a route handler). */
export type NextArgs<Extra extends unknown[]> = [request: NextRequest, ...extra: Extra];

/**
 * Options every form takes — `key` (or `trust`), `cost`, `skip`, the headers, `waitUntil` and the
 * callbacks — over Next.js's arguments: `(request, context)` in a route handler, `(request, event)`
 * in a proxy, with what Sluice adds after them: `onLimited(request, context, decision)`,
 * `countWhen(request, context, response, decision)`, `onDecision(request, context, decision, info)`.
 */
export interface RateLimitCommonOptions<Extra extends unknown[] = []> extends PipelineCommonOptions<NextArgs<Extra>> {
  /**
   * The rate-limit key of a request: `(request, context)` in a route handler, `(request, event)`
   * in a proxy. An API key, a user id, a session, a route parameter. Must return a non-empty,
   * well-formed string (or a promise of one). Give exactly one of `key` and `trust`.
   * @example
   * ```ts
   * rateLimitProxy({ limiter, key: (request) => request.headers.get("x-api-key") ?? "anonymous" });
   * ```
   */
  key?: (...args: NextArgs<Extra>) => MaybePromise<string>;
  /**
   * Units a request consumes: a positive safe integer, or a function of Next.js's arguments.
   * @default 1
   * @example
   * ```ts
   * rateLimitProxy({ limiter, trust: "vercel", cost: (request) => (request.nextUrl.pathname.startsWith("/api/search") ? 5 : 1) });
   * ```
   */
  cost?: number | ((...args: NextArgs<Extra>) => MaybePromise<number>);
  /**
   * Requests for which this returns `true` are not limited: no decision, no headers, nothing
   * consumed (a route handler gets `undefined` as its decision).
   * @default undefined (every request is limited)
   * @example
   * ```ts
   * rateLimitProxy({ limiter, trust: "vercel", skip: (request) => request.method === "OPTIONS" });
   * ```
   */
  skip?: (...args: NextArgs<Extra>) => MaybePromise<boolean>;
  /**
   * Builds the response for a denied request instead of the RFC 9457 429:
   * `(request, context, decision)` in a route handler, `(request, event, decision)` in a proxy.
   * The rate-limit headers (and `Retry-After`) are added to it unless it already has them.
   *
   * In dry run (a limiter or tier with `mode: "dry-run"`) it is the report: it is called (and
   * awaited) for every request enforcing would have denied, with `decision.dryRun === true`, and
   * what it returns is ignored: the request goes on.
   * @default the RFC 9457 `application/problem+json` 429
   * @example
   * ```ts
   * rateLimitProxy({
   *   limiter,
   *   trust: "vercel",
   *   onLimited: (request, event, decision) => NextResponse.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, { status: 429 }),
   * });
   * ```
   */
  onLimited?: (...args: [...NextArgs<Extra>, decision: Decision]) => MaybePromise<Response>;
  /**
   * Called once for every request that got a decision (never for a skipped one), right after the
   * decision, for logs and metrics: `(request, context, decision, info)` in a route handler,
   * `(request, event, decision, info)` in a proxy. `info` holds `keyHash`, `tier` and `route`
   * ({@link DecisionInfo}), never the key itself. What it throws, or a promise it returns that
   * rejects, goes to `onCallbackError`; such a promise is not awaited. `instrumentDecisions()`
   * from `@sluice/otel` is one.
   * @default undefined
   * @example
   * ```ts
   * rateLimitProxy({
   *   limiter,
   *   trust: "vercel",
   *   onDecision: (request, event, decision, { route, keyHash }) => console.log(JSON.stringify({ route, keyHash, reason: decision.reason })),
   * });
   * ```
   */
  onDecision?: (...args: [...NextArgs<Extra>, decision: Decision, info: DecisionInfo]) => void;
  /**
   * Which served requests count: `(request, context, response, decision)` in a route handler,
   * once it has answered; when it answers `false` the request's units are given back
   * (`limiter.refund` with its decision: atomic, never more than it charged). The request is still
   * checked up front, so an exhausted key is refused before the handler runs. The refund happens
   * before the response is returned; its rate-limit headers describe the decision before the
   * refund. A `countWhen` that throws or rejects serves the response, counted, and goes to
   * `onCallbackError`. In a proxy the response is the proxy's own (`NextResponse.next()` or your
   * `proxy`'s), never the route's: count by the route's response with `withRateLimit`.
   * @default undefined (every request counts)
   * @example Count failed logins only
   * ```ts
   * export const POST = withRateLimit(login, { limiter: loginLimiter, trust: "vercel", countWhen: (request, context, response) => response.status >= 400 });
   * ```
   */
  countWhen?: (...args: [...NextArgs<Extra>, response: Response, decision: Decision]) => boolean | Promise<boolean>;
  /**
   * Where an error of `countWhen` or `onDecision` goes: Next.js's arguments, then the error and
   * the callback's name. The request goes on; the error is not a store failure, so it is not the
   * limiter's `onStoreFailure`. What this throws itself is ignored.
   * @default logs with `console.error`, naming the entry point (`withRateLimit`, `rateLimitProxy`) and the callback
   * @example
   * ```ts
   * rateLimitProxy({ limiter, trust: "vercel", onCallbackError: (request, event, error, callback) => console.error({ callback, url: request.url, error }) });
   * ```
   */
  onCallbackError?: (...args: [...NextArgs<Extra>, error: unknown, callback: CallbackName]) => void;
  /**
   * Where the decision's background work (`decision.pending`: analytics, sync) goes so the
   * response need not wait for it: pass `after` from `next/server`. A proxy called by Next.js uses
   * its event's `waitUntil` instead.
   * @default undefined (the work is awaited before the response is returned)
   */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** One `RateLimiter` for every request. */
export interface RateLimitLimiterOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra> {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/** Plans: each tier its own limits and its own key namespace (see `TierSettings` in `@sluice/core`). */
export interface RateLimitTieredOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra>, TierSettings {
  /**
   * The tier of a request, `(request, context, key)` in a route handler, `(request, event, key)`
   * in a proxy: a plan looked up by key. Its answers are cached per key for `tierCacheTtlMs`. A
   * name that is not in `tiers` is a `SluiceConfigError` at that request.
   * @example
   * ```ts
   * rateLimitProxy({
   *   tiers: { free: [slidingWindow({ limit: 30, window: "1m" })], pro: [slidingWindow({ limit: 300, window: "1m" })] },
   *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
   *   tier: async (request, event, key) => (await db.plan(key)) ?? "free",
   * });
   * ```
   */
  tier: (...args: [...NextArgs<Extra>, key: string]) => MaybePromise<string>;
}

/** `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type RateLimitOptions<Extra extends unknown[] = []> = RateLimitLimiterOptions<Extra> | RateLimitTieredOptions<Extra>;

/** Validates the options (throwing `SluiceConfigError` naming the option) and builds the pipeline. */
export function nextPipeline<Extra extends unknown[]>(options: RateLimitOptions<Extra>, platform: Platform<NextArgs<Extra>>): Pipeline<NextArgs<Extra>> {
  const waitUntil = (options as Partial<RateLimitCommonOptions<Extra>> | null | undefined)?.waitUntil;
  if (waitUntil !== undefined && typeof waitUntil !== "function") {
    throw new SluiceConfigError(`[sluice] [next] waitUntil must be a function; got ${describeValue(waitUntil)}`, { option: "waitUntil" });
  }
  return createPipeline(options as PipelineOptions<NextArgs<Extra>>, platform);
}
