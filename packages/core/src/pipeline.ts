/**
 * The request pipeline, written once for every adapter: key the request (`key`, or the client
 * address with `trust`), `skip` it or not, find its tier (cached), price it (`cost`), decide (the
 * limiter's deny cache may answer without a store round trip), hand the decision's background work
 * to the platform's `waitUntil`, build the 429 (or `onLimited`'s response), wait `delayMs` when a
 * shaping policy asks for it, merge the rate-limit headers into the handler's response, and free the
 * request's concurrency lease (a `concurrency()` limit) once the response has been produced. A
 * decision from a dry-run limiter (`dryRun: true`) is never enforced: no 429, no wait, headers
 * only with `dryRunHeaders`, and a would-be denial goes to `onLimited` as a report. Every option is
 * validated here, once.
 *
 * An adapter describes its framework's arguments (a {@link Platform}) and calls
 * {@link Pipeline.handle}, or {@link Pipeline.check} and {@link Pipeline.finish} around its own
 * `next()`. One callback convention everywhere: the framework's own arguments first, in its own
 * order, then what Sluice adds (`key`, then `decision`).
 *
 * @module
 */
import { type Policy, isPolicy, validateName } from "./algorithms.js";
import { type ClientIpTrust, UNKNOWN_CLIENT_KEY, clientIp, validateClientIpOptions } from "./client-ip.js";
import { SluiceConfigError, SluiceInputError, describe } from "./errors.js";
import {
  type HeaderStyle,
  type HeaderWriter,
  type HeadersOption,
  type PartitionKeyOption,
  compileRateLimitHeaders,
  partitionKeyOf,
  resolveHeaderStyles,
  resolvePartitionKey,
} from "./headers.js";
import { assertKey, storageKey } from "./keys.js";
import { type DenyCacheOption, resolveDenyCache } from "./deny-cache.js";
import { type LimitOptions, type LimiterMode, RateLimiter, type StoreErrorMode, limitNow, toDecision } from "./limiter.js";
import { MemoryStore } from "./memory-store.js";
import { addRateLimitHeaders, limitedResponse } from "./response.js";
import type { Decision, MaybePromise, Store } from "./types.js";

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
   * decision and before the response is built: for logs and metrics. It gets the decision and a
   * {@link DecisionInfo} (`keyHash`, `tier`, `route`) — never the key itself. It cannot break the
   * request: what it throws, or a promise it returns that rejects, is swallowed, and such a promise
   * is not awaited (keep the synchronous part short). The same function fits every adapter
   * (`instrumentDecisions()` from `@sluice/otel` is one).
   * @default undefined
   * @example
   * ```ts
   * createGuard({
   *   limiter,
   *   trust: "cloudflare",
   *   onDecision: (decision, { keyHash, tier, route }) =>
   *     console.log(JSON.stringify({ route, keyHash, tier, allowed: decision.allowed, reason: decision.reason, policy: decision.policy })),
   * });
   * // {"route":"GET /api/hello","keyHash":"9xkbI8NXV1w3kM4h","allowed":true,"reason":"ok","policy":"100-per-1m"}
   * ```
   */
  onDecision?: (decision: Decision, info: DecisionInfo) => void;
  /**
   * Which served requests count: called with the handler's response; when it answers `false`
   * the request's units are given back (`limiter.refund` with its decision: atomic, never more
   * than it charged). The request is still checked up front, so an exhausted key is refused before
   * the handler runs. The generalised `skipSuccessfulRequests`/`skipFailedRequests`. The refund
   * happens before the response is returned (one store round trip, only for requests that do not
   * count); a failing refund is reported to the limiter's `onStoreFailure` and the response goes
   * out anyway. The response's rate-limit headers describe the decision before the refund.
   * @example Count failed logins only
   * ```ts
   * rateLimiter({ limiter: loginLimiter, trust: "cloudflare", countWhen: (response) => response.status >= 400 });
   * ```
   */
  countWhen?: (response: Response, decision: Decision) => boolean | Promise<boolean>;
}

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

