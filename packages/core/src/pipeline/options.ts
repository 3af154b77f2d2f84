/**
 * The request pipeline's options, the ones every adapter shares, over `Args`, the framework's
 * arguments. An adapter takes them as they are, with its framework's arguments in place of `Args`,
 * and documents its callbacks in its own package, in its framework's terms (Hono's `c`, a
 * Worker's `request, env, ctx`); what is documented here is their meaning, for `createGuard` and
 * for adapter authors. The shapes an adapter deals in are in `platform.ts`.
 *
 * @module
 */
import type { Policy } from "../algorithms/index.js";
import type { ClientIpTrust, UNKNOWN_CLIENT_KEY } from "../client-ip.js";
import type { DenyCacheOption } from "../deny-cache.js";
import type { ReserveOption } from "../reservations.js";
import type { HeadersOption, PartitionKeyOption } from "../headers.js";
import type { LimiterMode, RateLimiter, StoreErrorMode } from "../limiter/index.js";
import type { Decision, MaybePromise, Store } from "../types.js";

/**
 * Options every adapter takes. `Args` are the framework's arguments, in its order: `[request]` for
 * `createGuard`, `[c]` in Hono, `[request, env, ctx]` in a Worker.
 */
export interface PipelineCommonOptions<Args extends unknown[]> {
  /**
   * The rate-limit key of a request (an API key, a user id, a session), from the framework's
   * arguments. Must return a non-empty, well-formed string. Give exactly one of `key` and `trust`.
   */
  key?: (...args: Args) => MaybePromise<string>;
  /**
   * Key requests by client address, read with `clientIp(request, { trust })`: `"cloudflare"`
   * believes `CF-Connecting-IP`, `"vercel"` believes `x-vercel-forwarded-for` (else `x-real-ip`), a
   * number N believes the N-th address from the right of `X-Forwarded-For` (N trusted proxies in
   * front of the app). No header is believed without it. A request whose address cannot be
   * established is keyed {@link UNKNOWN_CLIENT_KEY} (`"unknown"`): such requests share one quota,
   * so a misconfigured proxy shows up as everyone being limited together, not as nobody being
   * limited. Give exactly one of `key` and `trust`.
   */
  trust?: ClientIpTrust;
  /**
   * With `trust`: IPv6 clients are keyed by this prefix length.
   * @default 64
   */
  ipv6Subnet?: number;
  /**
   * Units a request consumes: a positive safe integer, or a function of the framework's arguments.
   * @default 1
   */
  cost?: number | ((...args: Args) => MaybePromise<number>);
  /** Requests for which this returns `true` are not limited: no decision, no headers, nothing consumed. */
  skip?: (...args: Args) => MaybePromise<boolean>;
  /**
   * Header styles: `"ietf"`, `"draft-7"`, `"draft-6"`, `"legacy"`, a list of them, or `false`.
   * @default ["ietf", "legacy"]
   */
  headers?: HeadersOption;
  /**
   * Adds the draft's `pk` (partition key) parameter to each `"ietf"` list member: a Byte Sequence
   * of the first 12 bytes of SHA-256 of the storage key (prefix, tier and key) — never the key
   * itself. With `{ salt }` the salt is hashed first, so a client cannot confirm a guessed key
   * (an IP address, say) from its `pk`. Off by default.
   * @default false
   * @example
   * ```ts
   * createGuard({ limiter, trust: "cloudflare", partitionKey: { salt: "a secret of yours" } });
   * // RateLimit: "100-per-1m";r=99;t=60;pk=:9xkbI8NXV1w3kM4h:
   * ```
   */
  partitionKey?: PartitionKeyOption;
  /**
   * Builds the response for a denied request instead of the default RFC 9457 429: the framework's
   * arguments, then the decision. The rate-limit headers (and `Retry-After`) are added to it unless
   * it already has them.
   *
   * In dry run (a limiter or tier with `mode: "dry-run"`) it is the report: it is called (and
   * awaited) for every request enforcing would have denied, with `decision.dryRun === true`, and
   * its return value is ignored — the request goes on to the handler. So the `onLimited` you will
   * enforce with can measure first: log or count inside it.
   */
  onLimited?: (...args: [...Args, decision: Decision]) => MaybePromise<Response>;
  /**
   * In dry run (`mode: "dry-run"` on the limiter or the tier), write the rate-limit headers as
   * enforcing would (`RateLimit`, `X-RateLimit-*`, …, by `headers`) — never `Retry-After`, since
   * the request is served. Off by default: a limit being measured stays invisible to clients.
   * No effect on an enforcing limiter.
   * @default false
   * @example
   * ```ts
   * const limiter = new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }), mode: "dry-run" });
   * createGuard({ limiter, trust: "cloudflare", dryRunHeaders: true }); // clients see RateLimit headers, never a 429
   * ```
   */
  dryRunHeaders?: boolean;
  /**
   * Called once for every request that got a decision (never for a skipped one), right after the
   * decision and before the response is built: for logs and metrics. It gets the framework's
   * arguments, then the decision and a {@link DecisionInfo} (`keyHash`, `tier`, `route`) — never
   * the key itself. It cannot break the request: what it throws, or a promise it returns that
   * rejects, goes to {@link PipelineCommonOptions.onCallbackError}, and such a promise is not
   * awaited (keep the synchronous part short). A function that reads its last two arguments fits
   * every adapter (`instrumentDecisions()` from `@sluice/otel` is one).
   * @default undefined
   * @example
   * ```ts
   * createGuard({
   *   limiter,
   *   trust: "cloudflare",
   *   onDecision: (request, decision, { keyHash, tier, route }) =>
   *     console.log(JSON.stringify({ route, keyHash, tier, allowed: decision.allowed, reason: decision.reason, policy: decision.policy })),
   * });
   * // {"route":"GET /api/hello","keyHash":"9xkbI8NXV1w3kM4h","allowed":true,"reason":"ok","policy":"100-per-1m"}
   * ```
   */
  onDecision?: (...args: [...Args, decision: Decision, info: DecisionInfo]) => void;
  /**
   * Which served requests count: called with the framework's arguments, then the handler's
   * response and the decision; when it answers `false` the request's units are given back
   * (`limiter.refund` with its decision: atomic, never more than it charged). The request is still
   * checked up front, so an exhausted key is refused before the handler runs. The generalised
   * `skipSuccessfulRequests`/`skipFailedRequests`. The refund happens before the response is
   * returned (one store round trip, only for requests that do not count); a failing refund is
   * reported to the limiter's `onStoreFailure` and the response goes out anyway. The response's
   * rate-limit headers describe the decision before the refund.
   *
   * A `countWhen` that throws (or rejects) cannot cost the client its response: the handler's
   * response is served, the request counts (nothing is refunded), and the error goes to
   * {@link PipelineCommonOptions.onCallbackError}.
   * @example Count failed logins only
   * ```ts
   * createGuard({ limiter: loginLimiter, trust: "cloudflare", countWhen: (request, response) => response.status >= 400 });
   * ```
   */
  countWhen?: (...args: [...Args, response: Response, decision: Decision]) => boolean | Promise<boolean>;
  /**
   * Where an error of a callback that only observes the request goes — `countWhen` and
   * `onDecision`, which must never turn a served request into an error: the framework's
   * arguments, then the error and the callback's name. It is not a store failure, so it is not the
   * limiter's `onStoreFailure`. What it throws itself is ignored.
   * @default logs with `console.error`, naming the adapter and the callback
   * @example
   * ```ts
   * createGuard({
   *   limiter,
   *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
   *   countWhen: (request, response) => response.status >= 400,
   *   onCallbackError: (request, error, callback) => logger.error({ callback, url: request.url, error }),
   * });
   * ```
   */
  onCallbackError?: (...args: [...Args, error: unknown, callback: CallbackName]) => void;
}

