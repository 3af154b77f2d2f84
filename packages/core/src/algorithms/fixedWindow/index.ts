/**
 * Fixed window: a counter per window `floor(now / windowMs)`.
 *
 * State: `[window index, count]`.
 *
 * @module
 */
import { type AlgorithmDefinition, numericState, result } from "../definition.js";
import { type WindowOptions, type WindowPolicy, windowParts, windowPolicy, fixedWindowReservation } from "../window.js";

/** A counter per fixed window `floor(now / windowMs)`. */
export interface FixedWindowPolicy extends WindowPolicy<"fixedWindow"> {}

/**
 * Fixed window: at most `limit` cost units per window `floor(now / window)`. Cheapest and simplest;
 * allows up to 2× `limit` across a window boundary.
 *
 * @example
 * ```ts
 * const perDay = fixedWindow({ limit: 1000, window: "1d" }); // name "1000-per-1d"
 * ```
 */
export function fixedWindow(options: WindowOptions): FixedWindowPolicy {
  return windowPolicy("fixedWindow", options);
}

export const fixedWindowAlgorithm: AlgorithmDefinition<FixedWindowPolicy> = {
  ...windowParts(fixedWindow),
  kind: "fixedWindow",
  code: "fw",
  numWidth: 2,
  objWidth: 0,
  reservation: fixedWindowReservation,

  evaluate(policy, num, off, _obj, _oOff, nowUs, cost, write) {
    const windowMs = policy.windowMs;
    const limit = policy.limit;
    const nowMs = Math.floor(nowUs / 1000);
    const idx = Math.floor(nowMs / windowMs);
    const count = num[off] === idx ? (num[off + 1] as number) : 0;
    const resetAt = (idx + 1) * windowMs;
    if (cost <= limit - count) {
      if (write) {
        num[off] = idx;
        num[off + 1] = count + cost;
      }
      return result(policy, true, limit - count - cost, resetAt, 0, 0, resetAt);
    }
    return result(policy, false, Math.max(0, limit - count), resetAt, cost > limit ? Infinity : resetAt - nowMs, 0, resetAt);
  },

  /** Only within the window the request was charged in. */
  refund(policy, num, off, _obj, _oOff, nowUs, cost, chargedAtUs) {
    const at = chargedAtUs < 0 ? nowUs : chargedAtUs;
    const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
    const count = num[off + 1] as number;
    if (num[off] !== idx || count <= 0) return false;
    num[off + 1] = Math.max(0, count - cost);
    return true;
  },

  expiresAtUs: (policy, num, off) => ((num[off] as number) + 1) * policy.windowMs * 1000,
  ...numericState(2),
};