/** What an adapter tells the pipeline about its framework. */
export interface Platform<Args extends unknown[]> {
  /** The adapter's entry point, e.g. `"rateLimiter"`: configuration errors start with it. */
  where: string;
  /**
   * The framework's arguments as messages should write them, e.g. `"c"` or `"request, env, ctx"`.
   * @default "request"
   */
  params?: string;
  /** The Fetch `Request` among the framework's arguments (read by `trust`). */
  request(...args: Args): Request;
  /**
   * Where the decision's background work (`decision.pending`) goes for this request: the
   * platform's `waitUntil`, or `undefined` to await it before answering (so it is never lost).
   * Without this hook it is awaited.
   */
  waitUntil?(...args: Args): ((promise: Promise<unknown>) => void) | undefined;
}

/** Rate-limit headers as `[name, value]` pairs, in the order they were written. */
export type HeaderList = [name: string, value: string][];

/** What {@link Pipeline.check} found for one request. */
export interface Outcome {
  /** The decision; `undefined` when `skip` said so. In dry run it may be a denial (`dryRun: true`) with no `response`. */
  decision: Decision | undefined;
  /** The request's rate-limit key; `undefined` when skipped. */
  key: string | undefined;
  /** The limiter that decided (the tier's, with `tiers`); `undefined` when skipped. */
  limiter: RateLimiter | undefined;
  /** The rate-limit headers for the response (empty when skipped). */
  headers: HeaderList;
  /** The response to send instead of calling the handler: the 429, or `onLimited`'s. `undefined` when allowed, and always in dry run. */
  response: Response | undefined;
}

/** The request flow of one adapter. Its methods need no `this`. */
export interface Pipeline<Args extends unknown[]> {
  /** Skip, key, tier, cost, decision, `pending` to `waitUntil`, headers and the 429. */
  check(...args: Args): Promise<Outcome>;
  /**
   * {@link Pipeline.check} without the promise when every step answers in place (synchronous
   * `skip`, key, tier and cost, and a store that answers in place such as MemoryStore): then the
   * outcome itself, else a promise of it. What `check` would reject with may be thrown. For an
   * adapter on a hot path: a request on an in-memory limiter is then decided without a microtask
   * turn.
   */
  checkNow(...args: Args): MaybePromise<Outcome>;
  /** Waits the decision's `delayMs` (a shaping `leakyBucket` asks requests to wait before being served). */
  delay(outcome: Outcome): Promise<void>;
  /**
   * The handler's response with the rate-limit headers: headers it already has win; a response
   * with immutable headers (`Response.redirect()`, a `fetch()` response) is copied; a network
   * error (`Response.error()`) is returned as it is. Anything but a response is a `TypeError`.
   * With `countWhen`, a request that should not count is refunded first (then it returns a promise).
   *
   * When the decision holds a concurrency lease (`decision.lease`), the slot is freed once the
   * response has been produced: a response with a body is returned as a copy whose body is the
   * handler's, passed through, releasing when it ends, fails or is cancelled (so the client sees
   * the end of the body only after the slot is free); a response without a body releases at once
   * (then it returns a promise). A failing release goes to the limiter's `onStoreFailure` (the slot
   * then frees when its lease expires). Without a lease nothing is wrapped.
   *
   * `headersWritten: true` skips the headers: for an adapter that has already put them where the
   * response will be written (Hono on `@hono/node-server` sets them on Node's `ServerResponse`).
   */
  finish(outcome: Outcome, response: Response, headersWritten?: boolean): MaybePromise<Response>;
  /**
   * Frees the concurrency lease of `outcome`'s decision, if it holds one (`decision.lease`); never
   * rejects (a failing release goes to the limiter's `onStoreFailure`). For an adapter whose handler
   * threw before there was a response to `finish`.
   */
  release(outcome: Outcome): Promise<void>;
  /**
   * `check`, then the 429 or (after `delay`) `next(decision)`, then `finish`: a whole fetch-style
   * request. A concurrency lease is freed when the response's body ends, or at once if `next`
   * throws.
   */
  handle(args: Args, next: (decision: Decision | undefined) => MaybePromise<Response>): Promise<Response>;
}

