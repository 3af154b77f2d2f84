/**
 * The options of `withRateLimit()`, as a module Worker writes them: every callback gets the
 * Worker's `(request, env, ctx)` first, then what Sluice adds (`key`, `response`, `decision`,
 * `info`), and the limiter (with tiers, the store) may be a factory of `env`, where the Durable
 * Object binding is. They are core's pipeline options over `[request, env, ctx]`
 * (`PipelineCommonOptions` in `@sluice/core/adapter`, which validates them and gives the options
 * that do not involve the Worker's arguments, such as `trust`, `headers` and `partitionKey`, their
 * documentation); the callbacks and the factories are documented here.
 *
 * @module
 */
import type { Decision, RateLimiter, Store, TierSettings } from "@sluice/core";
import type { CallbackName, DecisionInfo, MaybePromise, PipelineCommonOptions } from "@sluice/core/adapter";

/** A module Worker's arguments. */
export type WorkerArgs<Env> = [request: Request, env: Env, ctx: ExecutionContext];

/** Options every form of `withRateLimit()` takes: `key` (or `trust`), `cost`, `skip`, the headers, and the callbacks, each getting `(request, env, ctx)` first. */
export interface WithRateLimitCommonOptions<Env> extends PipelineCommonOptions<WorkerArgs<Env>> {
  /**
   * The rate-limit key of a request, from `(request, env, ctx)`: an API key, a user id, a
   * session. Must return a non-empty, well-formed string (or a promise of one). Give exactly one
   * of `key` and `trust`.
   * @example
   * ```ts
   * withRateLimit(handler, { limiter, key: (request) => request.headers.get("x-api-key") ?? "anonymous" });
   * ```
   */
  key?: (request: Request, env: Env, ctx: ExecutionContext) => MaybePromise<string>;
  /**
   * Units a request consumes: a positive safe integer, or a function of `(request, env, ctx)`.
   * @default 1
   * @example
   * ```ts
   * withRateLimit(handler, { limiter, trust: "cloudflare", cost: (request) => (request.method === "POST" ? 5 : 1) });
   * ```
   */
  cost?: number | ((request: Request, env: Env, ctx: ExecutionContext) => MaybePromise<number>);
  /**
   * Requests for which this returns `true` are not limited: no decision, no headers, nothing
   * consumed; the handler's `fetch` gets `undefined` as its decision.
   * @default undefined (every request is limited)
   * @example
   * ```ts
   * withRateLimit(handler, { limiter, trust: "cloudflare", skip: (request) => new URL(request.url).pathname === "/health" });
   * ```
   */
  skip?: (request: Request, env: Env, ctx: ExecutionContext) => MaybePromise<boolean>;
  /**
   * Builds the response for a denied request, `(request, env, ctx, decision)`, instead of the
   * RFC 9457 429; the rate-limit headers (and `Retry-After`) are added to it unless it already has
   * them.
   *
   * In dry run (a limiter or tier with `mode: "dry-run"`) it is the report: it is called (and
   * awaited) for every request enforcing would have denied, with `decision.dryRun === true`, and
   * what it returns is ignored: the request goes on to the handler.
   * @default the RFC 9457 `application/problem+json` 429
   * @example
   * ```ts
   * withRateLimit(handler, {
   *   limiter,
   *   trust: "cloudflare",
   *   onLimited: (request, env, ctx, decision) => Response.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, { status: 429 }),
   * });
   * ```
   */
  onLimited?: (request: Request, env: Env, ctx: ExecutionContext, decision: Decision) => MaybePromise<Response>;
  /**
   * Called once for every request that got a decision (never for a skipped one), right after the
   * decision: `(request, env, ctx, decision, info)`, for logs and metrics. `info` holds
   * `keyHash`, `tier` and `route` ({@link DecisionInfo}), never the key itself. What it throws, or
   * a promise it returns that rejects, goes to `onCallbackError`; such a promise is not awaited
   * (hand longer work to `ctx.waitUntil`). `instrumentDecisions()` from `@sluice/otel` is one.
   * @default undefined
   * @example
   * ```ts
   * withRateLimit(handler, {
   *   limiter,
   *   trust: "cloudflare",
   *   onDecision: (request, env, ctx, decision, { route, keyHash }) => console.log(JSON.stringify({ route, keyHash, reason: decision.reason })),
   * });
   * ```
   */
  onDecision?: (request: Request, env: Env, ctx: ExecutionContext, decision: Decision, info: DecisionInfo) => void;
  /**
   * Which served requests count: `(request, env, ctx, response, decision)`, once the handler has
   * answered; when it answers `false` the request's units are given back (`limiter.refund` with its
   * decision: atomic, never more than it charged). The request is still checked up front, so an
   * exhausted key is refused before the handler runs. The refund happens before the response is
   * returned; its rate-limit headers describe the decision before the refund. A `countWhen` that
   * throws or rejects serves the response, counted, and goes to `onCallbackError`.
   * @default undefined (every request counts)
   * @example Count failed logins only
   * ```ts
   * withRateLimit(login, { limiter: loginLimiter, trust: "cloudflare", countWhen: (request, env, ctx, response) => response.status >= 400 });
   * ```
   */
  countWhen?: (request: Request, env: Env, ctx: ExecutionContext, response: Response, decision: Decision) => boolean | Promise<boolean>;
  /**
   * Where an error of `countWhen` or `onDecision` goes: `(request, env, ctx, error, callback)`.
   * The request goes on; the error is not a store failure, so it is not the limiter's
   * `onStoreFailure`. What this throws itself is ignored.
   * @default logs with `console.error`, naming `withRateLimit` and the callback
   * @example
   * ```ts
   * withRateLimit(handler, { limiter, trust: "cloudflare", onCallbackError: (request, env, ctx, error, callback) => console.error({ callback, url: request.url, error }) });
   * ```
   */
  onCallbackError?: (request: Request, env: Env, ctx: ExecutionContext, error: unknown, callback: CallbackName) => void;
}

