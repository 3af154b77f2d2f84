/**
 * Sliding log: an exact log of every admitted request's time and cost inside the window.
 *
 * State: `sum`, the sum of the stored entries' costs, and `entries`, a flat list
 * `[time (µs), cost, time, cost, ...]`, oldest first. Stored as
 * `[time, cost, time, cost, ...]` (the sum is recomputed on read).
 *
 * @module
 */
import { type AlgorithmDefinition, result } from "../definition.js";
import { type State, stateLayout } from "../state.js";
import { type WindowOptions, type WindowPolicy, windowParts, windowPolicy } from "../window.js";

/** An exact log of (time, cost) entries inside the window. */
export interface SlidingLogPolicy extends WindowPolicy<"slidingLog"> {}

/**
 * Sliding log: an exact log of every admitted request's time and cost inside the last `window`.
 * Exact, but keeps up to `limit` entries per key.
 *
 * @example
 * ```ts
 * const login = slidingLog({ limit: 5, window: "5m", name: "login" });
 * ```
 */
export function slidingLog(options: WindowOptions): SlidingLogPolicy {
  return windowPolicy("slidingLog", options);
}

/** Ms until the oldest entries (from `start`) holding `units` units have left the window; `undefined` if they hold fewer. */
function msUntilFreed(entries: number[] | undefined, start: number, units: number, windowUs: number, nowUs: number): number | undefined {
  if (entries === undefined) return undefined;
  let freed = 0;
  for (let i = start; i < entries.length; i += 2) {
    freed += entries[i + 1] as number;
    if (freed >= units) return Math.ceil(((entries[i] as number) + windowUs - nowUs) / 1000);
  }
  return undefined;
}

/** The sum of the entries' costs, and the entries `[time (µs), cost, ...]`, oldest first. */
type SlidingLogState = State<"sum", "entries">;

export const slidingLogAlgorithm: AlgorithmDefinition<SlidingLogPolicy, SlidingLogState> = {
  ...windowParts(slidingLog),
  kind: "slidingLog",
  code: "sl",
  state: stateLayout(["sum"], ["entries"]),

  evaluate(policy, state, nowUs, cost, write) {
    const windowUs = policy.windowMs * 1000;
    const limit = policy.limit;
    const cutoff = nowUs - windowUs; // entries at or before the cutoff have left the window
    const entries = state.entries;
    let sum = state.sum;
    let start = 0;
    const n = entries === undefined ? 0 : entries.length;
    if (entries !== undefined) {
      while (start < n && (entries[start] as number) <= cutoff) {
        sum -= entries[start + 1] as number;
        start += 2;
      }
    }
    const nowMs = Math.floor(nowUs / 1000);
    if (cost <= limit - sum) {
      // the oldest entry still in the window after this request leaves first (this request's own, if none)
      const oldest = start < n ? ((entries as number[])[start] as number) : nowUs;
      if (write) {
        if (entries === undefined || start === n) {
          // a fresh, exactly sized array (an empty one that grows reserves room for ~19 numbers)
          state.entries = [nowUs, cost];
        } else {
          if (start > 0) {
            // drop the entries that left the window without allocating (splice would return them)
            entries.copyWithin(0, start);
            entries.length = n - start;
          }
          const len = entries.length;
          if (entries[len - 2] === nowUs) entries[len - 1] = (entries[len - 1] as number) + cost;
          else entries.push(nowUs, cost);
        }
        state.sum = sum + cost;
      }
      return result(policy, true, limit - sum - cost, Math.ceil((nowUs + windowUs) / 1000), 0, 0, nowMs + Math.ceil((oldest + windowUs - nowUs) / 1000));
    }
    const newest = start < n ? ((entries as number[])[n - 2] as number) : undefined;
    const resetAt = Math.ceil((newest === undefined ? nowUs : newest + windowUs) / 1000);
    // the same cost passes once the oldest entries holding sum + cost - limit units have left (entry
    // t leaves at t + window); the quota grows (a cost of remaining + 1 passes) once those holding
    // more than limit - 1 have: the oldest, unless the log holds more than the quota (counts made
    // under a larger one, an override that ended)
    const retryAfterMs = cost <= limit ? (msUntilFreed(entries, start, sum + cost - limit, windowUs, nowUs) ?? Infinity) : Infinity;
    const refillAt = nowMs + (msUntilFreed(entries, start, Math.max(1, sum - limit + 1), windowUs, nowUs) ?? 0);
    return result(policy, false, Math.max(0, limit - sum), resetAt, retryAfterMs, 0, refillAt);
  },

  /** From that request's entry (the newest entries first; the latest charge's when `chargedAtUs` is -1). */
  refund(policy, state, nowUs, cost, chargedAtUs) {
    const entries = state.entries;
    if (entries === undefined) return false;
    const cutoff = nowUs - policy.windowMs * 1000;
    const atMs = chargedAtUs < 0 ? -1 : Math.floor(chargedAtUs / 1000);
    let left = cost;
    let changed = false;
    for (let i = entries.length - 2; i >= 0 && left > 0; i -= 2) {
      const time = entries[i] as number;
      if (time <= cutoff) break;
      if (atMs >= 0 && Math.floor(time / 1000) !== atMs) continue;
      const take = Math.min(left, entries[i + 1] as number);
      entries[i + 1] = (entries[i + 1] as number) - take;
      state.sum -= take;
      left -= take;
      changed = true;
    }
    if (!changed) return false;
    // drop the emptied entries, keeping the order
    let w = 0;
    for (let r = 0; r < entries.length; r += 2) {
      if ((entries[r + 1] as number) > 0) {
        entries[w] = entries[r] as number;
        entries[w + 1] = entries[r + 1] as number;
        w += 2;
      }
    }
    entries.length = w;
    if (w === 0) state.entries = undefined;
    return true;
  },

  expiresAtUs(policy, state) {
    const entries = state.entries;
    return entries === undefined || entries.length === 0 ? 0 : (entries[entries.length - 2] as number) + policy.windowMs * 1000;
  },

  encode(_policy, state, _nowUs, out) {
    for (const x of state.entries as number[]) out.push(x);
    return true;
  },

  decode(_policy, value, state) {
    // [expires, time, cost, time, cost, ...], oldest first: the sum is always recomputed
    if (value.length % 2 !== 1 || value.length === 1) return false;
    let sum = 0;
    for (let j = 1; j < value.length; j += 2) {
      const cost = value[j + 1] as number;
      if (cost <= 0 || (j > 1 && (value[j] as number) <= (value[j - 2] as number))) return false;
      sum += cost;
    }
    state.sum = sum;
    state.entries = value.slice(1);
    return true;
  },
};
