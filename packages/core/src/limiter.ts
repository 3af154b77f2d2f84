import { type Policy, holdsLeases, validateName } from "./algorithms/index.js";
import { StoreDecision, decisionOf, storeFailureDecision, toDecision } from "./decision.js";
import { type DenyCacheOption, DenyCache, resolveDenyCache } from "./deny-cache.js";
import { type Duration, MAX_DURATION_MS } from "./duration.js";
import { SluiceConfigError, SluiceInputError, SluiceStoreError, SluiceTimeoutError, describe } from "./errors.js";
import { assertKey, validatePolicies, validateTier } from "./keys.js";
import { FallbackLeases, leaseIdOf, newLeaseId } from "./leases.js";
import { MemoryBinding, MemoryStore } from "./memory-store.js";
import { type ControlResult, type Override, type OverrideOptions, type StoreCommand, durationArg, isUnlimited, overrideFromText, overrideText } from "./overrides.js";
import { type ReserveOption, Reservations, canReserve, resolveReserve } from "./reservations.js";
import type { BoundStore, Decision, DecisionReason, MaybePromise, PolicyResult, RefundCharge, ReserveResult, Store, StoreNamespace, StoreResult } from "./types.js";

/** What the limiter does when its store fails or times out. */
export type StoreErrorMode = "fallback" | "allow" | "deny";

/**
 * `"enforce"`: denied requests are denied. `"dry-run"` (shadow mode): every decision is computed
 * and every state change made exactly as when enforcing, and each decision says `dryRun: true`; the
 * request pipeline (`createGuard` and every adapter) then lets denied requests through.
 */
export type LimiterMode = "enforce" | "dry-run";

/** Options of {@link RateLimiter}. */
export interface RateLimiterOptions {
  /** One policy or several; a request must pass all of them (all or nothing). */
  limits: Policy | readonly Policy[];
  /**
   * Where state lives.
   * @default new MemoryStore()
   */
  store?: Store;
  /**
   * Key namespace: limiters with different prefixes never share state.
   * @default "sluice"
   */
  prefix?: string;
  /**
   * On a store failure or timeout: `"fallback"` runs the same limits in a per-instance
   * `MemoryStore` (limiting goes on, looser); `"allow"` fails open; `"deny"` fails closed (for auth
   * routes). The decision's `reason` is `"store-error"` or `"timeout"` either way.
   * @default "fallback"
   */
  onStoreError?: StoreErrorMode;
  /**
   * Milliseconds a store call may take before it counts as a failure (`reason: "timeout"`,
   * {@link SluiceTimeoutError}); `false` turns the timeout off. Only asynchronous stores can time
   * out: a synchronous store (`MemoryStore`) answers before a timer could fire. Left at its default,
   * a store that can tell a busy server from a hung one (`@sluice/redis`: one that answered other
   * calls within the last second) may keep a call waiting longer, up to 5 s in all (see
   * `BoundStore.extendTimeout`); a value set here is a hard limit.
   * @default 1000
   */
  timeoutMs?: number | false;
  /**
   * The plan this limiter's counters belong to: a tiered guard sets it for each tier, so a tier's
   * state never mixes with another tier's, nor with a plain limiter's under the same prefix. A name
   * like a policy name (visible ASCII, no spaces).
   * @default undefined (no tier)
   */
  tier?: string;
  /** Called with the error whenever a store call fails or times out (for logs and metrics). */
  onStoreFailure?: (error: unknown) => void;
  /**
   * The deny cache: once the store denies a key for `retryAfterMs` R (a limit, or a penalty box
   * that blocks it), later calls for that key with the same cost are answered here, with every
   * field of the store's denial moved on by the time elapsed (its `override` and penalty box
   * included, so the headers read as the store's own) and `reason: "cached-deny"`, with no store
   * round trip: for R, or less when a policy's quota grows sooner (by the local monotonic clock,
   * less a skew margin of 5 ms + 1 ms per second). Only asynchronous answers are cached, so it is
   * on by default for every store but `MemoryStore` (already local: nothing to save). Never cached: denials from the fallback store,
   * store errors, timeouts, and `cost-exceeds-limit`. `reset(key)` forgets the key's denial.
   * `true` turns it on with the defaults, `false` off; `{ maxKeys }` bounds it (least recently
   * used forgotten first). A reset made by another process is not seen until the entry expires.
   * A denial bound by a `concurrency()` limit is never cached: its slot may free at any moment, in
   * any process.
   * @default on ({ maxKeys: 10_000 }) for asynchronous stores; off for MemoryStore
   * @example
   * ```ts
   * const limiter = new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits, denyCache: { maxKeys: 50_000 } });
   * await limiter.limit("ip:203.0.113.7"); // denied by Redis: { allowed: false, reason: "limit" }
   * await limiter.limit("ip:203.0.113.7"); // { allowed: false, reason: "cached-deny" }, no request to Redis
   * ```
   */
  denyCache?: DenyCacheOption;
  /**
   * `"dry-run"` (shadow mode) measures a limit before it is enforced: decisions and state exactly
   * as when enforcing, every decision marked `dryRun: true` (`allowed` still says what enforcement
   * would do), and the request pipeline lets denied requests through — no 429, no `Retry-After`,
   * no `delayMs` wait, no rate-limit headers unless `dryRunHeaders: true` — reporting each of them
   * to `onLimited`, whose return value is ignored. Calling `limit()` yourself, read `dryRun` and
   * `allowed` and decide.
   * @default "enforce"
   * @example
   * ```ts
   * const limiter = new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }), mode: "dry-run" });
   * app.use(
   *   rateLimiter({
   *     limiter,
   *     key: (c) => c.req.header("x-api-key") ?? "anonymous",
   *     onLimited: (c, decision) => {
   *       if (decision.dryRun) metrics.increment("would-429", { policy: decision.policy }); // measured
   *       return c.json({ error: "slow down" }, 429); // sent once mode is "enforce"
   *     },
   *   }),
   * );
   * ```
   */
  mode?: LimiterMode;
  /**
   * Reservations: decisions without a round trip for hot keys. An instance that sees a key often
   * charges units for it ahead of their use, in one atomic store call, and admits that key's
   * requests from them locally (`decision.reserved === true`), asking for the next batch in the
   * background (`decision.pending`) before the units in hand run out. Strict by construction: a
   * unit is charged before it is used, a window's units serve only inside their window, a bucket's
   * are counted as used at the end of their hold, and a reservation lives at most `maxAgeMs`, so a
   * block or override set through another instance binds here within it (through this limiter, at
   * once). Near the limit nothing is reserved and every decision is exact. Unused units go back
   * through the exact refund (also on {@link RateLimiter.returnReservations}).
   *
   * Every algorithm reserves but the sliding log, a leaky bucket with a queue and a concurrency cap:
   * a limiter with one of those decides every request in the store. A `MemoryStore` is already
   * local: there it changes nothing. `true` turns it on with the defaults; see {@link ReserveOptions}.
   * @default false
   * @example
   * ```ts
   * const limiter = new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits, reserve: { maxAgeMs: 1000 } });
   * const d = await limiter.limit("api-key:hot"); // d.reserved: true once the key is hot, no request to Redis
   * ```
   */
  reserve?: ReserveOption;
}