interface Target {
  limiter: RateLimiter;
  /** The header writer for this limiter's policies, compiled at its first request. */
  write?: HeaderWriter;
}

function targetOf(limiter: RateLimiter): Target {
  return { limiter };
}

/** Whether a callback answered with a promise (or any thenable) rather than a value. */
function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

/** The outcome of a request `skip` said not to limit. */
function skippedOutcome(): Outcome {
  return { decision: undefined, key: undefined, limiter: undefined, headers: [], response: undefined };
}

/** The limit options of what a `cost` function answered. */
function costOptions(units: number): LimitOptions {
  // `{ cost: undefined }` would mean the default, 1: a cost function must answer a number
  if (units === undefined) throw new SluiceInputError("cost must be a positive safe integer; got undefined");
  return { cost: units };
}

function isTarget<T extends object>(value: T | Promise<T>): value is T {
  return typeof (value as { then?: unknown }).then !== "function";
}

/**
 * The sink every header writer writes into: one object for the whole process, pointed at the
 * request's list for the duration of a (synchronous) write, so a request allocates no sink and no
 * closure, only its list and its header values.
 */
const listSink = {
  list: [] as HeaderList,
  /** Dry run: never `Retry-After` (the request is served). */
  served: false,
  set(name: string, value: string): void {
    if (this.served && name === "Retry-After") return;
    this.list.push([name, value]);
  },
};

/** Runs `write` into `headers` (synchronously; see {@link listSink}). */
function writeInto(write: HeaderWriter, headers: HeaderList, decision: Decision, pk: string | undefined, served: boolean): void {
  listSink.list = headers;
  listSink.served = served;
  try {
    write(listSink, decision, pk);
  } finally {
    listSink.list = NO_HEADERS;
  }
}

/** What {@link listSink} points at between writes (never written to). */
const NO_HEADERS: HeaderList = [];

function requireFunction(value: unknown, option: string, optional: boolean): void {
  if (value === undefined && optional) return;
  if (typeof value !== "function") throw new SluiceConfigError(`${option} must be a function; got ${describe(value)}`);
}

