/**
 * The sliding window, as the test kit knows it: the real count of every window index, weighed as
 * the design says (`prev*(W - r) + cur*W`, in exact integers), the bound "at most `limit` units in
 * the current window", and its random options.
 *
 * @module
 */
import { type Policy, slidingWindow } from "@sluice/core";
import { type Model, type ModelCharge, type PolicyOf, assertRetarget, windowReference } from "./definition.js";

class SlidingWindowModel implements Model {
  readonly counts = new Map<number, number>();
  maxCost: number;
  policy: PolicyOf<"slidingWindow">;
  constructor(readonly base: PolicyOf<"slidingWindow">) {
    this.policy = base;
    this.maxCost = base.limit;
  }
  /** Another quota: the counts stay, the window keeps its length. */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["windowMs"]);
    this.policy = policy as PolicyOf<"slidingWindow">;
    this.maxCost = policy.limit;
  }
  /** The weighted count scaled by W: prev*(W - r) + cur*W, with the counts of the real windows. */
  private view(nowMs: number) {
    const W = this.policy.windowMs;
    const idx = Math.floor(nowMs / W);
    const r = nowMs % W;
    const prev = this.counts.get(idx - 1) ?? 0;
    const cur = this.counts.get(idx) ?? 0;
    return { W, idx, r, prev, cur };
  }
  private passes(nowMs: number, cost: number, extra = new Map<number, number>()) {
    const { W, idx, r } = this.view(nowMs);
    const prev = (this.counts.get(idx - 1) ?? 0) + (extra.get(idx - 1) ?? 0);
    const cur = (this.counts.get(idx) ?? 0) + (extra.get(idx) ?? 0);
    return BigInt(prev) * BigInt(W - r) + BigInt(cur + cost) * BigInt(W) <= BigInt(this.policy.limit) * BigInt(W);
  }
  private remainingWith(nowMs: number, cur: number) {
    const { W, r, prev } = this.view(nowMs);
    const left = (BigInt(this.policy.limit) * BigInt(W) - BigInt(prev) * BigInt(W - r)) / BigInt(W);
    return Math.max(0, Number(left) - cur);
  }
  private resetWith(nowMs: number, cur: number) {
    const { W, idx, prev } = this.view(nowMs);
    return cur > 0 ? (idx + 2) * W : prev > 0 ? (idx + 1) * W : nowMs;
  }
  check(nowMs: number, cost: number) {
    const { cur } = this.view(nowMs);
    const allowed = cost <= this.policy.limit && this.passes(nowMs, cost);
    const after = allowed ? cur + cost : cur;
    return { allowed, remaining: this.remainingWith(nowMs, after), resetAt: this.resetWith(nowMs, after), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    const idx = Math.floor(nowMs / this.policy.windowMs);
    this.counts.set(idx, (this.counts.get(idx) ?? 0) + cost);
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // the count of the window the request was charged in, while it still counts (current or previous)
    const idx = Math.floor((charge?.atMs ?? nowMs) / this.policy.windowMs);
    if (idx < Math.floor(nowMs / this.policy.windowMs) - 1) return;
    this.counts.set(idx, Math.max(0, (this.counts.get(idx) ?? 0) - cost));
  }
  snapshot() {
    return 0;
  }
  now(nowMs: number) {
    const { cur } = this.view(nowMs);
    return { remaining: this.remainingWith(nowMs, cur), resetAt: this.resetWith(nowMs, cur) };
  }
}

// the weighted count never lets the current window hold more than the limit: the per-window bound
// (the weighting makes it tighter, which the reference model checks)
export const slidingWindowReference = windowReference("slidingWindow", slidingWindow, (policy) => new SlidingWindowModel(policy));