/** Options of one {@link RateLimiter.limit} call. */
export interface LimitOptions {
  /**
   * Units this request consumes: a positive safe integer.
   * @default 1
   */
  cost?: number;
}

/** Options of {@link RateLimiter.refund}. */
export interface RefundOptions {
  /**
   * Units to give back: a positive safe integer. Default: all the units `decision` charged, or 1
   * without a decision.
   */
  cost?: number;
  /** The decision `limit()` returned for the request: caps the refund at what it charged, in the window it was charged in. */
  decision?: Decision;
}

/** What a bound namespace must answer (`BoundStore`, without the optional `extendTimeout`). */
const BOUND_STORE_METHODS = ["consume", "peek", "reset", "refund", "release"] as const;

export { assertKey };
/** The default `timeoutMs` of a limiter over an asynchronous store. */
export const DEFAULT_TIMEOUT_MS = 1000;

function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return value != null && typeof (value as { then?: unknown }).then === "function";
}

function costOf(options: LimitOptions | undefined): number {
  if (options === undefined) return 1;
  if (typeof options !== "object" || options === null) {
    throw new SluiceInputError(`options must be an object like { cost: 1 }; got ${describe(options)}`, { option: "options" });
  }
  const cost = options.cost;
  if (cost === undefined) return 1;
  return checkCost(cost);
}

/** A cost (units) as given: a positive safe integer, else {@link SluiceInputError}. */
function checkCost(cost: unknown): number {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    throw new SluiceInputError(`cost must be a positive safe integer; got ${describe(cost)}`, { option: "cost" });
  }
  return cost;
}

/**
 * One token per namespace a store holds state in: the store, the prefix, the tier and the exact
 * policies. Limiters over the same store and namespace share it, so a decision of one refunds
 * through another; any other limiter refuses it.
 */
const namespaceTokens = new WeakMap<Store, Map<string, object>>();

function namespaceToken(store: Store, namespace: StoreNamespace): object {
  let tokens = namespaceTokens.get(store);
  if (tokens === undefined) {
    tokens = new Map();
    namespaceTokens.set(store, tokens);
  }
  const id = JSON.stringify([namespace.prefix, namespace.tier ?? null, namespace.policies]);
  let token = tokens.get(id);
  if (token === undefined) {
    token = Object.freeze({});
    tokens.set(id, token);
  }
  return token;
}

/**
 * Whether a failed store call certainly changed nothing (the call never reached the store: the
 * connection was refused, the client was closed, or the store threw before any I/O), so that a
 * refund may be tried again. A timeout or a malformed reply may have been applied.
 */
function certainlyNotApplied(error: unknown): boolean {
  return error instanceof SluiceStoreError && error.notApplied;
}

/**
 * Checks keys against one or more policies in a store. `limit()` never rejects for a denial: it
 * returns a {@link Decision}. It rejects only for bad input ({@link SluiceInputError}).
 *
 * @example
 * ```ts
 * import { RateLimiter, tokenBucket, fixedWindow } from "@sluice/core";
 *
 * const limiter = new RateLimiter({
 *   limits: [tokenBucket({ capacity: 10, refillRate: 1 }), fixedWindow({ limit: 1000, window: "1d" })],
 * });
 * const decision = await limiter.limit("user:42");
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 * ```
 */
