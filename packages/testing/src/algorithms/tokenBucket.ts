/**
 * The token bucket, as the test kit knows it: the seed's class (starts full, refills
 * continuously), the bound "at most `capacity` units at once, then one per emission interval", and
 * its random options.
 *
 * @module
 */
import { tokenBucket } from "@sluice/core";
import fc from "fast-check";
import {
  type Model,
  type ModelCharge,
  type PolicyOf,
  type ReferenceAlgorithm,
  type SpecCommon,
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
  readonly levels = { level: -1, at: 0 };
  readonly maxCost: number;
  readonly T: number;
  readonly full: number;
  constructor(readonly policy: PolicyOf<"tokenBucket">) {
    this.maxCost = policy.capacity;
    this.T = ceilDiv(policy.intervalMs * 1000, policy.refillRate);
    this.full = policy.capacity * this.T;
  }
  private levelAt(nowMs: number) {
    if (this.levels.level < 0) return this.full;
    return Math.min(this.full, this.levels.level + (nowMs - this.levels.at) * 1000);
  }
  check(nowMs: number, cost: number) {
    const level = this.levelAt(nowMs);
    const allowed = level >= cost * this.T;
    const after = allowed ? level - cost * this.T : level;
    return { allowed, remaining: Math.floor(after / this.T), resetAt: ceilDiv(nowMs * 1000 + this.full - after, 1000), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    this.levels.level = this.levelAt(nowMs) - cost * this.T;
    this.levels.at = nowMs;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // tokens back, the bucket never above full, and never more than the charge still weighs: the
    // deficit it left (full − the level right after it), less the refill since and what was given
    // back of it already. A charge the refill has erased (the bucket has been full since) weighs nothing.
    const level = this.levelAt(nowMs);
    let back = Math.min(cost * this.T, this.full - level);
    if (charge !== undefined) back = Math.min(back, this.full - charge.snapshot - (nowMs - charge.atMs) * 1000 - charge.refunded * this.T);
    if (back <= 0) return;
    this.levels.level = level + back;
    this.levels.at = nowMs;
  }
  snapshot() {
    return this.levels.level;
  }
  now(nowMs: number) {
    const level = this.levelAt(nowMs);
    return { remaining: Math.floor(level / this.T), resetAt: ceilDiv(nowMs * 1000 + this.full - level, 1000) };
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
