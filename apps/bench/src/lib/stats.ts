/**
 * Ratios measured round by round, and when a figure may be quoted.
 *
 * Every comparison runs its contenders in alternating rounds in one process, so load that drifts
 * during a run (other processes on a shared machine) hits all of them alike. A ratio is the median
 * of the per-round ratios, with a distribution-free 95% confidence interval of that median taken
 * from the order statistics of the rounds (see {@link medianCiRanks}): no assumption about how the
 * rounds are spread, and one outlier round moves neither end. A ratio whose interval lies within
 * ±5% of its median is **stable**, a figure to quote; any other is printed as unstable.
 *
 * @module
 */

/** How far from the median the confidence interval may reach for the figure to be stable: ±5%. */
export const STABLE_SPREAD = 0.05;

/** The confidence of the interval of a median: 95%. */
export const CONFIDENCE = 0.95;

/** The median of a non-empty list. */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("median of an empty list");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** A ratio and its confidence interval over rounds. */
export interface RatioStat {
  /** The median of the per-round ratios. */
  readonly median: number;
  /** The lower end of the confidence interval of the median (an order statistic of the rounds). */
  readonly low: number;
  /** The upper end of the confidence interval of the median. */
  readonly high: number;
  /**
   * The interval's exact coverage (at least {@link CONFIDENCE} when there are enough rounds, see
   * {@link medianCiRanks}; below it with fewer, and the ratio is then unstable).
   */
  readonly confidence: number;
  /** The smallest and largest per-round ratio (information only: they decide nothing). */
  readonly min: number;
  readonly max: number;
  /** How many per-round ratios it was taken from. */
  readonly rounds: number;
  /** The interval holds at least 95% and lies within ±5% of the median. */
  readonly stable: boolean;
}

/** Ranks (1-based, in sorted order) of the ends of a confidence interval of the median. */
export interface MedianCiRanks {
  readonly lower: number;
  readonly upper: number;
  /** `P(lower ≤ B ≤ upper - 1)` for `B ~ Binomial(n, 1/2)`: the probability that the interval holds the median. */
  readonly coverage: number;
}

/** `P(j ≤ B ≤ k)` for `B ~ Binomial(n, 1/2)` (0 ≤ j ≤ k ≤ n), summed term by term. */
export function binomialHalfRange(n: number, j: number, k: number): number {
  let term = 2 ** -n; // P(B = 0)
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    if (i > 0) term = (term * (n - i + 1)) / i;
    if (i >= j) sum += term;
  }
  return sum;
}

/**
 * The narrowest symmetric pair of order statistics `x(lower) ≤ x(upper)` (`upper = n + 1 - lower`)
 * of `n` rounds that holds the true median with probability at least `confidence`, whatever the
 * distribution of the rounds (continuous). The median lies in `[x(j), x(k)]` exactly when at least
 * `j` and at most `k - 1` rounds fall at or below it, and the number that do is `Binomial(n, 1/2)`,
 * so the coverage is `P(j ≤ B ≤ k - 1)`. For 14 rounds that is ranks 3 and 12 (98.7%): ranks 4 and
 * 11 hold the median only 94.3% of the time (`P(4 ≤ B ≤ 10)`; `P(4 ≤ B ≤ 11)`, 96.5%, counts
 * one outcome too many). Below 6 rounds no pair reaches 95%: the answer is then the whole range
 * `(1, n)` with its (smaller) coverage.
 *
 * @example
 * ```ts
 * medianCiRanks(14); // { lower: 3, upper: 12, coverage: 0.98706... }
 * medianCiRanks(20); // { lower: 6, upper: 15, coverage: 0.95861... }
 * ```
 */
export function medianCiRanks(n: number, confidence = CONFIDENCE): MedianCiRanks {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`medianCiRanks: n must be a positive integer; got ${n}`);
  let best: MedianCiRanks = { lower: 1, upper: n, coverage: n === 1 ? 0 : binomialHalfRange(n, 1, n - 1) };
  for (let j = 2; j <= Math.floor((n + 1) / 2); j++) {
    const k = n + 1 - j;
    if (k <= j) break;
    const coverage = binomialHalfRange(n, j, k - 1);
    if (coverage < confidence) break;
    best = { lower: j, upper: k, coverage };
  }
  return best;
}

/** Statistics of a list of per-round ratios (non-empty). */
export function ratioStat(ratios: readonly number[]): RatioStat {
  const sorted = [...ratios].sort((a, b) => a - b);
  const m = median(sorted);
  const n = sorted.length;
  const ranks = medianCiRanks(n);
  const low = sorted[ranks.lower - 1] as number;
  const high = sorted[ranks.upper - 1] as number;
  const stable =
    ranks.coverage >= CONFIDENCE && Number.isFinite(m) && m > 0 && low >= m * (1 - STABLE_SPREAD) && high <= m * (1 + STABLE_SPREAD);
  return { median: m, low, high, confidence: ranks.coverage, min: sorted[0] as number, max: sorted[n - 1] as number, rounds: n, stable };
}

/** `a[i] / b[i]` for each round both measured. */
export function perRoundRatios(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.min(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((a[i] as number) / (b[i] as number));
  return out;
}

/** The paired ratio of two contenders' per-round figures (see {@link ratioStat}). */
export function pairedStat(a: readonly number[], b: readonly number[]): RatioStat {
  return ratioStat(perRoundRatios(a, b));
}

/** Whether the per-round ratios of `a` to `b` are already stable (see {@link ratioStat}). */
export function pairStable(a: readonly number[], b: readonly number[]): boolean {
  return pairedStat(a, b).stable;
}

/** Two significant digits for ratios below 10, else whole numbers: `0.82`, `1.3`, `12`. */
function digits(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Math.abs(x) >= 10) return x.toFixed(0);
  return x.toFixed(2);
}

/** `"0.82× (0.79–0.85)"` with the 95% interval of the median, or `"unstable (0.61–0.90)"` when it leaves ±5%. */
export function formatStat(s: RatioStat): string {
  const range = `${digits(s.low)}–${digits(s.high)}`;
  return s.stable ? `${digits(s.median)}× (${range})` : `unstable (${range})`;
}

/** The median alone, `"0.82×"`, for a stable figure; `"unstable"` otherwise. */
export function formatStatShort(s: RatioStat): string {
  return s.stable ? `${digits(s.median)}×` : "unstable";
}

/**
 * Whether two runs agree on a ratio: both stable, and within ±5% of each other (the later
 * against the earlier).
 */
export function agrees(earlier: RatioStat | undefined, later: RatioStat): boolean {
  if (earlier === undefined || !earlier.stable || !later.stable) return false;
  return Math.abs(later.median / earlier.median - 1) <= STABLE_SPREAD;
}
