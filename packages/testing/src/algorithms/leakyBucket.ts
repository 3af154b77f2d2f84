/**
 * The leaky bucket, as the test kit knows it: a meter whose water drains at one µs per µs, the
 * bound "at most `burst + queue` units at once, then one per emission interval", and its random
 * options.
 *
 * @module
 */
import { type Policy, leakyBucket } from "@sluice/core";
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

/** The options of a leaky bucket's spec. */
export interface LeakyBucketSpecOptions extends SpecCommon {
  rate: number;
  period: number | string;
  burst: number;
  queue?: number;
}

/** Leaky bucket as a meter: water (µs of backlog) drains at 1 µs per µs; a request pours cost × T. */
class LeakyBucketModel implements Model {
  readonly water = { level: 0, at: 0 };
  /** The refund shift (µs), as the token bucket's model keeps it. */
  shift = 0;
  maxCost: number;
  T: number;
  burst: number;
  queue: number;
  policy: PolicyOf<"leakyBucket">;
  /** The emission interval of the model's own policy (µs). */
  readonly baseT: number;
  constructor(readonly base: PolicyOf<"leakyBucket">) {
    this.policy = base;
    this.burst = base.burst;
    this.queue = base.queue;
    this.maxCost = base.burst + base.queue;
    this.baseT = ceilDiv(base.periodMs * 1000, base.rate);
    this.T = this.baseT;
  }
  private levelAt(nowMs: number) {
    return Math.max(0, this.water.level - (nowMs - this.water.at) * 1000);
  }
  check(nowMs: number, cost: number) {
    const level = this.levelAt(nowMs);
    const poured = level + cost * this.T;
    const { burst, queue } = this;
    if (poured <= burst * this.T) {
      return { allowed: true, remaining: Math.floor((burst * this.T - poured) / this.T), resetAt: ceilDiv(nowMs * 1000 + poured, 1000), delayMs: 0 };
    }
    if (poured <= (burst + queue) * this.T) {
      return { allowed: true, remaining: 0, resetAt: ceilDiv(nowMs * 1000 + poured, 1000), delayMs: ceilDiv(poured - burst * this.T, 1000) };
    }
    return { allowed: false, ...this.now(nowMs), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    // the shift fades by the time the bucket has been empty
    const dry = (nowMs - this.water.at) * 1000 - this.water.level;
    if (dry > 0) this.shift = Math.max(0, this.shift - dry);
    this.water.level = this.levelAt(nowMs) + cost * this.T;
    this.water.at = nowMs;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // water out, the bucket never below empty, and never more than the charge still weighs: the
    // time until its water has drained, i.e. the water right after it (plus the shift then), less
    // what drained since, what was given back of it already and the shift now (see the token
    // bucket's model); a refund of a charge other than the last one grows the shift
    const level = this.levelAt(nowMs);
    if (level <= 0) return;
    // each unit at the emission interval of the quota it was charged under
    const unit = charge?.price !== undefined && charge.price > 0 ? charge.price : this.T;
    const ahead = charge === undefined ? level : charge.snapshot - (nowMs - charge.atMs) * 1000 - charge.refunded * unit - this.shift;
    const last = ahead >= level;
    const back = Math.min(cost * unit, level, ahead, last ? Infinity : MAX_GCRA_SHIFT_US - this.shift);
    if (back <= 0) return;
    if (!last) this.shift += back;
    this.water.level = level - back;
    this.water.at = nowMs;
  }
  /** The water right after a charge (µs), plus the shift. */
  price() {
    return this.T;
  }
  snapshot() {
    return this.water.level + this.shift;
  }
  now(nowMs: number) {
    const level = this.levelAt(nowMs);
    return {
      remaining: Math.max(0, Math.floor((this.burst * this.T - level) / this.T)),
      resetAt: ceilDiv(nowMs * 1000 + level, 1000),
    };
  }
  /**
   * A burst of Q' (its own Q), a queue of floor(queue × Q'/Q) and drops every
   * T' = max(1, ceil(T × Q/Q')) µs. The water (the backlog in µs) stays as it is.
   */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["periodMs", "rate"]);
    const quota = policy.limit;
    const own = quota === this.base.burst;
    const T = own ? this.baseT : Math.max(1, ceilDiv(this.baseT * this.base.burst, quota));
    const queue = own ? this.base.queue : Math.floor((this.base.queue * quota) / this.base.burst);
    const p = policy as PolicyOf<"leakyBucket">;
    if (p.burst !== quota || p.queue !== queue || p.emissionIntervalUs !== T) {
      throw new Error(`reference: core's effective leaky bucket of ${JSON.stringify(policy.name)} with quota ${quota} has burst ${p.burst}, queue ${p.queue}, T ${p.emissionIntervalUs} µs; the contract says ${quota}, ${queue}, ${T} µs`);
    }
    this.policy = p;
    this.T = T;
    this.burst = quota;
    this.queue = queue;
    this.maxCost = quota + queue;
  }
}

export const leakyBucketReference: ReferenceAlgorithm<"leakyBucket", LeakyBucketSpecOptions> = {
  kind: "leakyBucket",
  leases: false,
  create: (options) => leakyBucket(options as Parameters<typeof leakyBucket>[0]),
  model: (policy) => new LeakyBucketModel(policy),
  violatedBound: bucketBound,
  timeScalesMs: bucketTimeScalesMs,
  arbitrary: {
    options: fc.record({
      rate: fc.integer({ min: 1, max: 7 }),
      period: smallWindowMs,
      burst: fc.integer({ min: 1, max: 6 }),
      queue: fc.integer({ min: 0, max: 3 }),
    }),
    weight: 15,
  },
  // no queue: a shaped request would wait delayMs in real time
  agreementArbitrary: (name) =>
    fc
      .record({ rate: fc.integer({ min: 1, max: 5 }), periodMs: fc.integer({ min: 200, max: 20_000 }), burst: fc.integer({ min: 1, max: 5 }) })
      .map(({ rate, periodMs, burst }) => leakyBucket({ rate, period: periodMs, burst, name })),
  maxCost: (options) => options.burst + (options.queue ?? 0),
  vectorSpanMs: () => 3000,
};
