/**
 * The token bucket, as the test kit knows it: the seed's class (starts full, refills
 * continuously), the bound "at most `capacity` units at once, then one per emission interval", and
 * its random options.
 *
 * @module
 */
import { type Policy, tokenBucket } from "@sluice/core";
import fc from "fast-check";
import {
  MAX_GCRA_SHIFT_US,
  type Model,
  type ModelCharge,
  type PolicyOf,
  type ReferenceAlgorithm,
  type SpecCommon,
  assertRetarget,
  bucketBound,
  bucketTimeScalesMs,
  ceilDiv,
  smallWindowMs,
} from "./definition.js";

/** The options of a token bucket's spec. */
export interface TokenBucketSpecOptions extends SpecCommon {
  capacity: number;
  refillRate: number;
  interval?: number | string;
}

/**
 * Token bucket as the seed's class: starts full, refills continuously. The level is kept in
 * "µs of refill" (tokens × emission interval) so it stays an integer.
 */
class TokenBucketModel implements Model {
  /** The level (µs of refill) at `at` (ms); `fresh`: never charged, so full. */
  readonly levels = { level: 0, at: 0, fresh: true };
  /**
   * The refund shift (µs): what refunds of charges that were not the last in the queue gave back
   * since the bucket was last full, each of which moved the charges behind it earlier; less the
   * time the bucket has stayed full since (see `commit`).
   */
  shift = 0;
  maxCost: number;
  T: number;
  full: number;
  policy: PolicyOf<"tokenBucket">;
  /** The emission interval of the model's own policy (µs). */
  readonly baseT: number;
  constructor(readonly base: PolicyOf<"tokenBucket">) {
    this.policy = base;
    this.maxCost = base.capacity;
    this.baseT = ceilDiv(base.intervalMs * 1000, base.refillRate);
    this.T = this.baseT;
    this.full = base.capacity * this.T;
  }
  private levelAt(nowMs: number) {
    if (this.levels.fresh) return this.full;
    return Math.min(this.full, this.levels.level + (nowMs - this.levels.at) * 1000);
  }
  check(nowMs: number, cost: number) {
    const level = this.levelAt(nowMs);
    const allowed = level >= cost * this.T;
    const after = allowed ? level - cost * this.T : level;
    // (a level below 0: a bucket that was deeper under another quota, see retarget)
    return { allowed, remaining: Math.max(0, Math.floor(after / this.T)), resetAt: ceilDiv(nowMs * 1000 + this.full - after, 1000), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    // the shift fades by the time the bucket has been full (the level past full, uncapped)
    const overflow = this.levels.fresh ? Infinity : this.levels.level + (nowMs - this.levels.at) * 1000 - this.full;
    if (overflow > 0) this.shift = Math.max(0, this.shift - overflow);
    this.levels.level = this.levelAt(nowMs) - cost * this.T;
    this.levels.at = nowMs;
    this.levels.fresh = false;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // tokens back, the bucket never above full, and never more than the charge still weighs: the
    // time until its units are refilled. That is the deficit it left (full − the level right after
    // it, plus the shift then), less the refill since, what was given back of it already and the
    // shift now: the shift counts what earlier refunds moved it up in the queue (and may count
    // more, never less). A charge the refill has erased (the bucket has been full since) weighs
    // nothing. A refund of a charge other than the last one (its units end before the deficit
    // does) moves those behind it up: the shift grows by what it gave back.
    const level = this.levelAt(nowMs);
    const deficit = this.full - level;
    if (deficit <= 0) return;
    // each unit at the emission interval of the quota it was charged under
    const unit = charge?.price !== undefined && charge.price > 0 ? charge.price : this.T;
    const ahead = charge === undefined ? deficit : charge.snapshot - (nowMs - charge.atMs) * 1000 - charge.refunded * unit - this.shift;
    const last = ahead >= deficit;
    const back = Math.min(cost * unit, deficit, ahead, last ? Infinity : MAX_GCRA_SHIFT_US - this.shift);
    if (back <= 0) return;
    if (!last) this.shift += back;
    this.levels.level = level + back;
    this.levels.at = nowMs;
    this.levels.fresh = false;
  }
  /** The deficit right after a charge (full − level, µs: what the charge leaves to refill, the same under any quota), plus the shift. */
  price() {
    return this.T;
  }
  snapshot() {
    return this.full - this.levels.level + this.shift;
  }
  now(nowMs: number) {
    const level = this.levelAt(nowMs);
    return { remaining: Math.max(0, Math.floor(level / this.T)), resetAt: ceilDiv(nowMs * 1000 + this.full - level, 1000) };
  }
  /**
   * A capacity of Q' tokens, each refilled in T' = max(1, ceil(T × Q/Q')) µs (about the same time
   * to fill). The store keeps the time the bucket is full again (now + full − level), unchanged:
   * so the level moves by the change of `full`, and may be below 0 (deeper than the new bucket).
   */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["intervalMs", "refillRate"]);
    const quota = policy.limit;
    const T = quota === this.base.capacity ? this.baseT : Math.max(1, ceilDiv(this.baseT * this.base.capacity, quota));
    const p = policy as PolicyOf<"tokenBucket">;
    if (p.capacity !== quota || p.burst !== quota || p.queue !== 0 || p.emissionIntervalUs !== T) {
      throw new Error(`reference: core's effective token bucket of ${JSON.stringify(policy.name)} with quota ${quota} has capacity ${p.capacity}, burst ${p.burst}, queue ${p.queue}, T ${p.emissionIntervalUs} µs; the contract says ${quota}, ${quota}, 0, ${T} µs`);
    }
    const full = quota * T;
    if (!this.levels.fresh) this.levels.level += full - this.full;
    this.policy = p;
    this.T = T;
    this.full = full;
    this.maxCost = quota;
  }
}

export const tokenBucketReference: ReferenceAlgorithm<"tokenBucket", TokenBucketSpecOptions> = {
  kind: "tokenBucket",
  leases: false,
  create: (options) => tokenBucket(options as Parameters<typeof tokenBucket>[0]),
  model: (policy) => new TokenBucketModel(policy),
  violatedBound: bucketBound,
  timeScalesMs: bucketTimeScalesMs,
  arbitrary: {
    options: fc.record({ capacity: fc.integer({ min: 1, max: 8 }), refillRate: fc.integer({ min: 1, max: 7 }), interval: smallWindowMs }),
    weight: 15,
  },
  agreementArbitrary: (name) =>
    fc
      .record({ capacity: fc.integer({ min: 1, max: 5 }), refillRate: fc.integer({ min: 1, max: 3 }), intervalMs: fc.integer({ min: 200, max: 20_000 }) })
      .map(({ capacity, refillRate, intervalMs }) => tokenBucket({ capacity, refillRate, interval: intervalMs, name })),
  maxCost: (options) => options.capacity,
  vectorSpanMs: () => 3000,
};
