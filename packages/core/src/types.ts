import type { Policy } from "./algorithms/index.js";
import type { ControlResult, Override, StoreCommand } from "./overrides.js";

/** A value, or a promise of it: the in-memory store answers synchronously. */
export type MaybePromise<T> = T | Promise<T>;

export type { DecisionReason, PolicyResult } from "./results.js";
import type { DecisionReason, PolicyResult } from "./results.js";

/**
 * The answer to one `limit()` or `peek()` call. A denial is a normal value, never an exception.
 *
 * @example
 * ```ts
 * const d = await limiter.limit("user:42");
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms (policy ${d.policy})`);
 * ```
 */
export interface Decision {
  /** Whether the request may proceed. */
  allowed: boolean;
  /** Epoch ms by the store's clock: the base of every relative header value. */
  now: number;
  /** Quota of the binding policy. */
  limit: number;
  /** Whole units left in the binding policy after this request, `>= 0`. */
  remaining: number;
  /** Epoch ms when the binding policy is back to its full quota. */
  resetAt: number;
  /** 0 if allowed; else ms until the same cost can pass; `Infinity` if never. */
  retryAfterMs: number;
  /** > 0 only for leaky-bucket shaping: wait this long before serving. */
  delayMs: number;
  /** Name of the binding policy: when denied, the denying policy with the largest `retryAfterMs`; when allowed, the one with the least `remaining`. */
  policy: string;
  /** One result per configured policy, in configuration order. */
  policies: PolicyResult[];
  /**
   * `"ok"`; `"limit"` (denied by the store); `"cost-exceeds-limit"` (a cost that can never pass:
   * `retryAfterMs: Infinity`); `"cached-deny"` (denied by the limiter's deny cache, without asking
   * the store: a denial the store gave this key and cost within the last `retryAfterMs`, every
   * field of it — `override`, `policies` with `blocked` and `blockedUntil` — carried and its times
   * moved on by the time elapsed, so the decision and the headers read as the store's own would);
   * `"store-error"` or `"timeout"` (the store failed: the decision came from `onStoreError`).
   */
  reason: DecisionReason;
  /** Background work (analytics, sync) to hand to `waitUntil`; resolved if there is none. */
  pending: Promise<void>;
  /**
   * `true` when the limiter runs in `mode: "dry-run"` (shadow mode): `allowed` says what enforcing
   * would have done, and the request pipeline lets the request through either way. A `RateLimiter`
   * always sets it (`false` when enforcing); it is optional only so that a decision made by hand
   * (a test, a custom store's tooling) need not say it.
   */
  dryRun?: boolean;
  /**
   * The lease this request holds on the limiter's concurrency policy (a `concurrency()` limit): the
   * decimal form of a random positive integer, set only on an allowed decision that acquired one
   * (in dry run too). The request pipeline of every adapter releases it when the response has been
   * produced (a streamed body: when the stream ends or is cancelled); outside an adapter, call
   * `limiter.release(key, decision)`. Never released, it expires after the policy's `lease`.
   * Absent when the limiter has no concurrency policy.
   */
  lease?: string;
  /**
   * `true` on a decision made from units this instance reserved ahead (the limiter's `reserve`
   * option), without a store round trip: always an allowed one. Its `remaining` is what this
   * instance knows, the units it still holds plus what the store said was left when it reserved
   * them; its times are the store's, moved on by the time elapsed. Absent otherwise.
   */
  reserved?: boolean;
  /**
   * The key's override that applied (`limiter.setOverride`): `limit`, `remaining` and the
   * policies' results are then the effective ones (the headers' `q` and `r` too). Absent when none
   * applied.
   */
  override?: Override;
}

/** What a store returns for one decision: the store's clock and one result per policy. */
export interface StoreResult {
  /** Epoch ms by the store's clock. */
  now: number;
  /** One result per policy of the namespace, in order. */
  policies: PolicyResult[];
  /**
   * After an allowed `consume`, the charge's marks, one integer per policy, in order (a bucket's
   * theoretical arrival time right after the charge, in µs; 0 for the others): the limiter keeps
   * them with the decision and hands them back to {@link BoundStore.refund}, so that a refund
   * never gives back more than the charge still weighs. Absent when no policy needs one.
   */
  marks?: readonly number[];
  /**
   * The key's override that applied to this decision (see `limiter.setOverride`), or absent when
   * none did. A store that keeps overrides (`BoundStore.control`) reports it.
   */
  override?: Override | undefined;
}

/**
 * What a store returns for a reservation ({@link BoundStore.reserve}): the units granted, and the
 * key's state after them.
 */
export interface ReserveResult extends StoreResult {
  /**
   * Units charged to every policy of the key, all or nothing: at most the units asked, at most what
   * every policy can give now; 0 when none can (a limit reached, a block running, an unlimited
   * override: nothing to reserve), and then nothing changed.
   */
  granted: number;
}

/**
 * Which charge a refund gives back to (see {@link BoundStore.refund}): the decision's `now` and
 * the marks its store returned with it.
 */