let limitNowOf: (limiter: RateLimiter, key: string, options: LimitOptions | undefined) => Decision | Promise<Decision>;

/**
 * `limiter.limit(key, options)` without a promise when the store answers in place (MemoryStore):
 * the decision itself; a promise when it answers over the network. Bad input throws synchronously.
 * A subclass that overrides `limit()` is called through its `limit()`. Internal to the request
 * pipeline, which then serves a request on an in-memory limiter without a microtask turn.
 */
export function limitNow(limiter: RateLimiter, key: string, options: LimitOptions | undefined): Decision | Promise<Decision> {
  return limiter.limit === RateLimiter.prototype.limit ? limitNowOf(limiter, key, options) : limiter.limit(key, options);
}

export class RateLimiter {
  /** The policies, in order. */
  readonly policies: readonly Policy[];
  /** The key namespace. */
  readonly prefix: string;
  readonly store: Store;
  readonly onStoreError: StoreErrorMode;
  /** Milliseconds a store call may take, or `false` for no timeout. */
  readonly timeoutMs: number | false;
  /** The tier, if a tiered guard made this limiter. */
  readonly tier: string | undefined;
  /** `"enforce"`, or `"dry-run"`: every decision says `dryRun: true` and the pipeline lets denied requests through. */
  readonly mode: LimiterMode;
  /** The deny cache; `undefined` when off. */
  readonly #denials: DenyCache | undefined;
  readonly #namespace: StoreNamespace;
  /** This limiter's namespace token: a decision it made refunds only through it (or a twin). */
  readonly #owner: object;
  readonly #bound: BoundStore;
  /** `#bound` when it is a MemoryStore's own namespace (not wrapped): decided without the `StoreResult` wrapper. */
  readonly #memory: MemoryBinding | undefined;
  readonly #onStoreFailure: ((error: unknown) => void) | undefined;
  /** Whether a policy is a concurrency cap: each `limit()` then draws a lease id. */
  readonly #concurrent: boolean;
  /** The names of the concurrency policies (empty without one): a denial they bind is never cached. */
  readonly #concurrencyNames: ReadonlySet<string>;
  #fallback: BoundStore | undefined;
  /** Whether `timeoutMs` is the default: the store may then extend it (`BoundStore.extendTimeout`). */
  readonly #patient: boolean;
  /**
   * The leases acquired through the fallback store while the store was down (they live only
   * there): releasing one succeeds even while the store is still down. Bounded: the oldest ids are
   * forgotten first (a forgotten one is still freed by the fallback, or expires).
   */
  readonly #fallbackLeases = new FallbackLeases(10_000);
  /** Reservations (the `reserve` option); `undefined` when off, or when the store or a policy cannot reserve. */
  readonly #reservations: Reservations | undefined;

  constructor(options: RateLimiterOptions) {
    if (typeof options !== "object" || options === null) {
      throw new SluiceConfigError(`options must be an object with limits; got ${describe(options)}`, { option: "options" });
    }
    // 1 to MAX_POLICIES policies, the same limit on every store
    const limits = validatePolicies(options.limits, "limits");
    const prefix = options.prefix === undefined ? "sluice" : validateName(options.prefix, "prefix");
    // an option set to null is refused like any other wrong value (only undefined means the default)
    const onStoreError = options.onStoreError === undefined ? "fallback" : options.onStoreError;
    if (onStoreError !== "fallback" && onStoreError !== "allow" && onStoreError !== "deny") {
      throw new SluiceConfigError(`onStoreError must be "fallback", "allow" or "deny"; got ${describe(onStoreError)}`, { option: "onStoreError" });
    }
    const timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
    if (
      timeoutMs !== false &&
      (typeof timeoutMs !== "number" || !Number.isSafeInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_DURATION_MS)
    ) {
      // above 2^31-1 ms, setTimeout fires at once: every store call would time out
      throw new SluiceConfigError(
        `timeoutMs must be a positive integer of milliseconds, at most ${MAX_DURATION_MS}, or false; got ${describe(timeoutMs)}`,
        { option: "timeoutMs" },
      );
    }
    const store = options.store ?? new MemoryStore();
    if (typeof (store as Partial<Store>).bind !== "function") {
      throw new SluiceConfigError(`store must be a Store (an object with bind(namespace)); got ${describe(store)}`, { option: "store" });
    }
    if (options.onStoreFailure !== undefined && typeof options.onStoreFailure !== "function") {
      throw new SluiceConfigError(`onStoreFailure must be a function; got ${describe(options.onStoreFailure)}`, { option: "onStoreFailure" });
    }
    this.policies = Object.freeze([...limits]);
    this.prefix = prefix;
    this.store = store;
    this.onStoreError = onStoreError;
    this.timeoutMs = timeoutMs;
    this.#patient = options.timeoutMs === undefined;
    this.tier = options.tier === undefined ? undefined : validateTier(options.tier, "tier");
    this.#onStoreFailure = options.onStoreFailure;
    const mode = options.mode === undefined ? "enforce" : options.mode;
    if (mode !== "enforce" && mode !== "dry-run") {
      throw new SluiceConfigError(`mode must be "enforce" or "dry-run"; got ${describe(mode)}`, { option: "mode" });
    }
    this.mode = mode;
    // on by default for stores that answer over the network; MemoryStore answers in place
    const denyCache = resolveDenyCache(options.denyCache, !(store instanceof MemoryStore));
    this.#denials = denyCache === undefined ? undefined : new DenyCache(denyCache, toDecision);
    this.#namespace = Object.freeze({ prefix, tier: this.tier, policies: this.policies });
    this.#owner = namespaceToken(store, this.#namespace);
    this.#bound = store.bind(this.#namespace);
    this.#memory = this.#bound instanceof MemoryBinding ? this.#bound : undefined;
    this.#reservations = this.#reservationsOf(options.reserve, store);
    this.#concurrent = this.policies.some(holdsLeases);
    this.#concurrencyNames = new Set(this.policies.filter(holdsLeases).map((p) => p.name));
    // the whole contract, refund and release included, is checked here rather than at the first
    // refund or lease (a store written before they were required fails now, not in production)
    for (const method of BOUND_STORE_METHODS) {
      if (typeof this.#bound[method] !== "function") {
        throw new SluiceConfigError(
          `store must be a Store whose bind(namespace) returns the methods ${BOUND_STORE_METHODS.join(", ")}; got a bound namespace without ${method}()`,
          { option: "store" },
        );
      }
    }
  }