/** The callbacks whose errors go to {@link PipelineCommonOptions.onCallbackError}. */
export type CallbackName = "countWhen" | "onDecision";

/**
 * What {@link PipelineCommonOptions.onDecision} learns about a decided request besides the
 * decision. `keyHash` and `route` are computed when first read, so a callback that does not read
 * them costs nothing for them.
 */
export interface DecisionInfo {
  /**
   * A short, non-reversible hash of the request's storage key (prefix, tier and key): 16 base64
   * characters, the first 12 bytes of SHA-256 — the `pk` of the IETF headers without its colons,
   * hashed with the `partitionKey` salt when there is one. The same client gives the same hash, so
   * logs can be grouped by client without holding its API key or address; with a salt, a guessed
   * key (an IP address, say) cannot be confirmed from it.
   */
  readonly keyHash: string;
  /** The tier (plan) that decided, with `tiers`; `undefined` with a plain `limiter`. */
  readonly tier: string | undefined;
  /** The request's method and URL path, e.g. `"GET /api/hello"` (no query string: it may hold secrets). */
  readonly route: string;
}

/** Over one limiter. */
export interface PipelineLimiterOptions<Args extends unknown[]> extends PipelineCommonOptions<Args> {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/**
 * One tier in the object form: its limits and how they apply.
 *
 * @example
 * ```ts
 * tiers: {
 *   free: [slidingWindow({ limit: 30, window: "1m" })],
 *   pro: { limits: [slidingWindow({ limit: 300, window: "1m" })], mode: "dry-run" }, // measured, not enforced yet
 * }
 * ```
 */
export interface TierConfig {
  /** The tier's limits: one policy or several (all or nothing). */
  limits: Policy | readonly Policy[];
  /**
   * `"dry-run"` measures this tier's limits without enforcing them (see `RateLimiterOptions.mode`).
   * @default the `mode` of the tiered options, else "enforce"
   * @example
   * ```ts
   * tiers: { free: [...], pro: { limits: [fixedWindow({ limit: 10_000, window: "1d" })], mode: "dry-run" } }
   * ```
   */
  mode?: LimiterMode;
}

/** The settings of a tiered pipeline that do not depend on the framework. */
export interface TierSettings {
  /**
   * Tier name → its limits, e.g. `{ free: [...], pro: [...], enterprise: [...] }`; a tier may
   * also be a {@link TierConfig}, `{ limits, mode }`, to run it in dry run.
   */
  tiers: Readonly<Record<string, Policy | readonly Policy[] | TierConfig>>;
  /**
   * `"dry-run"` for every tier that does not set its own `mode` (see `RateLimiterOptions.mode`).
   * @default "enforce"
   * @example
   * ```ts
   * createGuard({ tiers, tier, key, mode: "dry-run", onLimited: (request, d) => { log(d); return new Response(null, { status: 429 }); } });
   * ```
   */
  mode?: LimiterMode;
  /**
   * Each tier's deny cache (see `RateLimiterOptions.denyCache`): per tier, so `maxKeys` bounds
   * each tier's cache.
   * @default on for every store but MemoryStore
   * @example
   * ```ts
   * createGuard({ tiers, tier, key, store: new UpstashStore(Redis.fromEnv()), denyCache: { maxKeys: 5_000 } });
   * ```
   */
  denyCache?: DenyCacheOption;
  /**
   * Each tier's reservations (see `RateLimiterOptions.reserve`): a hot key of a tier is decided
   * from units its limiter reserved ahead, without a round trip each. Off by default.
   * @default false
   * @example
   * ```ts
   * createGuard({ tiers, tier, key, store: new UpstashStore(Redis.fromEnv()), reserve: true });
   * ```
   */
  reserve?: ReserveOption;
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
   * The key namespace; each tier keeps its counters apart under it (`{ prefix, tier }`).
   * @default "sluice"
   */
  prefix?: string;
  /**
   * On a store failure: `"fallback"`, `"allow"` or `"deny"` (see `RateLimiter`).
   * @default "fallback"
   */
  onStoreError?: StoreErrorMode;
  /**
   * Milliseconds a store call may take before it counts as a failure; `false` for no timeout.
   * @default 1000
   */
  timeoutMs?: number | false;
  /** Called with the error whenever a store call fails or times out. */
  onStoreFailure?: (error: unknown) => void;
}

/** With plans: each tier its own limits and its own key namespace. */
export interface PipelineTieredOptions<Args extends unknown[]> extends PipelineCommonOptions<Args>, TierSettings {
  /**
   * The tier of a request (a database lookup, say): the framework's arguments, then the key. Its
   * answers are cached per key for `tierCacheTtlMs`. A name that is not in `tiers` is a
   * `SluiceConfigError` at the request that names it.
   */
  tier: (...args: [...Args, key: string]) => MaybePromise<string>;
}

/** Options of {@link createPipeline}: `limiter`, or `tiers` + `tier`; and `key`, or `trust`. */
export type PipelineOptions<Args extends unknown[]> = PipelineLimiterOptions<Args> | PipelineTieredOptions<Args>;