function isResponse(value: unknown): value is Response {
  return typeof value === "object" && value !== null && typeof (value as Partial<Response>).status === "number";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const NO_DELAY: Promise<void> = Promise.resolve();

let noWork: Promise<void> | undefined;
/**
 * Whether a decision carries background work: most share the limiter's one resolved `pending`,
 * and handing that to `waitUntil` (or awaiting it) would only cost time.
 */
function hasWork(pending: Promise<void>): boolean {
  noWork ??= toDecision({ now: 0, policies: [{ policy: "-", allowed: true, limit: 1, remaining: 1, resetAt: 0, retryAfterMs: 0, delayMs: 0, refillAt: 0 }] }).pending;
  return pending !== noWork;
}

/** Calls `onDecision`; nothing it throws or rejects with reaches the request. */
function report(onDecision: (decision: Decision, info: DecisionInfo) => void, decision: Decision, info: DecisionInfo): void {
  try {
    const done: unknown = onDecision(decision, info);
    if (typeof (done as { then?: unknown } | undefined)?.then === "function") (done as Promise<unknown>).then(undefined, () => {});
  } catch {
    // a failing logger must not turn a decision into an exception
  }
}

/** The {@link DecisionInfo} of one request; `keyHash` and `route` are computed at their first read. */
function decisionInfo(request: () => Request, limiter: RateLimiter, key: string, salt: string | undefined): DecisionInfo {
  let keyHash: string | undefined;
  let route: string | undefined;
  return {
    get keyHash() {
      return (keyHash ??= partitionKeyOf(storageKey(limiter, key), salt).slice(1, -1));
    },
    tier: limiter.tier,
    get route() {
      if (route === undefined) {
        const r = request();
        route = `${r.method} ${new URL(r.url).pathname}`;
      }
      return route;
    },
  };
}

/** Formats a value for an adapter's own error messages: strings quoted, anything else as written in code. */
export const describeValue: (value: unknown) => string = describe;

/**
 * Builds an adapter's request pipeline. Every option is validated now, synchronously:
 * misconfiguration throws `SluiceConfigError` naming the option, prefixed with `platform.where`.
 *
 * @example A framework whose handlers get `(request, env, ctx)`
 * ```ts
 * const pipeline = createPipeline<[request: Request, env: Env, ctx: ExecutionContext]>(options, {
 *   where: "withRateLimit",
 *   params: "request, env, ctx",
 *   request: (request) => request,
 *   waitUntil: (_request, _env, ctx) => (promise) => ctx.waitUntil(promise),
 * });
 * return pipeline.handle([request, env, ctx], (decision) => handler(request, env, ctx, decision));
 * ```
 */
export function createPipeline<Args extends unknown[]>(options: PipelineOptions<Args>, platform: Platform<Args>): Pipeline<Args> {
  const { where } = platform;
  let config: Config<Args>;
  try {
    config = configure(options, platform);
  } catch (error) {
    // one prefix for every message, whichever validator wrote it
    if (!(error instanceof SluiceConfigError) || error.message.startsWith(`[sluice] ${where}`)) throw error;
    throw new SluiceConfigError(`${where}: ${error.message.slice("[sluice] ".length)}`, { cause: error });
  }
  const { keyOf, skip, cost, onLimited, styles, pkSalt, dryRunHeaders, pick, onDecision, countWhen } = config;
  const fixedCost: LimitOptions | undefined = typeof cost === "number" ? { cost } : undefined;

  /**
   * Written as a chain of steps that continue synchronously while every step answers in place (a
   * synchronous `skip`, key, tier and cost, a MemoryStore): then the outcome itself is returned,
   * with no promise and no microtask turn. A step that answers with a promise continues the chain
   * in its `then`.
   */
  function checkNow(...args: Args): MaybePromise<Outcome> {
    if (skip !== undefined) {
      const skipped = skip(...args);
      if (isPromiseLike(skipped)) return Promise.resolve(skipped).then((yes) => (yes ? skippedOutcome() : keyed(args)));
      if (skipped) return skippedOutcome();
    }
    return keyed(args);
  }

  async function check(...args: Args): Promise<Outcome> {
    return checkNow(...args);
  }

  function keyed(args: Args): MaybePromise<Outcome> {
    const key = keyOf(...args);
    // a key that is not a string is the limiter's to refuse (SluiceInputError)
    return typeof key === "string" || !isPromiseLike(key) ? picked(args, key) : Promise.resolve(key).then((k) => picked(args, k));
  }

  function picked(args: Args, key: string): MaybePromise<Outcome> {
    const target = pick(args, key);
    return isTarget(target) ? priced(args, key, target) : target.then((t) => priced(args, key, t));
  }

  function priced(args: Args, key: string, target: Target): MaybePromise<Outcome> {
    if (typeof cost !== "function") return decided(args, key, target, fixedCost);
    const units = cost(...args);
    return isPromiseLike(units) ? Promise.resolve(units).then((u) => decided(args, key, target, costOptions(u))) : decided(args, key, target, costOptions(units));
  }

  function decided(args: Args, key: string, target: Target, limitOptions: LimitOptions | undefined): MaybePromise<Outcome> {
    // the limiter's deny cache may answer without a store round trip (reason "cached-deny"); a
    // dry-run limiter marks its decisions (dryRun: true), which this pipeline then lets through
    const decision = limitNow(target.limiter, key, limitOptions);
    return isPromiseLike(decision) ? Promise.resolve(decision).then((d) => handedOff(args, key, target, d)) : handedOff(args, key, target, decision);
  }

  function handedOff(args: Args, key: string, target: Target, decision: Decision): MaybePromise<Outcome> {
    if (onDecision !== undefined) report(onDecision, decision, decisionInfo(() => platform.request(...args), target.limiter, key, pkSalt));
    if (hasWork(decision.pending)) {
      const handOff = platform.waitUntil?.(...args);
      if (handOff === undefined) return decision.pending.then(() => outcomeOf(args, key, target, decision));
      handOff(decision.pending);
    }
    return outcomeOf(args, key, target, decision);
  }

  function outcomeOf(args: Args, key: string, target: Target, decision: Decision): MaybePromise<Outcome> {
    const headers: HeaderList = [];
    if (decision.dryRun) {
      // dry run: headers only when asked for, and never Retry-After (the request is served)
      if (dryRunHeaders) {
        const write = (target.write ??= compileRateLimitHeaders(styles, target.limiter.policies));
        const pk = pkSalt === undefined ? undefined : partitionKeyOf(storageKey(target.limiter, key), pkSalt);
        writeInto(write, headers, decision, pk, true);
      }
      const served: Outcome = { decision, key, limiter: target.limiter, headers, response: undefined };
      if (decision.lease !== undefined) noteHead(served, platform.request(...args));
      // the report of a request enforcing would deny; what onLimited returns is ignored
      if (!decision.allowed && onLimited !== undefined) return Promise.resolve(onLimited(...args, decision)).then(() => served);
      return served;
    }
    const write = (target.write ??= compileRateLimitHeaders(styles, target.limiter.policies));
    const pk = pkSalt === undefined ? undefined : partitionKeyOf(storageKey(target.limiter, key), pkSalt);
    writeInto(write, headers, decision, pk, false);
    if (decision.allowed) return outcomeWith(args, key, target, decision, headers, undefined);
    if (onLimited === undefined) return outcomeWith(args, key, target, decision, headers, limitedResponse(decision, headers));
    return Promise.resolve(onLimited(...args, decision)).then((own: unknown) => {
      if (!isResponse(own)) throw new SluiceConfigError(`${where}: onLimited must return a Response; got ${describe(own)}`);
      return outcomeWith(args, key, target, decision, headers, addRateLimitHeaders(own, headers));
    });
  }

  function outcomeWith(args: Args, key: string, target: Target, decision: Decision, headers: HeaderList, response: Response | undefined): Outcome {
    const outcome: Outcome = { decision, key, limiter: target.limiter, headers, response };
    if (decision.lease !== undefined) noteHead(outcome, platform.request(...args));
    return outcome;
  }

  function delay(outcome: Outcome): Promise<void> {
    const decision = outcome.decision;
    // dry run shapes nothing: the wait is enforcement too
    const ms = decision === undefined || decision.dryRun ? 0 : decision.delayMs;
    return ms > 0 ? sleep(ms) : NO_DELAY;
  }

  function finish(outcome: Outcome, response: Response, headersWritten = false): MaybePromise<Response> {
    if (!isResponse(response)) {
      throw new TypeError(`[sluice] ${where}: the handler must return a Response; got ${describe(response)}`);
    }
    const out = headersWritten || outcome.headers.length === 0 ? response : addRateLimitHeaders(response, outcome.headers);
    const { decision, key, limiter } = outcome;
    if (decision === undefined || key === undefined || limiter === undefined) return out;
    // a concurrency lease (only with a concurrency() limit): held until the response is produced
    const held = decision.lease !== undefined;
    // countWhen: a request the store charged that should not count gets its units back
    if (countWhen === undefined || !decision.allowed || decision.reason !== "ok") {
      return held ? holdUntilProduced(out, limiter, key, decision, HEAD_REQUESTS.has(outcome)) : out;
    }
    const refunded = refundUnlessCounted(countWhen, response, decision, limiter, key);
    return held ? refunded.then(() => holdUntilProduced(out, limiter, key, decision, HEAD_REQUESTS.has(outcome))) : refunded.then(() => out);
  }

  function release(outcome: Outcome): Promise<void> {
    const { decision, key, limiter } = outcome;
    if (decision?.lease === undefined || key === undefined || limiter === undefined) return NO_DELAY;
    return releaseLease(limiter, key, decision);
  }

  async function handle(args: Args, next: (decision: Decision | undefined) => MaybePromise<Response>): Promise<Response> {
    const outcome = await check(...args);
    if (outcome.response !== undefined) return outcome.response;
    if (outcome.decision !== undefined && outcome.decision.delayMs > 0 && !outcome.decision.dryRun) await delay(outcome);
    if (outcome.decision?.lease === undefined) return finish(outcome, await next(outcome.decision));
    // a concurrency lease: freed when the body ends (finish), or now if there is no response
    let response: Response;
    try {
      response = await next(outcome.decision);
    } catch (error) {
      await release(outcome);
      throw error;
    }
    try {
      return await finish(outcome, response);
    } catch (error) {
      await release(outcome);
      throw error;
    }
  }

  async function refundUnlessCounted(
    counts: NonNullable<Config<Args>["countWhen"]>,
    response: Response,
    decision: Decision,
    limiter: RateLimiter,
    key: string,
  ): Promise<void> {
    if (await counts(response, decision)) return;
    try {
      await limiter.refund(key, { decision });
    } catch (error) {
      // the response goes out anyway; the failure is the store's, reported like any other
      limiter.reportStoreFailure(error);
    }
  }

  return { check, checkNow, delay, finish, release, handle };
}

/**
 * The outcomes of HEAD requests that hold a concurrency lease: their response's body is never sent
 * (a framework may drop it unread, as Hono does), so the lease is released as soon as the handler
 * has answered.
 */
const HEAD_REQUESTS = new WeakSet<Outcome>();

function noteHead(outcome: Outcome, request: Request): void {
  if (request.method === "HEAD") HEAD_REQUESTS.add(outcome);
}

/** Frees a decision's concurrency lease; a failure goes to the limiter's `onStoreFailure`. Never rejects. */
function releaseLease(limiter: RateLimiter, key: string, decision: Decision): Promise<void> {
  let released: Promise<unknown>;
  try {
    released = limiter.release(key, decision);
  } catch (error) {
    released = Promise.reject(error);
  }
  return released.then(ignore, (error: unknown) => limiter.reportStoreFailure(error));
}

function ignore(): void {}

/**
 * The response whose production ends the request's concurrency lease: without a body (a redirect,
 * a 204, `Response.error()`, any answer to a HEAD request) the lease is released now; with one, a copy is returned whose body
 * passes the handler's through and releases when it ends (before the end reaches the client), fails
 * or is cancelled (the client went away). Released once, whatever happens.
 */
function holdUntilProduced(response: Response, limiter: RateLimiter, key: string, decision: Decision, head: boolean): MaybePromise<Response> {
  const body = response.status === 0 || head ? null : response.body;
  if (body === null) return releaseLease(limiter, key, decision).then(() => response);
  let released: Promise<void> | undefined;
  const done = () => (released ??= releaseLease(limiter, key, decision));
  const reader = body.getReader();
  const passed = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (error) {
          await done();
          throw error;
        }
        if (chunk.done) {
          await done();
          controller.close();
        } else controller.enqueue(chunk.value);
      },
      async cancel(reason) {
        try {
          await reader.cancel(reason);
        } finally {
          await done();
        }
      },
    },
    // read the handler's body only as fast as the server sends it
    { highWaterMark: 0 },
  );
  return new Response(passed, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The validated options. */
interface Config<Args extends unknown[]> {
  keyOf: (...args: Args) => MaybePromise<string>;
  skip: ((...args: Args) => MaybePromise<boolean>) | undefined;
  cost: number | ((...args: Args) => MaybePromise<number>) | undefined;
  onLimited: ((...args: [...Args, decision: Decision]) => MaybePromise<Response>) | undefined;
  styles: readonly HeaderStyle[];
  /** The `partitionKey` salt; `undefined` when `pk` is off. */
  pkSalt: string | undefined;
  /** Whether a dry-run decision writes the rate-limit headers. */
  dryRunHeaders: boolean;
  pick: (args: Args, key: string) => Target | Promise<Target>;
  onDecision: ((decision: Decision, info: DecisionInfo) => void) | undefined;
  countWhen: ((response: Response, decision: Decision) => boolean | Promise<boolean>) | undefined;
}

function configure<Args extends unknown[]>(options: PipelineOptions<Args>, platform: Platform<Args>): Config<Args> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`${platform.where} needs an options object with limiter (or tiers) and key (or trust); got ${describe(options)}`);
  }
  const { skip, cost, onLimited } = options;
  const keyOf = keyFunction(options, platform);
  requireFunction(skip, "skip", true);
  requireFunction(onLimited, "onLimited", true);
  requireFunction(options.onDecision, "onDecision", true);
  requireFunction(options.countWhen, "countWhen", true);
  if (typeof cost !== "function" && cost !== undefined && !(typeof cost === "number" && Number.isSafeInteger(cost) && cost > 0)) {
    throw new SluiceConfigError(`cost must be a positive safe integer or a function; got ${describe(cost)}`);
  }
  const styles = resolveHeaderStyles(options.headers);
  const pkSalt = resolvePartitionKey(options.partitionKey);
  const dryRunHeaders = options.dryRunHeaders ?? false;
  if (typeof dryRunHeaders !== "boolean") throw new SluiceConfigError(`dryRunHeaders must be true or false; got ${describe(dryRunHeaders)}`);
  const limiter = (options as { limiter?: unknown }).limiter;
  const tiers = (options as { tiers?: unknown }).tiers;
  if (tiers !== undefined && limiter !== undefined) throw new SluiceConfigError(`${platform.where} takes either limiter or tiers, not both`);
  let pick: Config<Args>["pick"];
  if (tiers !== undefined) pick = tieredPicker(options as PipelineTieredOptions<Args>);
  else if (limiter instanceof RateLimiter) {
    const target = targetOf(limiter);
    pick = () => target; // the limiter checks the key
  } else {
    throw new SluiceConfigError(`${platform.where} needs limiter (a RateLimiter) or tiers; got limiter ${describe(limiter)}`);
  }
  return { keyOf, skip, cost, onLimited, styles, pkSalt, dryRunHeaders, pick, onDecision: options.onDecision, countWhen: options.countWhen };
}

