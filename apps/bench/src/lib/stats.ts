/**
 * Ratios measured round by round, and when a figure may be quoted.
 *
 * Every comparison runs its contenders in alternating rounds in one process, so load that drifts
 * during a run (other processes on a shared machine) hits all of them alike. A ratio is the median
 * of the per-round ratios; its spread is their min–max. A ratio whose spread leaves ±10% of its
 * median is **unstable**: printed as such, never quoted as a figure.
 *
 * @module
 */
import { median } from "./harness.js";

/** How far from the median every per-round ratio must stay for the figure to be stable: ±10%. */
export const STABLE_SPREAD = 0.1;

/** A ratio and its spread over rounds. */
export interface RatioStat {
  /** The median of the per-round ratios. */
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** How many per-round ratios it was taken from. */
  readonly rounds: number;
  /** Every per-round ratio within ±10% of the median. */
  readonly stable: boolean;
}

/** Statistics of a list of per-round ratios (non-empty). */
export function ratioStat(ratios: readonly number[]): RatioStat {
  const m = median(ratios);
  const min = Math.min(...ratios);
  const max = Math.max(...ratios);
  const stable = Number.isFinite(m) && m > 0 && min >= m * (1 - STABLE_SPREAD) && max <= m * (1 + STABLE_SPREAD);
  return { median: m, min, max, rounds: ratios.length, stable };
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

/** Two significant digits for ratios below 10, else whole numbers: `0.82`, `1.3`, `12`. */
function digits(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Math.abs(x) >= 10) return x.toFixed(0);
  return x.toFixed(2);
}

/** `"0.82× (0.79–0.85)"`, or `"unstable (0.61–0.90)"` when the spread exceeds ±10%. */
export function formatStat(s: RatioStat): string {
  const range = `${digits(s.min)}–${digits(s.max)}`;
  return s.stable ? `${digits(s.median)}× (${range})` : `unstable (${range})`;
}

/** The median alone, `"0.82×"`, for a stable figure; `"unstable"` otherwise. */
export function formatStatShort(s: RatioStat): string {
  return s.stable ? `${digits(s.median)}×` : "unstable";
}

/**
 * Whether two runs agree on a ratio: both stable, and within ±10% of each other (the later
 * against the earlier).
 */
export function agrees(earlier: RatioStat | undefined, later: RatioStat): boolean {
  if (earlier === undefined || !earlier.stable || !later.stable) return false;
  return Math.abs(later.median / earlier.median - 1) <= STABLE_SPREAD;
}
