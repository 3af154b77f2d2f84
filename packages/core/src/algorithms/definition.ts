/**
 * What every algorithm gives the rest of Sluice: the contract an algorithm folder fills in
 * ({@link AlgorithmDefinition}), and the small helpers the folders share (option parsing, result
 * building, exact integer division).
 *
 * An algorithm reads and writes its state per key by name (`state.count`), as declared with
 * `stateLayout` (`state.ts`): named numbers and, when it needs a variable-length list (the sliding
 * log's entries, the concurrency cap's leases), named lists. Every number 0 and every list
 * `undefined` is the empty state for every algorithm.
 *
 * @module
 */
import { MAX_DURATION_MS } from "../duration.js";
import { SluiceConfigError, describe } from "../errors.js";
import type { PolicyResult } from "../results.js";
import type { StateLayout } from "./state.js";

/**
 * The penalty box of a policy, parsed: when the policy denies, the key is blocked for
 * `baseMs × factor^(n-1)` (at most `maxMs`), n being the offences within `maxMs` of the end of the
 * previous block.
 */
export interface BlockSpec {
  readonly baseMs: number;
  /** A positive integer (integers keep every store's arithmetic exact). */
  readonly factor: number;
  readonly maxMs: number;
}

/** The fields every policy has, whatever its algorithm. */
export interface PolicyCommon {
  /** Name used in headers (`RateLimit-Policy`) and in storage keys. */
  readonly name: string;
  /** The quota reported in headers: `limit`, `capacity` or `burst`. */
  readonly limit: number;
  /** The `w` of `RateLimit-Policy`, in whole seconds. */
  readonly windowSeconds: number;
  /** The penalty box: how long a denial blocks the key; absent when the policy has none. */
  readonly block?: BlockSpec;
}

/**
 * How an algorithm hands out units ahead of their use (the limiter's `reserve` option) without
 * letting any span admit more than its bound: a unit is charged before it is used, and this rule
 * bounds what it may do between its charge and its use.
 */
export interface ReservationRule<P, S = unknown> {
  /** Whether `policy` may hand out units ahead of their use (a queue's delays are per request: it may not). */
  reservable(policy: P): boolean;
  /**
   * Epoch ms until which units charged at `nowMs` may serve (a window's units serve only inside
   * the window they were charged in); `Infinity` when only the hold bounds them.
   */
  servesUntilMs(policy: P, nowMs: number): number;
  /**
   * Epoch ms after which units charged at `chargedAtMs` count for nothing any more (a fixed window
   * that ended), so that giving unused ones back would change nothing; absent: they count until
   * the state forgets them, and are given back.
   */
  countedUntilMs?(policy: P, chargedAtMs: number): number;
  /** The longest hold (ms) this policy allows a reservation, so that what it holds back from other instances stays small. */
  maxHoldMs(policy: P): number;
  /**
   * Right after a reservation charged `units` at `nowUs`: counts the charge as made at `nowUs +
   * holdUs`, the last moment its units may serve (a bucket, which would otherwise refill beneath
   * units held elsewhere). Absent when where a unit sits in its window does not matter.
   */
  hold?(policy: P, state: S, nowUs: number, holdUs: number, units: number): void;
}

/**
 * Everything Sluice knows about one algorithm, in one place. The registry
 * (`algorithms/index.ts`) maps every policy kind to its definition, so the compiler refuses a kind
 * without one; nothing outside the `algorithms/` folders branches on a kind.
 *
 * Every number an algorithm keeps or compares is an integer (times in µs, windows in ms), so
 * TypeScript and Lua reach bit-identical decisions. Every value handed out is rounded up to whole ms.
 */
export interface AlgorithmDefinition<P extends PolicyCommon & { readonly kind: string }, S = unknown> {
  /** The policy kind (`Policy["kind"]`). */
  readonly kind: P["kind"];
  /** Two letters ending the field a policy's state is stored under (`"100-per-1m|sw"`): unique per kind. */
  readonly code: string;
  /** Its state per key, by name (see `stateLayout`): every method below reads and writes it through `state`. */
  readonly state: StateLayout<S>;
  /** Whether an allowed request holds a lease (one slot) until it is released or expires. */
  readonly leases: boolean;