/** `withRateLimit()` over one limiter. */
export interface WithRateLimitLimiterOptions<Env> extends WithRateLimitCommonOptions<Env> {
  /**
   * The limiter, or — since a Durable Object store needs the namespace binding from `env` — a
   * factory `(env) => RateLimiter`, called once per `env` object (the runtime passes the same one
   * to every request of an isolate) and cached.
   * @example
   * ```ts
   * withRateLimit<Env>(handler, {
   *   limiter: (env) => new RateLimiter({ store: new DurableObjectStore(env.SLUICE), limits: slidingWindow({ limit: 100, window: "1m" }) }),
   *   trust: "cloudflare",
   * });
   * ```
   */
  limiter: RateLimiter | ((env: Env) => RateLimiter);
}

/** `withRateLimit()` with plans (`tiers` + `tier(request, env, ctx, key)`): each tier its own limits and key namespace (see `TierSettings` in `@sluice/core`). */
export interface WithRateLimitTieredOptions<Env> extends WithRateLimitCommonOptions<Env>, Omit<TierSettings, "store"> {
  /**
   * The tier of a request, `(request, env, ctx, key)`: a plan looked up by key (a KV namespace or
   * a database on `env`). Its answers are cached per key for `tierCacheTtlMs`. A name that is not
   * in `tiers` is a `SluiceConfigError` at that request.
   * @example
   * ```ts
   * withRateLimit<Env>(handler, {
   *   tiers: { free: [slidingWindow({ limit: 30, window: "1m" })], pro: [slidingWindow({ limit: 300, window: "1m" })] },
   *   store: (env) => new DurableObjectStore(env.SLUICE),
   *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
   *   tier: async (request, env, ctx, key) => (await env.PLANS.get(key)) ?? "free",
   * });
   * ```
   */
  tier: (request: Request, env: Env, ctx: ExecutionContext, key: string) => MaybePromise<string>;
  /**
   * Where every tier's state lives: a store, or a factory `(env) => Store` (called once per `env`),
   * e.g. `(env) => new DurableObjectStore(env.SLUICE)`.
   * @default a MemoryStore per isolate
   */
  store?: Store | ((env: Env) => Store);
}

/** Options of `withRateLimit()`: `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type WithRateLimitOptions<Env> = WithRateLimitLimiterOptions<Env> | WithRateLimitTieredOptions<Env>;
