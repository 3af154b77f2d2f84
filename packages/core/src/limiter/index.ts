/**
 * `RateLimiter`, the public class: its fields, and each public method handing its work to the
 * module of its concern with the limiter's private state ({@link LimiterCore}):
 *
 * - `setup.ts`: the constructor's checks, and the state built once;
 * - `decide.ts`: `limit()` and `peek()` — reservations, the deny cache, the store, the hot path;
 * - `refunds.ts`: `refund()`, and the give-backs of reservations;
 * - `leases.ts`: `release()`, and the leases of the fallback store;
 * - `control.ts`: overrides, manual blocks, `reset()`, and forgetting a cached denial;
 * - `reservations.ts`: whether a limiter reserves, its reservations' hooks, `returnReservations()`;
 * - `store-calls.ts`: the timeout, a store failure's decision, `onStoreFailure`, the stamp on every decision;
 * - `options.ts` and `state.ts`: what they all share (no concern module imports this one).
 *
 * @module
 */
import type { Policy } from "../algorithms/index.js";
import type { Duration } from "../duration.js";
import type { SluiceInputError } from "../errors.js";
import { assertKey } from "../keys.js";
import type { Override, OverrideOptions } from "../overrides.js";
import type { Decision, Store } from "../types.js";
import * as control from "./control.js";
import * as decide from "./decide.js";
import * as leases from "./leases.js";
import type { LimitOptions, LimiterMode, RateLimiterOptions, RefundOptions, StoreErrorMode } from "./options.js";
import * as refunds from "./refunds.js";
import * as reservations from "./reservations.js";
import { setUp } from "./setup.js";
import type { LimiterCore } from "./state.js";
import * as storeCalls from "./store-calls.js";

export { assertKey };
export { DEFAULT_TIMEOUT_MS, type LimitOptions, type LimiterMode, type RateLimiterOptions, type RefundOptions, type StoreErrorMode } from "./options.js";

/** The pipeline's way in to a limiter's private state, set by the class (module-private: not part of the public API). */
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
  /** Everything else the limiter holds, shared by the concern modules. */
  readonly #core: LimiterCore;

  constructor(options: RateLimiterOptions) {
    const core = setUp(this, options);
    this.policies = core.policies;
    this.prefix = core.namespace.prefix;
    this.store = core.store;
    this.onStoreError = core.onStoreError;
    this.timeoutMs = core.timeoutMs;
    this.tier = core.namespace.tier;
    this.mode = core.mode;
    this.#core = core;
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
      const decision = decide.limitNow(this.#core, key, options);
      return decision instanceof Promise ? decision : Promise.resolve(decision);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  static {
    // the pipeline's way in to the decision (module-private: not part of the public API)
    limitNowOf = (limiter, key, options) => decide.limitNow(limiter.#core, key, options);
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
  refund(key: string, options?: RefundOptions): Promise<Decision> {
    return refunds.refund(this.#core, key, options);
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
  returnReservations(): Promise<void> {
    return reservations.returnReservations(this.#core);
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
  release(key: string, lease: string | Decision): Promise<Decision> {
    return leases.release(this.#core, key, lease);
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
  peek(key: string): Promise<Decision> {
    return decide.peek(this.#core, key);
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
  reset(key: string): Promise<void> {
    return control.reset(this.#core, key);
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
  setOverride(key: string, override: Override, options?: OverrideOptions): Promise<void> {
    return control.setOverride(this.#core, key, override, options);
  }

  /**
   * `key`'s live override, as it was set (`undefined` when it has none, or it ended). One round trip.
   *
   * @example
   * ```ts
   * const override = await limiter.getOverride("customer-42"); // { scale: 10 } or undefined
   * ```
   */
  getOverride(key: string): Promise<Override | undefined> {
    return control.getOverride(this.#core, key);
  }

  /**
   * Removes `key`'s override: its next decision applies the limiter's own quotas. One round trip.
   *
   * @example
   * ```ts
   * await limiter.clearOverride("customer-42");
   * ```
   */
  clearOverride(key: string): Promise<void> {
    return control.clearOverride(this.#core, key);
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
  block(key: string, duration: Duration): Promise<void> {
    return control.block(this.#core, key, duration);
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
  unblock(key: string): Promise<void> {
    return control.unblock(this.#core, key);
  }

  /**
   * Hands a store failure that happened outside a decision (a refund after the response, say) to
   * `onStoreFailure`; nothing it throws escapes.
   * @internal
   */
  reportStoreFailure(error: unknown): void {
    storeCalls.reportStoreFailure(this.#core, error);
  }
}