  /** The factory (validates and parses its options once; throws `SluiceConfigError`). */
  create(options: Record<string, unknown>): P;
  /**
   * The options `create` takes to rebuild `policy` exactly, in ms for durations, without `name`
   * and `block` (the caller adds them): the plain data that travels to a Durable Object.
   */
  options(policy: P): Record<string, number>;
  /**
   * Whether a hand-made object has every parameter this algorithm reads, valid (the fields of
   * {@link PolicyCommon} are checked by the caller): so it cannot slip non-integers into the arithmetic.
   */
  isValid(policy: Record<string, unknown>): boolean;
  /** The largest cost the policy can ever admit (beyond it: `cost-exceeds-limit`). */
  maxCost(policy: P): number;
  /**
   * The largest quota an override (`limiter.setOverride`) may give this policy: Redis mirrors it
   * as a constant, and a quota above it is clamped to it.
   */
  maxQuota(policy: P): number;
  /**
   * The policy with quota `quota` in place of its own (an override's effective policy): the same
   * name, kind and penalty box, the rest scaled so that the algorithm's shape holds (a window keeps
   * its length; a bucket's rate scales with its size, so that it still fills in about the same
   * time). `quota` is a positive safe integer at most {@link AlgorithmDefinition.maxQuota}.
   */
  withQuota(policy: P, quota: number): P;
  /**
   * The quota unit of a policy that counts something other than requests per window (the IETF
   * `qu` parameter: `"concurrent-requests"` for the concurrency cap, whose `RateLimit-Policy`
   * member then has no `w`); absent for a policy with a window (`w` = `windowSeconds`).
   */
  readonly quotaUnit?: string;

  /**
   * Evaluates the policy for `cost` at `nowUs`. If allowed and `write`, stores the new state; a
   * denial writes nothing. The result is after consumption when allowed, the state now when
   * denied. `cost === Infinity` (never a real request) takes the denial path: the state now.
   * `lease` is the id an allowed request holds (0: none given) on a policy with `leases`.
   */
  evaluate(policy: P, state: S, nowUs: number, cost: number, write: boolean, lease: number): PolicyResult;
  /**
   * Gives `cost` units back for a request charged at `chargedAtUs` (-1: the latest charge) whose
   * mark (see {@link AlgorithmDefinition.mark}) was `markUs` (-1: the current one; 0: unknown),
   * never more than the state holds and never letting any span admit more than it would have had
   * the refunded request never been made. `priceUs` is what one unit of that charge weighed (see
   * {@link AlgorithmDefinition.unitPrice}; 0: the policy's own price now). Returns whether the
   * state changed.
   */
  refund(policy: P, state: S, nowUs: number, cost: number, chargedAtUs: number, markUs: number, priceUs: number): boolean;
  /** Frees lease `lease` (a policy with `leases`); idempotent. Returns whether the state changed. */
  release?(policy: P, state: S, nowUs: number, lease: number): boolean;
  /**
   * The mark of the charge just made (read right after an allowed write), which a refund of that
   * charge needs to know how much of it the state still holds; absent for an algorithm whose
   * refund needs none (its mark is 0).
   */
  mark?(policy: P, state: S): number;
  /**
   * What one unit of a charge under `policy` weighs, for an algorithm whose units weigh something
   * other than one count (a bucket: its emission interval, µs). The limiter records it with the
   * charge, so that a refund made after an override changed the policy still gives back what the
   * charge took, no more and no less. Absent for an algorithm whose unit is a count.
   */
  unitPrice?(policy: P): number;
  /** A charge's mark once `units` of it were given back already (refunds in parts). */
  refundedMark?(policy: P, mark: number, units: number): number;
  /**
   * How units reserved ahead of their use stay within the bound (see {@link ReservationRule});
   * absent for an algorithm that never reserves (a log's entries carry their own times, a lease is
   * one request's): a limiter with such a policy decides every request in the store.
   */
  readonly reservation?: ReservationRule<P, S>;
  /** When (µs) the state is empty again: its natural expiry; 0 if already empty. */
  expiresAtUs(policy: P, state: S): number;

  /**
   * Appends the state's stored form (a list of safe integers, after the expiry a store keeps in
   * front) to `out`; returns `false` when nothing live is left to store.
   */
  encode(policy: P, state: S, nowUs: number, out: number[]): boolean;
  /**
   * Reads a stored form (`value[1..]`, `value[0]` being the expiry) into the state; returns `false`
   * (the state left empty) when it is malformed: losing state may only ever forget it.
   */
  decode(policy: P, value: readonly number[], state: S, nowUs: number): boolean;
}