  /** The reservations of the `reserve` option: off over a MemoryStore (already local), a store without `reserve`, or a policy that cannot reserve. */
  #reservationsOf(option: unknown, store: Store): Reservations | undefined {
    const resolved = resolveReserve(option);
    const bound = this.#bound;
    if (resolved === undefined || store instanceof MemoryStore || typeof bound.reserve !== "function" || !canReserve(this.policies)) return undefined;
    return new Reservations(resolved, this.policies, {
      reserve: (key, units, holdMs) => {
        const answer = bound.reserve!(key, units, holdMs);
        return isThenable(answer) ? this.#withTimeout(answer) : answer;
      },
      giveBack: (key, charge, units) => this.#refundCharge(key, charge, units),
      failed: (error) => this.reportStoreFailure(error),
      mark: (decision, key) => this.#marked(decision, key),
    });
  }

  /**
   * Checks every policy for `key` and, if all allow, consumes `cost` from each — atomically.
   * Rejects only with {@link SluiceInputError} (bad key or cost), before touching any state.
   *
   * With a `concurrency()` policy, an allowed request also acquires a lease (`decision.lease`), in
   * the same round trip: free it with {@link RateLimiter.release} when the request is done (the
   * request pipeline of every adapter does), or it expires after the policy's `lease`.
   *
   * @example
   * ```ts
   * const d = await limiter.limit("user:42", { cost: 5 });
   * ```
   */
  limit(key: string, options?: LimitOptions): Promise<Decision> {
    // not an async function: a store that answers in place (MemoryStore) is decided without
    // suspending, in one resolved promise (measured on the deny path: the async function's frame
    // and its extra turn cost more than the decision itself)
    try {
      const decision = this.#limitNow(key, options);
      return decision instanceof Promise ? decision : Promise.resolve(decision);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `limit()` without the promise when the store answers in place: the decision itself from
   * MemoryStore, a promise from a store that answers over the network. Bad input throws
   * synchronously. For the request pipeline (see {@link limitNow}).
   */
  #limitNow(key: string, options: LimitOptions | undefined): Decision | Promise<Decision> {
    assertKey(key);
    const cost = costOf(options);
    const reservations = this.#reservations;
    if (reservations !== undefined) {
      // units this instance holds for the key: no round trip
      const reserved = reservations.take(key, cost);
      if (reserved !== undefined) return reserved;
    }
    const denials = this.#denials;
    let sentAt = 0;
    if (denials !== undefined) {
      // a denial the store gave for this key and a cost no larger, still running: no round trip
      const cached = denials.size === 0 ? undefined : denials.answer(key, cost);
      if (cached !== undefined) return this.#marked(cached, key);
      sentAt = denials.now();
    }
    // a lease id only when a concurrency policy needs one: the common path draws nothing
    const lease = this.#concurrent ? newLeaseId() : 0;
    const memory = this.#memory;
    if (memory !== undefined) {
      // MemoryStore's own namespace: no StoreResult wrapper, so a denial allocates nothing but
      // the decision and its policies' results
      let policies: PolicyResult[];
      try {
        policies = memory.consumePolicies(key, cost, lease);
      } catch (error) {
        return this.#consumeFailed(error, key, cost, lease);
      }
      const decision = decisionOf(memory.lastNow, policies);
      if (memory.lastOverride !== undefined) decision.override = memory.lastOverride;
      return this.#consumed(decision, key, cost, lease, false, sentAt, memory.lastMarks);
    }
    let result: MaybePromise<StoreResult>;
    try {
      result = lease === 0 ? this.#bound.consume(key, cost) : this.#bound.consume(key, cost, lease);
    } catch (error) {
      return this.#consumeFailed(error, key, cost, lease);
    }
    if (isThenable(result)) return this.#consumeRemote(result, key, cost, lease, sentAt);
    return this.#consumed(toDecision(result), key, cost, lease, false, sentAt, result.marks);
  }

  static {
    // the pipeline's way in to #limitNow (module-private: not part of the public API)
    limitNowOf = (limiter, key, options) => limiter.#limitNow(key, options);
  }

  /** `limit()` over a store that answers over the network: the answer, or the failure's decision. */
  async #consumeRemote(pending: Promise<StoreResult>, key: string, cost: number, lease: number, sentAt: number): Promise<Decision> {
    let result: StoreResult;
    try {
      result = await this.#withTimeout(pending);
    } catch (error) {
      return this.#consumeFailed(error, key, cost, lease);
    }
    return this.#consumed(toDecision(result), key, cost, lease, true, sentAt, result.marks);
  }

  /**
   * The decision when the store failed (store failures, timeouts and the fallback's answers are
   * never cached); throws what must not be turned into a decision (config and input errors).
   */
  #consumeFailed(error: unknown, key: string, cost: number, lease: number): Decision {
    const failed = this.#failed(error, (fallback) => fallback.consume(key, cost, lease) as StoreResult);
    // the fallback store holds the lease (onStoreError "allow" acquires none)
    if (lease !== 0 && failed.allowed && this.onStoreError === "fallback") {
      failed.lease = String(lease);
      this.#fallbackLeases.add(lease);
    }
    return this.#marked(failed, key);
  }

  /** The decision of a store's answer: the charge recorded for refunds, the lease, a remote denial cached. */
  #consumed(
    decision: Decision,
    key: string,
    cost: number,
    lease: number,
    remote: boolean,
    sentAt: number,
    marks: readonly number[] | undefined,
  ): Decision {
    const denials = this.#denials;
    if (remote && denials !== undefined && !decision.allowed) {
      // a concurrency cap's retryAfterMs is a hint (a slot may free at any moment, in any process):
      // a denial it binds is not cached, or this process would refuse a key whose slots are free
      if (!this.#concurrent || !this.#concurrencyNames.has(decision.policy)) denials.remember(key, cost, decision, sentAt, denials.now());
      else if (denials.size !== 0) denials.forget(key);
    } else if (decision.allowed && !isUnlimited(decision.override)) {
      // under an unlimited override nothing was counted: nothing to refund, no slot to release.
      // Otherwise the key's state changed: a cached denial (of another cost) no longer reads as the store would
      if (remote && denials !== undefined && denials.size !== 0) denials.forget(key);
      StoreDecision.charge(decision, cost, marks);
      if (lease !== 0) decision.lease = String(lease);
    }
    const work = this.#reservations?.observe(key, decision);
    if (work !== undefined) decision.pending = work;
    return this.#marked(decision, key);
  }

  /**
   * Gives units back to every policy that charged them, atomically, in one round trip: for a
   * request that should not count after all (a successful login, a response served from cache).
   * Never more than was charged, never above a policy's quota, and never letting any span admit
   * more than it would have had the refunded request never been made: a fixed window only within
   * the window the request was charged in, a sliding window in that window, a sliding log from that
   * request's entry, a bucket at most what the charge still weighs (a charge the refill has already
   * erased — the bucket has been full since — gives nothing back).
   *
   * With `decision` (the one `limit()` returned), at most the units that decision charged are given
   * back, over any number of calls (they run one after another), and only to the key, namespace
   * and policies that charged it: a decision made for another key, by a limiter of another store,
   * prefix, tier or list of policies, or not made by `limit()` at all (a copy, a decision rebuilt
   * from JSON) is a `SluiceInputError`, and nothing changes. A decision that charged nothing (a
   * denial, a cached denial, an answer of the fallback store) refunds nothing. Without `decision`,
   * `cost` units (default 1) go back to the key's latest charges.
   *
   * Clears the key's cached denial. Resolves to the key's state afterwards (as `peek` does);
   * rejects if the store fails (a refund that did not happen must not look done). A failure that
   * certainly changed nothing (the connection was refused, the client was closed) leaves the
   * decision's units refundable, so the refund can be tried again; after a timeout (the store may
   * have applied it) they count as given back.
   *
   * @example
   * ```ts
   * const decision = await limiter.limit(`login:${ip}`);
   * if (decision.allowed && (await checkPassword(user, password))) {
   *   await limiter.refund(`login:${ip}`, { decision }); // only failed attempts count
   * }
   * ```
   */
  async refund(key: string, options?: RefundOptions): Promise<Decision> {
    assertKey(key);
    if (options !== undefined && (typeof options !== "object" || options === null)) {
      throw new SluiceInputError(`options must be an object like { decision } or { cost: 1 }; got ${describe(options)}`, { option: "options" });
    }
    const decision = options?.decision;
    const cost = options?.cost === undefined ? undefined : checkCost(options.cost);
    if (decision === undefined) return this.#refund(key, cost ?? 1, undefined);
    if (typeof decision !== "object" || decision === null) {
      throw new SluiceInputError(`decision must be a Decision returned by limit(); got ${describe(decision)}`, { option: "decision" });
    }
    const foreign = StoreDecision.foreign(decision, this.#owner, key);
    if (foreign !== undefined) throw new SluiceInputError(foreign, { option: "decision" });
    const source = StoreDecision.sourceOf(decision);
    if (source !== undefined) return this.#refundReserved(key, decision, source, cost);
    return StoreDecision.serially(decision, async () => {
      const { units, charge } = StoreDecision.refundable(decision, cost ?? Number.MAX_SAFE_INTEGER, this.policies);
      if (units === 0) return this.peek(key);
      try {
        const refunded = await this.#refund(key, units, charge);
        StoreDecision.refunded(decision, units);
        return refunded;
      } catch (error) {
        // the store may have applied it (a timeout, a malformed reply): never refunded twice
        if (!certainlyNotApplied(error)) StoreDecision.refunded(decision, units);
        throw error;
      }
    });
  }

  /**
   * The refund of a decision made from a reservation: back to that reservation while it serves
   * (no round trip), else through the reservation's charge, at most the units the decision took.
   */
  #refundReserved(key: string, decision: Decision, source: Decision, cost: number | undefined): Promise<Decision> {
    return StoreDecision.serially(decision, async () => {
      const units = Math.min(cost ?? Number.MAX_SAFE_INTEGER, StoreDecision.refundableUnits(decision));
      if (units === 0) return this.peek(key);
      this.#forgetDenial(key);
      const restored = this.#reservations?.restore(key, source, units);
      if (restored !== undefined) {
        StoreDecision.refunded(decision, units);
        return restored;
      }
      StoreDecision.refunded(decision, units);
      return this.#refundCharge(key, source, units);
    });
  }

  /** Gives `units` of a charge back through the store (a reservation's: its unused units, or a reserved decision's). */
  #refundCharge(key: string, charge: Decision, units: number): Promise<Decision> {
    return StoreDecision.serially(charge, async () => {
      const { units: refundable, charge: named } = StoreDecision.refundable(charge, units, this.policies);
      if (refundable === 0) return this.peek(key);
      try {
        const refunded = await this.#refund(key, refundable, named);
        StoreDecision.refunded(charge, refundable);
        return refunded;
      } catch (error) {
        if (!certainlyNotApplied(error)) StoreDecision.refunded(charge, refundable);
        throw error;
      }
    });
  }

  /**
   * Gives every unit this limiter holds in reservations (the `reserve` option) back to the store
   * now, and ends them: decisions then go to the store until keys are hot again. For a shutdown, a
   * test, or a Worker's `waitUntil`. Resolves once every give-back is done (a failed one is reported
   * to `onStoreFailure`; its units stay charged until their window or hold ends).
   *
   * @example
   * ```ts
   * process.on("SIGTERM", async () => {
   *   await limiter.returnReservations();
   *   process.exit(0);
   * });
   * ```
   */
  async returnReservations(): Promise<void> {
    await this.#reservations?.returnAll();
  }

  /** The store's refund of `units` for `charge` (`undefined`: the latest charges). */
  async #refund(key: string, units: number, charge: RefundCharge | undefined): Promise<Decision> {
    this.#forgetDenial(key);
    let result: MaybePromise<StoreResult>;
    try {
      result = this.#bound.refund(key, units, charge);
    } catch (error) {
      // thrown before any I/O: nothing was applied
      throw error instanceof SluiceStoreError || error instanceof SluiceConfigError || error instanceof SluiceInputError
        ? error
        : new SluiceStoreError(`refund failed before reaching the store: ${String((error as Error | null)?.message ?? error)}`, { cause: error, notApplied: true });
    }
    if (isThenable(result)) result = await this.#withTimeout(result);
    // a denial that arrived while the refund was on its way is older than the refund
    this.#forgetDenial(key);
    return this.#marked(toDecision(result), key);
  }

  /**
   * Frees the slot a request holds on the limiter's concurrency policy: `lease` is the decision
   * `limit()` returned, or its `lease` string. The request pipeline of every adapter calls it when
   * the response has been produced (a streamed body: when the stream ends or is cancelled); call it
   * yourself for work outside an adapter, in a `finally`. Atomic, one round trip; idempotent (a
   * lease already released, or expired, changes nothing). Clears the key's cached denial. Resolves
   * to the key's state afterwards (as `peek` does); a decision that holds no lease releases nothing
   * and resolves to the state. Rejects if the store fails (the slot then frees when the lease
   * expires) or with `SluiceInputError` for a bad key or lease — except for a lease the fallback
   * store acquired while the store was down: it lives there, so its release resolves (with the
   * fallback's state and the store failure's `reason`) even while the store is still down.
   *
   * @example
   * ```ts
   * const decision = await limiter.limit(`export:${user}`);
   * if (!decision.allowed) return tooMany(decision);
   * try {
   *   return await buildExport(user);
   * } finally {
   *   await limiter.release(`export:${user}`, decision);
   * }
   * ```
   */
  async release(key: string, lease: string | Decision): Promise<Decision> {
    assertKey(key);
    const id = leaseIdOf(lease);
    if (id === undefined || !this.#concurrent) return this.peek(key);
    this.#forgetDenial(key);
    // a lease the fallback store acquired while the store was down lives there: freed there
    const inFallback = this.#fallbackLeases.delete(id);
    const freed = inFallback ? this.#fallback?.release(key, id) : (this.#fallback?.release(key, id), undefined);
    let result: MaybePromise<StoreResult>;
    try {
      result = this.#bound.release(key, id);
      if (isThenable(result)) result = await this.#withTimeout(result);
    } catch (error) {
      if (freed === undefined || isThenable(freed)) throw error;
      // the store is still down, and the lease was never in it: the fallback freed it
      this.reportStoreFailure(error);
      return this.#marked(toDecision(freed, error instanceof SluiceTimeoutError ? "timeout" : "store-error"), key);
    }
    // a denial that arrived while the release was on its way is older than the release
    this.#forgetDenial(key);
    return this.#marked(toDecision(result), key);
  }

  /**
   * The state of `key` now without consuming anything: `remaining`/`resetAt` describe the state
   * now; `allowed`/`retryAfterMs` say whether a cost-1 request would pass.
   *
   * @example
   * ```ts
   * const { remaining } = await limiter.peek("user:42");
   * ```
   */
  async peek(key: string): Promise<Decision> {
    assertKey(key);
    let result: MaybePromise<StoreResult>;
    try {
      result = this.#bound.peek(key);
      if (isThenable(result)) result = await this.#withTimeout(result);
    } catch (error) {
      return this.#marked(this.#failed(error, (fallback) => fallback.peek(key) as StoreResult), key);
    }
    return this.#marked(toDecision(result), key);
  }

  /**
   * Forgets every policy's state for `key` (in the store, in the fallback store, and the key's
   * cached denial, if any). Rejects if the store fails: a reset that did not happen must not look
   * done.
   *
   * @example
   * ```ts
   * await limiter.reset("user:42");
   * ```
   */
  async reset(key: string): Promise<void> {
    assertKey(key);
    this.#forgetDenial(key);
    // the reset forgets the reserved units with the rest: nothing to give back first
    this.#reservations?.end(key, false);
    await this.#fallback?.reset(key);
    const done = this.#bound.reset(key);
    if (isThenable(done)) await this.#withTimeout(done);
    // a denial that arrived while the reset was on its way is older than the reset
    this.#forgetDenial(key);
  }

  /**
   * Sets `key`'s override, stored with the key's state and applied by every decision that follows,
   * on every instance sharing the store (the same round trip that decides reads it):
   * `{ scale }` multiplies every policy's quota (a window keeps its length; a bucket's rate scales
   * alike), `{ quotas: { [policyName]: quota } }` sets named policies' quotas, `{ unlimited: true }`
   * lets every request through without counting. Replaces the key's previous override. One round
   * trip. Within a tier's namespace: a tiered guard's limiter for that tier.
   *
   * The key's state carries over: counts made under one quota are judged against the next (never
   * more admitted in any window than the larger quota allows). This limiter's deny cache forgets
   * the key; another instance's cached denial of it lasts at most its `retryAfterMs` (see
   * `denyCache`).
   *
   * @param key - The key, as given to `limit()`.
   * @param override - See {@link Override}. Checked against this limiter's policies first
   *   (`SluiceInputError` naming the field: a scale that is not a positive finite number or that
   *   makes a quota 0 or larger than the policy allows, an unknown policy name, a quota that is not
   *   a positive integer); nothing is stored then.
   * @param options - `ttl`: how long it lasts (`"1h"`); without it, until {@link RateLimiter.clearOverride}.
   * @throws SluiceConfigError (option `"store"`) when the store cannot hold overrides; rejects with
   *   the store's error when the store fails (nothing is then known to be stored).
   *
   * @example
   * ```ts
   * await limiter.setOverride("customer-42", { scale: 10 }, { ttl: "1h" });
   * const decision = await limiter.limit("customer-42"); // decision.override: { scale: 10 }
   * ```
   */
  async setOverride(key: string, override: Override, options?: OverrideOptions): Promise<void> {
    assertKey(key);
    const body = overrideText(override, this.policies);
    if (options !== undefined && (typeof options !== "object" || options === null)) {
      throw new SluiceInputError(`options must be an object like { ttl }; got ${describe(options)}`, { option: "options" });
    }
    for (const k of Object.keys(options ?? {})) {
      if (k !== "ttl") throw new SluiceInputError(`options.${k} is not an option of setOverride: it takes ttl`, { option: `options.${k}` });
    }
    const ttlMs = options?.ttl === undefined ? 0 : durationArg(options.ttl, "ttl");
    await this.#control(key, { op: "setOverride", override: body, ttlMs });
  }

  /**
   * `key`'s live override, as it was set (`undefined` when it has none, or it ended). One round trip.
   *
   * @example
   * ```ts
   * const override = await limiter.getOverride("customer-42"); // { scale: 10 } or undefined
   * ```
   */
  async getOverride(key: string): Promise<Override | undefined> {
    assertKey(key);
    const body = (await this.#control(key, { op: "getOverride" })).override;
    return body === undefined ? undefined : overrideFromText(body);
  }

  /**
   * Removes `key`'s override: its next decision applies the limiter's own quotas. One round trip.
   *
   * @example
   * ```ts
   * await limiter.clearOverride("customer-42");
   * ```
   */
  async clearOverride(key: string): Promise<void> {
    assertKey(key);
    await this.#control(key, { op: "clearOverride" });
  }

  /**
   * Blocks `key` by hand for `duration` from now (by the store's clock), on every instance sharing
   * the store: every request is denied with `reason: "blocked"`, `retryAfterMs` up to the block's
   * end (or later, when the key's own limits would still deny it then), nothing counted. Replaces a
   * manual block the key has. One round trip.
   *
   * @param duration - `"15m"`, or ms (a positive integer); else `SluiceInputError` (option `"duration"`).
   *
   * @example
   * ```ts
   * await limiter.block("203.0.113.7", "1h");
   * ```
   */
  async block(key: string, duration: Duration): Promise<void> {
    assertKey(key);
    const durationMs = durationArg(duration, "duration");
    await this.#control(key, { op: "block", durationMs });
  }

  /**
   * Lifts `key`'s manual block and its penalty boxes (of this limiter's policies), on every
   * instance sharing the store; this limiter's deny cache forgets the key. The key's limits apply
   * again at once (its counts are kept). One round trip.
   *
   * @example
   * ```ts
   * await limiter.unblock("203.0.113.7");
   * ```
   */
  async unblock(key: string): Promise<void> {
    assertKey(key);
    await this.#control(key, { op: "unblock" });
  }

  /** Runs a `BoundStore.control` command (one round trip) and forgets the key's cached denial. */
  async #control(key: string, command: StoreCommand): Promise<ControlResult> {
    const bound = this.#bound;
    if (typeof bound.control !== "function") {
      throw new SluiceConfigError("store cannot hold overrides or manual blocks: its bound namespace has no control() method (every Sluice store has one)", { option: "store" });
    }
    this.#forgetDenial(key);
    // what this limiter changes binds here at once: the key's reservations end (their units go back)
    await this.#reservations?.end(key);
    let result = bound.control(key, command);
    if (isThenable(result)) result = await this.#withTimeout(result);
    // a denial that arrived while the command was on its way is older than it
    this.#forgetDenial(key);
    return result;
  }

  /**
   * Drops `key`'s entry from the deny cache, so that its next call asks the store. Whatever gives
   * quota back to a key must call it: `reset`, `refund` and `release` (a key may pass before its
   * cached denial would expire).
   */
  #forgetDenial(key: string): void {
    this.#denials?.forget(key);
  }

  /**
   * Hands a store failure that happened outside a decision (a refund after the response, say) to
   * `onStoreFailure`; nothing it throws escapes.
   * @internal
   */
  reportStoreFailure(error: unknown): void {
    try {
      this.#onStoreFailure?.(error);
    } catch {
      // a failing logger must not turn a response into an exception
    }
  }

  /**
   * Every decision on its way out: stamped with this limiter's namespace and the key (what a
   * refund checks), and marked `dryRun: true` by a dry-run limiter.
   */
  #marked(decision: Decision, key: string): Decision {
    StoreDecision.stamp(decision, this.#owner, key);
    if (this.mode === "dry-run") decision.dryRun = true;
    return decision;
  }

  #withTimeout<T>(promise: Promise<T>): Promise<T> {
    const timeoutMs = this.timeoutMs;
    if (timeoutMs === false) return promise;
    const bound = this.#bound;
    const extend = this.#patient ? bound.extendTimeout : undefined;
    return new Promise<T>((resolve, reject) => {
      let waitedMs = timeoutMs;
      const expire = () => {
        // the default timeout: a store whose server is busy rather than hung may ask for more time
        const moreMs = extend === undefined ? 0 : extend.call(bound, waitedMs, timeoutMs);
        if (moreMs > 0) {
          waitedMs += moreMs;
          timer = setTimeout(expire, moreMs);
          return;
        }
        const extended = waitedMs === timeoutMs ? "" : `; waited ${waitedMs} ms while the store answered other calls`;
        reject(new SluiceTimeoutError(`store did not answer within timeoutMs (${timeoutMs} ms${extended})`));
      };
      let timer = setTimeout(expire, timeoutMs);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  #failed(error: unknown, viaFallback: (fallback: BoundStore) => StoreResult): Decision {
    if (error instanceof SluiceConfigError || error instanceof SluiceInputError) throw error;
    const reason: DecisionReason = error instanceof SluiceTimeoutError ? "timeout" : "store-error";
    try {
      this.#onStoreFailure?.(error);
    } catch {
      // a failing logger must not turn a decision into an exception
    }
    if (this.onStoreError === "fallback") {
      this.#fallback ??= new MemoryStore().bind(this.#namespace);
      return toDecision(viaFallback(this.#fallback), reason);
    }
    return storeFailureDecision(this.policies, Date.now(), this.onStoreError === "allow", reason);
  }
}