export interface RefundCharge {
  /** Epoch ms by the store's clock when the request was charged: the decision's `now`. */
  readonly atMs: number;
  /**
   * The charge's marks ({@link StoreResult.marks}), moved back for the units of that charge
   * refunded already; `undefined` when the store returned none.
   */
  readonly marks: readonly number[] | undefined;
  /**
   * Per policy, what one unit of the charge weighed when it was made (a bucket: its emission
   * interval then, in µs, under the override in force then; 0 for a policy that prices no unit):
   * a refund gives back at that price, whatever quota is in force when it is made. Absent (or 0 for
   * a policy): the price in force now, which is the charge's own unless an override changed since.
   */
  readonly prices?: readonly number[] | undefined;
}

/** A key namespace: a prefix and the policies every key in it is checked against. */
export interface StoreNamespace {
  /** Key prefix, e.g. `"sluice"`. */
  readonly prefix: string;
  /** The tier (plan) of a tiered guard, e.g. `"pro"`; `undefined` for a plain limiter. */
  readonly tier?: string | undefined;
  /** The policies, in order. */
  readonly policies: readonly Policy[];
}

/**
 * A store bound to one namespace. Each call runs a whole decision for one key — all policies —
 * atomically, with the store's own clock. Every method but {@link BoundStore.extendTimeout} is
 * required: a `RateLimiter` refuses, at construction, a store whose bound namespace lacks `refund`
 * or `release` (`SluiceConfigError`, option `"store"`).
 */
export interface BoundStore {
  /**
   * Checks every policy for `cost`; if all allow, consumes from all; otherwise consumes nothing.
   * `lease` (given by the limiter when it has a concurrency policy: a random positive safe integer)
   * is the id under which an allowed request holds its slot of every concurrency policy, until
   * {@link BoundStore.release} or the policy's lease expires.
   */
  consume(key: string, cost: number, lease?: number): MaybePromise<StoreResult>;
  /** The state now, and whether a cost-1 request would pass; consumes nothing. */
  peek(key: string): MaybePromise<StoreResult>;
  /** Forgets every policy's state for `key`. */
  reset(key: string): MaybePromise<void>;
  /**
   * Gives `cost` units back to every policy of `key`, atomically, for the request `charge` names
   * (`undefined`: the key's latest charges), never more than the state holds, never above a
   * policy's quota, and never letting any span admit more than it would have had that request
   * never been made (see `refundState` in `@sluice/core/store`). Answers the state afterwards, as
   * `peek` does. `RateLimiter.refund` and the pipeline's `countWhen` call it.
   */
  refund(key: string, cost: number, charge: RefundCharge | undefined): MaybePromise<StoreResult>;
  /**
   * Frees the slot `lease` holds on every concurrency policy of `key`, atomically (expired leases
   * are dropped too). Idempotent: an unknown, already released or expired lease is a no-op.
   * Answers the state afterwards, as `peek` does. A namespace without a `concurrency()` policy
   * holds no leases: there it only answers the state. `RateLimiter.release` and the pipeline (when
   * a response is done) call it.
   */
  release(key: string, lease: number): MaybePromise<StoreResult>;
  /**
   * Optional (every Sluice store has it): charges up to `units` to every policy of `key` at once,
   * all or nothing, for the limiter to admit requests from later without a round trip each (its
   * `reserve` option): as many as every policy can give now (the least of their `remaining`), under
   * the key's override, none while a block runs or an unlimited override applies. A bucket counts
   * them as used `holdMs` from now, the last moment they may serve (see `reserveState` in
   * `@sluice/core/store`). Answers the units granted, the state after them, and the charge's marks
   * (for the refund of the units left unused). A limiter over a store without it decides every
   * request in the store.
   */
  reserve?(key: string, units: number, holdMs: number): MaybePromise<ReserveResult>;
  /**
   * Optional, for a store that can tell a busy server from a hung one. A limiter whose `timeoutMs`
   * is left at its default asks it when a call has waited `waitedMs` (at first `timeoutMs`) with
   * no answer: how many more milliseconds to wait (0 or less: the call times out now). The store
   * bounds the total. `@sluice/redis` waits while its server answered any call within the last
   * `timeoutMs`, up to 5 s in all: a cold burst on a loaded machine is answered, a hung server
   * still fails a call after `timeoutMs`.
   */
  extendTimeout?(waitedMs: number, timeoutMs: number): number;
  /**
   * Overrides and manual blocks (`limiter.setOverride`, `getOverride`, `clearOverride`, `block`,
   * `unblock`): runs `command` on the record of `key`, atomically, in one round trip, with the
   * store's clock (see `controlState` in `@sluice/core/store` for the exact semantics, and the
   * fields it keeps next to the policies'). Every Sluice store has it; a store without it cannot
   * hold overrides (those limiter methods then throw `SluiceConfigError`, option `"store"`), and
   * its decisions apply none. A store that has it applies the key's override and manual block in
   * every `consume`, `peek`, `refund` and `release`, and reports the override in
   * `StoreResult.override`.
   */
  control?(key: string, command: StoreCommand): MaybePromise<ControlResult>;
}

/**
 * The storage contract. A store is bound once per namespace (per limiter, per tier); the bound
 * object does the per-request work, so per-namespace setup (key layout, script arguments) happens
 * once.
 *
 * @example
 * ```ts
 * const bound = new MemoryStore().bind({ prefix: "sluice", policies: [fixedWindow({ limit: 5, window: "1m" })] });
 * const result = await bound.consume("user:1", 1);
 * ```
 */
export interface Store {
  /** Prepares a namespace. Called by `RateLimiter` at construction. */
  bind(namespace: StoreNamespace): BoundStore;
}
