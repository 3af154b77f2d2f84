/**
 * Sliding window counter: the previous window's count weighted by its overlap with the last
 * window, plus the current count.
 *
 * State: the current window's index, the previous window's count and the current one's (windows
 * in whole ms: the weighted sum `limit × window` must stay below 2^53, which is why it is kept in
 * ms, not µs).
 *
 * @module
 */
import { SluiceConfigError } from "../../errors.js";
import { type AlgorithmDefinition, MAX_QUOTA, numericState, result } from "../definition.js";
import { type State, stateLayout } from "../state.js";
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

/** The window `floor(now / windowMs)` the counts belong to, the previous window's count and the current one's. */
type SlidingWindowState = State<"window" | "previous" | "current">;

export const slidingWindowAlgorithm: AlgorithmDefinition<SlidingWindowPolicy, SlidingWindowState> = {
  ...windowParts(
    slidingWindow,
    (p) => (p.limit as number) * (p.windowMs as number) <= Number.MAX_SAFE_INTEGER,
    // the weighted count (limit × window) stays a safe integer
    (p) => Math.min(MAX_QUOTA, Math.floor(Number.MAX_SAFE_INTEGER / p.windowMs)),
  ),
  kind: "slidingWindow",
  code: "sw",
  ...numericState(stateLayout(["window", "previous", "current"])),
  reservation: windowReservation,

  evaluate(policy, state, nowUs, cost, write) {
    const W = policy.windowMs;
    const limit = policy.limit;
    const nowMs = Math.floor(nowUs / 1000);
    const idx = Math.floor(nowMs / W);
    const r = nowMs - idx * W;
    const storedIdx = state.window;
    let prev = 0;
    let cur = 0;
    if (storedIdx === idx) {
      prev = state.previous;
      cur = state.current;
    } else if (storedIdx === idx - 1) {
      prev = state.current;
    }
    // allowed iff prev*(W-r) + (cur+cost)*W <= limit*W, written so that no product exceeds limit*W
    const weighted = prev * (W - r);
    const left = Math.floor((limit * W - weighted) / W); // limit minus the weighted previous count, rounded down
    if (cost <= limit - cur && weighted <= (limit - cur - cost) * W) {
      const after = cur + cost;
      if (write) {
        state.window = idx;
        state.previous = prev;
        state.current = after;
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
  refund(policy, state, nowUs, cost, chargedAtUs) {
    const at = chargedAtUs < 0 ? nowUs : chargedAtUs;
    const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
    const stored = state.window;
    if (stored === idx) {
      if (state.current <= 0) return false;
      state.current = Math.max(0, state.current - cost);
      return true;
    }
    if (stored !== idx + 1 || state.previous <= 0) return false;
    state.previous = Math.max(0, state.previous - cost);
    return true;
  },

  expiresAtUs: (policy, state) => (state.window + 2) * policy.windowMs * 1000,
};
