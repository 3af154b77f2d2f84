/**
 * The fixed window, as the test kit knows it: a counter per window index (`floor(now / W)`), the
 * bound "at most `limit` units per window", and its random options.
 *
 * @module
 */
import { type Policy, fixedWindow } from "@sluice/core";
import { type Model, type ModelCharge, type PolicyOf, assertRetarget, windowReference } from "./definition.js";

class FixedWindowModel implements Model {
  readonly counts = new Map<number, number>();
  maxCost: number;
  policy: PolicyOf<"fixedWindow">;
  constructor(readonly base: PolicyOf<"fixedWindow">) {
    this.policy = base;
    this.maxCost = base.limit;
  }
  /** Another quota: the counts stay, the window keeps its length. */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["windowMs"]);
    this.policy = policy as PolicyOf<"fixedWindow">;
    this.maxCost = policy.limit;
  }
  private window(nowMs: number) {
    const idx = Math.floor(nowMs / this.policy.windowMs);
    return { idx, used: this.counts.get(idx) ?? 0, end: (idx + 1) * this.policy.windowMs };
  }
  check(nowMs: number, cost: number) {
    const { used, end } = this.window(nowMs);
    const allowed = used + cost <= this.policy.limit;
    // (more used than the limit: a window counted under a larger quota, a key's override that ended)
    return { allowed, remaining: Math.max(0, this.policy.limit - used - (allowed ? cost : 0)), resetAt: end, delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    const { idx, used } = this.window(nowMs);
    this.counts.set(idx, used + cost);
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // the count of the window the request was charged in, if that window is still the current one
    const idx = Math.floor((charge?.atMs ?? nowMs) / this.policy.windowMs);
    if (idx !== Math.floor(nowMs / this.policy.windowMs)) return;
    this.counts.set(idx, Math.max(0, (this.counts.get(idx) ?? 0) - cost));
  }
  snapshot() {
    return 0;
  }
  now(nowMs: number) {
    const { used, end } = this.window(nowMs);
    return { remaining: Math.max(0, this.policy.limit - used), resetAt: end };
  }
  /** The quota grows back only at the end of the window. */
  refillAt(nowMs: number) {
    return this.now(nowMs).resetAt;
  }
}

export const fixedWindowReference = windowReference("fixedWindow", fixedWindow, (policy) => new FixedWindowModel(policy));