/** A policy's result, as every algorithm builds it. */
export function result(
  policy: PolicyCommon,
  allowed: boolean,
  remaining: number,
  resetAt: number,
  retryAfterMs: number,
  delayMs: number,
  refillAt: number,
): PolicyResult {
  return { policy: policy.name, allowed, limit: policy.limit, remaining, resetAt, retryAfterMs, delayMs, refillAt };
}

/** The state of an algorithm whose state is its numbers, and its stored form: those numbers, in order. */
export function numericState<S>(layout: StateLayout<S>): Pick<AlgorithmDefinition<PolicyCommon & { kind: string }, S>, "state" | "encode" | "decode"> {
  return {
    state: layout,
    encode(_policy, state, _nowUs, out) {
      layout.pushNumbers(state, out);
      return true;
    },
    decode(_policy, value, state) {
      if (value.length !== 1 + layout.numWidth) return false;
      layout.setNumbers(state, value, 1);
      return true;
    },
  };
}

const NAME_RE = /^[!#$%&'*+\-./0-9:<>?@A-Z[\]^_`a-z|~]{1,128}$/;

/** Whether `value` is a valid policy name (used in headers and keys). */
export function isName(value: unknown): value is string {
  return typeof value === "string" && NAME_RE.test(value);
}

/** Validates a policy name (used in headers and keys); `option` names it in the error. */
export function validateName(value: unknown, option: string): string {
  if (!isName(value)) {
    throw new SluiceConfigError(
      `${option} must be 1-128 visible ASCII characters without spaces, quotes, backslashes, commas, semicolons, "=", parentheses or braces; got ${describe(value)}`,
      { option },
    );
  }
  return value;
}

/** Throws unless a factory's `options` is an object (`option: "options"`; `factory` names the factory in the message). */
export function requireObject(options: unknown, factory: string): asserts options is Record<string, unknown> {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new SluiceConfigError(`options must be an object (the options of ${factory}()); got ${describe(options)}`, { option: "options" });
  }
}

export function positiveInt(value: unknown, option: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw new SluiceConfigError(`${option} must be a positive safe integer; got ${describe(value)}`, { option });
  }
  return value;
}

/**
 * The largest quota any policy may have (2^52): a window's `limit`, a bucket's `capacity`, `burst`
 * and `queue`, a concurrency cap's `limit`, and every quota an override gives (its `scale` or
 * `quotas`). Below it, every number a store answers (counts, remaining units, times in µs and ms,
 * a bucket's marks) stays below 2^53 − 64, where every Redis client parses integers exactly:
 * node-redis 5 reads a RESP integer digit by digit in doubles (`n * 10 + digit`), which is off by
 * one within 57 of 2^53 (9007199254740991 reads as 9007199254740992).
 *
 * @example
 * ```ts
 * import { MAX_QUOTA, fixedWindow } from "@sluice/core";
 * fixedWindow({ limit: MAX_QUOTA, window: "1d" }); // the largest limit there is
 * ```
 */
export const MAX_QUOTA = 2 ** 52;

/** A quota option (`limit`, `capacity`, `burst`): a positive safe integer of at most {@link MAX_QUOTA}. */
export function quotaInt(value: unknown, option: string): number {
  const quota = positiveInt(value, option);
  if (quota > MAX_QUOTA) throw tooLarge(quota, option);
  return quota;
}

/** A queue: a non-negative safe integer of at most {@link MAX_QUOTA}. */
export function queueInt(value: unknown, option: string): number {
  const queue = nonNegativeInt(value, option);
  if (queue > MAX_QUOTA) throw tooLarge(queue, option);
  return queue;
}

function tooLarge(value: number, option: string): SluiceConfigError {
  return new SluiceConfigError(
    `${option} must be at most 2^52 (${MAX_QUOTA}), so that every number a store answers stays exact on every Redis client; got ${value}`,
    { option },
  );
}

export function nonNegativeInt(value: unknown, option: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new SluiceConfigError(`${option} must be a non-negative safe integer; got ${describe(value)}`, { option });
  }
  return value;
}

/** `ceil(a / b)` for non-negative safe integers, exactly. */
export function ceilDiv(a: number, b: number): number {
  const rem = a % b;
  return (a - rem) / b + (rem === 0 ? 0 : 1);
}

/** Whether `x` is a safe integer of at least `min`. */
export function isCount(x: unknown, min = 1): x is number {
  return typeof x === "number" && Number.isSafeInteger(x) && x >= min;
}

/** Whether `x` is a valid duration in ms (a positive safe integer of at most 2^31-1). */
export function isDurationMs(x: unknown): x is number {
  return isCount(x) && x <= MAX_DURATION_MS;
}