/** `key`, or the client address with `trust`. */
function keyFunction<Args extends unknown[]>(options: PipelineCommonOptions<Args>, platform: Platform<Args>): (...args: Args) => MaybePromise<string> {
  const { key, trust, ipv6Subnet } = options;
  if (key !== undefined && trust !== undefined) {
    throw new SluiceConfigError("give key or trust, not both (trust keys requests by client address)");
  }
  if (trust !== undefined) {
    validateClientIpOptions({ trust, ipv6Subnet }, platform.where);
    const ipOptions = { trust, ipv6Subnet };
    return (...args) => clientIp(platform.request(...args), ipOptions) ?? UNKNOWN_CLIENT_KEY;
  }
  if (typeof key !== "function") {
    throw new SluiceConfigError(
      `key must be a function (${platform.params ?? "request"}) => string, or give trust ("cloudflare", "vercel" or a number of trusted proxies) to key requests by client address; got key ${describe(key)}. No header is trusted by default.`,
    );
  }
  if (ipv6Subnet !== undefined) {
    throw new SluiceConfigError("ipv6Subnet applies only with trust; with key, normalize addresses yourself (normalizeIp)");
  }
  return key;
}

/** Builds each tier's limiter now; the returned function finds a request's tier, through the cache. */
function tieredPicker<Args extends unknown[]>(options: PipelineTieredOptions<Args>): (args: Args, key: string) => Promise<Target> {
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
  if (typeof (store as Partial<Store>).bind !== "function") {
    throw new SluiceConfigError(`store must be a Store (an object with bind(namespace)); got ${describe(store)}`);
  }
  resolveDenyCache(options.denyCache, true); // checked here, so a mistake is named as this option
  const defaultMode = options.mode ?? "enforce";
  if (defaultMode !== "enforce" && defaultMode !== "dry-run") {
    throw new SluiceConfigError(`mode must be "enforce" or "dry-run"; got ${describe(defaultMode)}`);
  }
  const targets = new Map<string, Target>();
  for (const [name, entry] of Object.entries(tiers)) {
    validateName(name, "tiers: tier name");
    let limits: unknown = entry;
    let mode: unknown = defaultMode;
    if (typeof entry === "object" && entry !== null && !Array.isArray(entry) && !isPolicy(entry)) {
      // the object form, { limits, mode? }
      const { limits: own, mode: ownMode, ...rest } = entry as TierConfig;
      const extra = Object.keys(rest)[0];
      if (extra !== undefined) throw new SluiceConfigError(`tiers.${name} takes limits and mode; got an option ${describe(extra)}`);
      limits = own;
      if (ownMode !== undefined) mode = ownMode;
      if (mode !== "enforce" && mode !== "dry-run") {
        throw new SluiceConfigError(`tiers.${name}.mode must be "enforce" or "dry-run"; got ${describe(ownMode)}`);
      }
    }
    const list = Array.isArray(limits) ? limits : [limits];
    if (list.length === 0 || !list.every(isPolicy)) {
      const option = limits === entry ? `tiers.${name}` : `tiers.${name}.limits`;
      throw new SluiceConfigError(`${option} must be a policy or a non-empty list of policies; got ${describe(limits)}`);
    }
    const names = list.map((p) => p.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) {
      throw new SluiceConfigError(`tiers.${name}: two limits are named ${describe(twice)}; give one a distinct name option`);
    }
    const { onStoreError, timeoutMs, onStoreFailure, denyCache } = options;
    const limiter = new RateLimiter({ store, limits: list, prefix, tier: name, onStoreError, timeoutMs, onStoreFailure, denyCache, mode: mode as LimiterMode });
    targets.set(name, targetOf(limiter));
  }
  const known = [...targets.keys()].join(", ");
  // key → tier (or the lookup in flight, so a burst of requests for one key asks once)
  const cache = new Map<string, { tier: MaybePromise<string>; expiresAt: number }>();

  const resolve = (args: Args, key: string): MaybePromise<string> => {
    if (ttlMs === 0) return tier(...args, key);
    const now = Date.now();
    const hit = cache.get(key);
    if (hit !== undefined && hit.expiresAt > now) return hit.tier;
    if (hit !== undefined) cache.delete(key);
    else if (cache.size >= maxCached) cache.delete(cache.keys().next().value as string);
    const answer = tier(...args, key);
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

  return async (args, key) => {
    assertKey(key); // before the lookup: the resolver never sees a key the limiter would refuse
    const name = await resolve(args, key);
    const target = targets.get(name);
    if (target === undefined) {
      cache.delete(key);
      throw new SluiceConfigError(`tier() returned ${describe(name)}, which is not a configured tier (${known})`);
    }
    return target;
  };
}
