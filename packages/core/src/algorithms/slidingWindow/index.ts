/**
 * Sliding window counter: the previous window's count weighted by its overlap with the last
 * window, plus the current count.
 *
 * State: `[window index, previous count, current count]`, in whole ms (the weighted sum
 * `limit × window` must stay below 2^53, which is why it is kept in ms, not µs).
 *
 * @module
 */
import { SluiceConfigError } from "../../errors.js";
import { type AlgorithmDefinition, MAX_QUOTA, numericState, result } from "../definition.js";
import { type WindowOptions, type WindowPolicy, windowParts, windowPolicy, windowReservation } from "../window.js";

/** Counts of the previous and current window, the previous one weighted by how much of it overlaps. */
export interface SlidingWindowPolicy extends WindowPolicy<"slidingWindow"> {}

/**
 * Sliding window counter: the previous window's count weighted by its overlap with the last
 * `window`, plus the current count. Smooth like a log at the memory cost of a fixed window.
 * Requires `limit × window(ms) ≤ 2^53-1`.
 *
 * @example
 * ```ts
 * const perMinute = slidingWindow({ limit: 100, window: "1m" }); // name "100-per-1m"
 * ```
 */
export function slidingWindow(options: WindowOptions): SlidingWindowPolicy {
  const policy = windowPolicy("slidingWindow", options);
  if (policy.limit * policy.windowMs > Number.MAX_SAFE_INTEGER) {
    throw new SluiceConfigError(
      `limit × window (in ms) must be at most 2^53-1 so the weighted count stays exact; got limit ${policy.limit} and window ${policy.windowMs} ms`,
      { option: "limit" },
    );
  }
  return policy;
}

/**
 * When the available quota next grows: the moment a request of `remaining + 1` would pass with the
 * state unchanged (`nowMs` when the quota is already full).
 */
function refillAt(W: number, limit: number, nowMs: number, r: number, prev: number, cur: number, remaining: number): number {
  return remaining >= limit ? nowMs : nowMs + retryMs(W, limit, r, prev, cur, remaining + 1);
}

/** The least whole `d >= 0` (ms) at which the same request passes with the state unchanged. */
function retryMs(W: number, limit: number, r: number, prev: number, cur: number, cost: number): number {
  const k = limit - cur - cost;
  if (k >= 0 && prev > 0) {
    // same window: prev*(W - r - d) <= k*W  <=>  d >= W - r - floor(k*W/prev)
    const m = Math.floor((k * W) / prev);
    if (m > 0) return W - r - m;
  }
  // the window rolls over after W - r: then prev = cur, cur = 0, and r' must satisfy
  // cur*(W - r') <= (limit - cost)*W
  const toNext = W - r;
  if (cur === 0) return toNext;
  return toNext + Math.max(0, W - Math.floor(((limit - cost) * W) / cur));
}

export const slidingWindowAlgorithm: AlgorithmDefinition<SlidingWindowPolicy> = {
  ...windowParts(
    slidingWindow,
    (p) => (p.limit as number) * (p.windowMs as number) <= Number.MAX_SAFE_INTEGER,
    // the weighted count (limit × window) stays a safe integer
    (p) => Math.min(MAX_QUOTA, Math.floor(Number.MAX_SAFE_INTEGER / p.windowMs)),
  ),
  kind: "slidingWindow",
  code: "sw",
  numWidth: 3,
  objWidth: 0,
  reservation: windowReservation,

  evaluate(policy, num, off, _obj, _oOff, nowUs, cost, write) {
    const W = policy.windowMs;
    const limit = policy.limit;
    const nowMs = Math.floor(nowUs / 1000);
    const idx = Math.floor(nowMs / W);
    const r = nowMs - idx * W;
    const storedIdx = num[off];
    let prev = 0;
    let cur = 0;
    if (storedIdx === idx) {
      prev = num[off + 1] as number;
      cur = num[off + 2] as number;
    } else if (storedIdx === idx - 1) {
      prev = num[off + 2] as number;
    }
    // allowed iff prev*(W-r) + (cur+cost)*W <= limit*W, written so that no product exceeds limit*W
    const weighted = prev * (W - r);
    const left = Math.floor((limit * W - weighted) / W); // limit minus the weighted previous count, rounded down
    if (cost <= limit - cur && weighted <= (limit - cur - cost) * W) {
      const after = cur + cost;
      if (write) {
        num[off] = idx;
        num[off + 1] = prev;
        num[off + 2] = after;
      }
      const remaining = Math.max(0, left - after);
      return result(policy, true, remaining, (idx + 2) * W, 0, 0, refillAt(W, limit, nowMs, r, prev, after, remaining));
    }
    const resetAt = cur > 0 ? (idx + 2) * W : prev > 0 ? (idx + 1) * W : nowMs;
    const retryAfterMs = cost > limit ? Infinity : retryMs(W, limit, r, prev, cur, cost);
    const remaining = Math.max(0, left - cur);
    return result(policy, false, remaining, resetAt, retryAfterMs, 0, refillAt(W, limit, nowMs, r, prev, cur, remaining));
  },

  /** In the window the request was charged in: the current one, or the previous one once the next began. */
  refund(policy, num, off, _obj, _oOff, nowUs, cost, chargedAtUs) {
    const at = chargedAtUs < 0 ? nowUs : chargedAtUs;
    const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
    const stored = num[off] as number;
    const slot = stored === idx ? off + 2 : stored === idx + 1 ? off + 1 : -1;
    if (slot < 0 || (num[slot] as number) <= 0) return false;
    num[slot] = Math.max(0, (num[slot] as number) - cost);
    return true;
  },

  expiresAtUs: (policy, num, off) => ((num[off] as number) + 2) * policy.windowMs * 1000,
  ...numericState(3),
};
