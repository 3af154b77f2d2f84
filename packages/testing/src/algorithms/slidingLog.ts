/**
 * The sliding log, as the test kit knows it: a list of every admitted request, the bound "at most
 * `limit` units in every span `(now - W, now]`", and its random options.
 *
 * @module
 */
import { type Policy, slidingLog } from "@sluice/core";
import fc from "fast-check";
import { type Admission, type Model, type ModelCharge, type PolicyOf, assertRetarget, netUnits, windowReference } from "./definition.js";

class SlidingLogModel implements Model {
  readonly log: { at: number; cost: number }[] = [];
  maxCost: number;
  policy: PolicyOf<"slidingLog">;
  constructor(readonly base: PolicyOf<"slidingLog">) {
    this.policy = base;
    this.maxCost = base.limit;
  }
  /** Another quota: the counts stay, the window keeps its length. */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["windowMs"]);
    this.policy = policy as PolicyOf<"slidingLog">;
    this.maxCost = policy.limit;
  }
  private live(nowMs: number) {
    return this.log.filter((e) => e.at > nowMs - this.policy.windowMs && e.at <= nowMs);
  }
  check(nowMs: number, cost: number) {
    const live = this.live(nowMs);
    const used = live.reduce((s, e) => s + e.cost, 0);
    const allowed = used + cost <= this.policy.limit;
    if (allowed) return { allowed, remaining: this.policy.limit - used - cost, resetAt: nowMs + this.policy.windowMs, delayMs: 0 };
    return { allowed, ...this.now(nowMs), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    this.log.push({ at: nowMs, cost });
  }
  snapshot() {
    return 0;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // that request's entries (or the latest ones), newest first, among those still in the window
    const chargedAtMs = charge?.atMs;
    let left = cost;
    for (let i = this.log.length - 1; i >= 0 && left > 0; i--) {
      const e = this.log[i]!;
      if (e.at <= nowMs - this.policy.windowMs) break;
      if (chargedAtMs !== undefined && e.at !== chargedAtMs) continue;
      const take = Math.min(left, e.cost);
      e.cost -= take;
      left -= take;
    }
    for (let i = this.log.length - 1; i >= 0; i--) if (this.log[i]!.cost === 0) this.log.splice(i, 1);
  }
  now(nowMs: number) {
    const live = this.live(nowMs);
    const used = live.reduce((s, e) => s + e.cost, 0);
    const newest = live.length > 0 ? Math.max(...live.map((e) => e.at)) : undefined;
    // (more in the log than the limit: entries admitted under a larger quota, a key's override that ended)
    return { remaining: Math.max(0, this.policy.limit - used), resetAt: newest === undefined ? nowMs : newest + this.policy.windowMs };
  }
}

function slidingLogBound(policy: PolicyOf<"slidingLog">, mine: readonly Admission[], nowMs: number): string | undefined {
  const W = policy.windowMs;
  const sum = mine.filter((a) => a.atMs > nowMs - W && a.atMs <= nowMs).reduce((s, a) => s + netUnits(a), 0);
  return sum > policy.limit ? `slidingLog ${policy.name}: ${sum} units admitted in (${nowMs - W}, ${nowMs}] (limit ${policy.limit})` : undefined;
}

export const slidingLogReference = windowReference("slidingLog", slidingLog, (policy) => new SlidingLogModel(policy), {
  bound: slidingLogBound,
  // any window from half a second to 90 s (the log has no window grid)
  agreementWindowMs: fc.integer({ min: 500, max: 90_000 }),
});
