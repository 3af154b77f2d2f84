/**
 * The options of `rateLimiter()`, as a Hono app writes them: every callback gets the Hono
 * `Context` first, `c`, then what Sluice adds (`key`, `response`, `decision`, `info`). They are
 * core's pipeline options over `[c]` (`PipelineCommonOptions` in `@sluice/core/adapter`, which
 * validates them and gives the options that do not involve `c`, such as `trust`, `headers` and
 * `partitionKey`, their documentation); the callbacks are documented here, in Hono's terms.
 *
 * @module
 */
import type { Decision, RateLimiter, TierSettings } from "@sluice/core";
import type { CallbackName, DecisionInfo, MaybePromise, PipelineCommonOptions } from "@sluice/core/adapter";
import type { Context, Env } from "hono";

/** Options every form of `rateLimiter()` takes: `key` (or `trust`), `cost`, `skip`, the headers, and the callbacks, each getting `c` first. */
export interface RateLimiterCommonOptions<E extends Env = Env> extends PipelineCommonOptions<[c: Context<E>]> {
  /**
   * The rate-limit key of a request, read from `c`: an API key, a user id, a session. Must return
   * a non-empty, well-formed string (or a promise of one). Give exactly one of `key` and `trust`.
   * @example
   * ```ts
   * rateLimiter({ limiter, key: (c) => c.req.header("x-api-key") ?? "anonymous" });
   * ```
   */
  key?: (c: Context<E>) => MaybePromise<string>;
  /**
   * Units a request consumes: a positive safe integer, or a function of `c`.
   * @default 1
   * @example
   * ```ts
   * rateLimiter({ limiter, trust: "cloudflare", cost: (c) => (c.req.path.startsWith("/api/search") ? 5 : 1) });
   * ```
   */
  cost?: number | ((c: Context<E>) => MaybePromise<number>);
  /**
   * Requests for which this returns `true` are not limited: no decision, no headers, nothing
   * consumed, and `c.get("rateLimit")` stays `undefined`.
   * @default undefined (every request is limited)
   * @example
   * ```ts
   * rateLimiter({ limiter, trust: "cloudflare", skip: (c) => c.req.method === "OPTIONS" });
   * ```
   */
  skip?: (c: Context<E>) => MaybePromise<boolean>;
  /**
   * Builds the response for a denied request, `(c, decision)`, instead of the RFC 9457 429; the
   * rate-limit headers (and `Retry-After`) are added to it unless it already has them.
   *
   * In dry run (a limiter or tier with `mode: "dry-run"`) it is the report: it is called (and
   * awaited) for every request enforcing would have denied, with `decision.dryRun === true`, and
   * what it returns is ignored: the request goes on to the handler.
   * @default the RFC 9457 `application/problem+json` 429
   * @example
   * ```ts
   * rateLimiter({
   *   limiter,
   *   trust: "cloudflare",
   *   onLimited: (c, decision) => c.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, 429),
   * });
   * ```
   */
  onLimited?: (c: Context<E>, decision: Decision) => MaybePromise<Response>;
  /**
   * Called once for every request that got a decision (never for a skipped one), right after the
   * decision: `(c, decision, info)`, for logs and metrics. `info` holds `keyHash`, `tier` and
   * `route` ({@link DecisionInfo}), never the key itself. What it throws, or a promise it returns
   * that rejects, goes to `onCallbackError`; such a promise is not awaited.
   * `instrumentDecisions()` from `@sluice/otel` is one.
   * @default undefined
   * @example
   * ```ts
   * rateLimiter({
   *   limiter,
   *   trust: "cloudflare",
   *   onDecision: (c, decision, { route, keyHash }) => console.log(JSON.stringify({ route, keyHash, reason: decision.reason })),
   * });
   * ```
   */
  onDecision?: (c: Context<E>, decision: Decision, info: DecisionInfo) => void;
  /**
   * Which served requests count: `(c, response, decision)`, once the handler has answered; when
   * it answers `false` the request's units are given back (`limiter.refund` with its decision:
   * atomic, never more than it charged). The request is still checked up front, so an exhausted
   * key is refused before the handler runs. The refund happens before the response goes out; its
   * rate-limit headers describe the decision before the refund. A `countWhen` that throws or
   * rejects serves the response, counted, and goes to `onCallbackError`.
   * @default undefined (every request counts)
   * @example Count failed logins only
   * ```ts
   * app.post("/login", rateLimiter({ limiter: loginLimiter, trust: "cloudflare", countWhen: (c, response) => response.status >= 400 }));
   * ```
   */
  countWhen?: (c: Context<E>, response: Response, decision: Decision) => boolean | Promise<boolean>;
  /**
   * Where an error of `countWhen` or `onDecision` goes: `(c, error, callback)`. The request goes
   * on; the error is not a store failure, so it is not the limiter's `onStoreFailure`. What this
   * throws itself is ignored.
   * @default logs with `console.error`, naming `rateLimiter` and the callback
   * @example
   * ```ts
   * rateLimiter({ limiter, trust: "cloudflare", onCallbackError: (c, error, callback) => console.error({ callback, path: c.req.path, error }) });
   * ```
   */
  onCallbackError?: (c: Context<E>, error: unknown, callback: CallbackName) => void;
}

/** `rateLimiter()` over one `RateLimiter`. */
export interface RateLimiterLimiterOptions<E extends Env = Env> extends RateLimiterCommonOptions<E> {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/** `rateLimiter()` with plans: `tiers` + `tier(c, key)`, each tier its own limits and its own key namespace (see `TierSettings` in `@sluice/core`). */
export interface RateLimiterTieredOptions<E extends Env = Env> extends RateLimiterCommonOptions<E>, TierSettings {
  /**
   * The tier of a request, `(c, key)`: a plan looked up by key (a database, a KV namespace on
   * `c.env`). Its answers are cached per key for `tierCacheTtlMs`. A name that is not in `tiers`
   * is a `SluiceConfigError` at that request (a 500 through `app.onError`).
   * @example
   * ```ts
   * rateLimiter<{ Bindings: { PLANS: KVNamespace } }>({
   *   tiers: { free: [slidingWindow({ limit: 30, window: "1m" })], pro: [slidingWindow({ limit: 300, window: "1m" })] },
   *   key: (c) => c.req.header("x-api-key") ?? "anonymous",
   *   tier: async (c, key) => (await c.env.PLANS.get(key)) ?? "free",
   * });
   * ```
   */
  tier: (c: Context<E>, key: string) => MaybePromise<string>;
}

/** Options of `rateLimiter()`: `limiter`, or `tiers` + `tier`; and `key`, or `trust`. */
export type HonoRateLimiterOptions<E extends Env = Env> = RateLimiterLimiterOptions<E> | RateLimiterTieredOptions<E>;
