/**
 * The in-memory benchmark's table of algorithms: every policy kind of `@sluice/core` maps to the
 * policies its Sluice contender is measured with, or to `null` for a kind the benchmark leaves out,
 * so the compiler asks for a decision on every new kind. The benchmark measures the kinds in this
 * table's order; nothing else in it branches on a kind.
 *
 * @module
 */
import { type Policy, type PolicyKind, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";

/** The policies one algorithm's Sluice contender is measured with. */
export interface BenchAlgorithm {
  /**
   * A policy that never denies within a benchmark run (the "allow" scenarios: one hot key, many
   * keys).
   */
  allow(): Policy;
  /**
   * A policy with a quota of 1 for at least an hour from `nowMs`: after one request, every request
   * of the run is denied (the deny path).
   */
  deny(nowMs: number): Policy;
  /** A realistic policy for the bytes-per-idle-key figure (the numbers do not change the state's size). */
  idle(): Policy;
}

/**
 * A fixed window for the deny path whose current window has more than an hour left at `nowMs`.
 * Fixed windows are aligned to the epoch (`floor(now / window)`), so a 1 h window rolls over at
 * the top of every hour, and a run that crossed it saw one call allowed (and stopped, as the
 * harness demands). The longest window of whole days from 24 down whose current window has more
 * than an hour left: 24 days except in the hour before one of its boundaries; two whole-day
 * windows end together only at their common multiples (23 and 24 days: every 552 days).
 */
export function denyWindowMs(nowMs: number): number {
  const hour = 3_600_000;
  for (let days = 24; days >= 2; days--) {
    const window = days * 24 * hour;
    if (window - (nowMs % window) > hour) return window;
  }
  throw new Error(`no whole-day window of 2 to 24 days has an hour left at ${nowMs}`);
}

/** Every policy kind's contender policies, in the order the benchmark measures them; `null`: not measured. */
export const BENCH_ALGORITHMS = {
  fixedWindow: {
    allow: () => fixedWindow({ limit: 1e9, window: "1h" }),
    deny: (nowMs) => fixedWindow({ limit: 1, window: denyWindowMs(nowMs) }),
    idle: () => fixedWindow({ limit: 100, window: "1m" }),
  },
  slidingWindow: {
    allow: () => slidingWindow({ limit: 1e9, window: "1h" }),
    deny: () => slidingWindow({ limit: 1, window: "1h" }),
    idle: () => slidingWindow({ limit: 100, window: "1m" }),
  },
  slidingLog: {
    // the log keeps one entry per distinct millisecond in which a key admitted requests
    // (same-millisecond requests merge into one entry), so its window is 1 s: the log then holds at
    // most ~1,000 entries per key and is in a steady state (old entries leave as new ones arrive)
    // instead of growing for the whole run as a 1 h log would
    allow: () => slidingLog({ limit: 1e9, window: "1s" }),
    deny: () => slidingLog({ limit: 1, window: "1h" }),
    idle: () => slidingLog({ limit: 100, window: "1m" }),
  },
  tokenBucket: {
    allow: () => tokenBucket({ capacity: 1e9, refillRate: 1e9 }),
    deny: () => tokenBucket({ capacity: 1, refillRate: 1, interval: "1h" }),
    idle: () => tokenBucket({ capacity: 100, refillRate: 10 }),
  },
  leakyBucket: {
    allow: () => leakyBucket({ rate: 1e9, period: "1s", burst: 1e9 }),
    deny: () => leakyBucket({ rate: 1, period: "1h", burst: 1 }),
    idle: () => leakyBucket({ rate: 10, period: "1s", burst: 100 }),
  },
  // a cap on requests in flight: a loop of decisions has no responses whose end would free its slots
  concurrency: null,
} as const satisfies { readonly [K in PolicyKind]: BenchAlgorithm | null };

/** A kind the benchmark measures. */
export type BenchAlgorithmId = { [K in PolicyKind]: (typeof BENCH_ALGORITHMS)[K] extends null ? never : K }[PolicyKind];

/** The kinds the benchmark measures, in its order. */
export const MEASURED_ALGORITHMS: readonly BenchAlgorithmId[] = Object.freeze(
  (Object.keys(BENCH_ALGORITHMS) as PolicyKind[]).filter((kind): kind is BenchAlgorithmId => BENCH_ALGORITHMS[kind] !== null),
);
