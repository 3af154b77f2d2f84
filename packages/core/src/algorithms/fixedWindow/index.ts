/**
 * Fixed window: a counter per window `floor(now / windowMs)`.
 *
 * State: the window's index and the count in it.
 *
 * @module
 */
import { type AlgorithmDefinition, numericState, result } from "../definition.js";
import { type State, stateLayout } from "../state.js";
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

/** The window `floor(now / windowMs)` the count belongs to, and the cost counted in it. */
type FixedWindowState = State<"window" | "count">;

export const fixedWindowAlgorithm: AlgorithmDefinition<FixedWindowPolicy, FixedWindowState> = {
  ...windowParts(fixedWindow),
  kind: "fixedWindow",
  code: "fw",
  ...numericState(stateLayout(["window", "count"])),
  reservation: fixedWindowReservation,

  evaluate(policy, state, nowUs, cost, write) {
    const windowMs = policy.windowMs;
    const limit = policy.limit;
    const nowMs = Math.floor(nowUs / 1000);
    const idx = Math.floor(nowMs / windowMs);
    const count = state.window === idx ? state.count : 0;
    const resetAt = (idx + 1) * windowMs;
    if (cost <= limit - count) {
      if (write) {
        state.window = idx;
        state.count = count + cost;
      }
      return result(policy, true, limit - count - cost, resetAt, 0, 0, resetAt);
    }
    return result(policy, false, Math.max(0, limit - count), resetAt, cost > limit ? Infinity : resetAt - nowMs, 0, resetAt);
  },

  /** Only within the window the request was charged in. */
  refund(policy, state, nowUs, cost, chargedAtUs) {
    const at = chargedAtUs < 0 ? nowUs : chargedAtUs;
    const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
    const count = state.count;
    if (state.window !== idx || count <= 0) return false;
    state.count = Math.max(0, count - cost);
    return true;
  },

  expiresAtUs: (policy, state) => (state.window + 1) * policy.windowMs * 1000,
};
