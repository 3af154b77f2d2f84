/**
 * Leaky bucket: a GCRA meter (see `../gcra.ts`) with an optional queue that delays instead of
 * denying.
 *
 * @module
 */
import { type Duration, formatMs, toMs } from "../../duration.js";
import { type AlgorithmDefinition, type PolicyCommon, positiveInt, queueInt, quotaInt, requireObject, validateName } from "../definition.js";
import { type GcraState, ceilRatioSeconds, gcraParts, gcraTiming } from "../gcra.js";
import { type BlockOption, blockOf } from "../penalty-box.js";

/** A leaky bucket (GCRA meter) with an optional queue that delays instead of denying. */
export interface LeakyBucketPolicy extends PolicyCommon {
  readonly kind: "leakyBucket";
  readonly rate: number;
  readonly periodMs: number;
  readonly burst: number;
  readonly queue: number;
  /** GCRA emission interval `ceil(periodMs * 1000 / rate)` in µs. */
  readonly emissionIntervalUs: number;
}

/** Options of {@link leakyBucket}. */
export interface LeakyBucketOptions {
  /** Requests that drain per `period`: a positive safe integer. */
  rate: number;
  /** The period of `rate`, e.g. `"1s"`. */
  period: Duration;
  /** Requests that may pass at once on an empty bucket: a positive integer of at most 2^52 (`MAX_QUOTA`). */
  burst: number;
  /**
   * Requests beyond the burst that are admitted with a `delayMs` (traffic shaping) instead of
   * denied: a non-negative integer of at most 2^52 (`MAX_QUOTA`).
   * @default 0
   */
  queue?: number;
  /** Name for headers and keys. Default `"<burst>-burst-<rate>-per-<period>"` (`-queue-<n>` appended when queueing). */
  name?: string;
  /** Penalty box: when this policy denies, block the key for this long (see {@link BlockOption}). */
  block?: BlockOption;
}

/**
 * Leaky bucket (GCRA): `rate` requests drain per `period`; up to `burst` pass at once; with `queue`,
 * up to `queue` more pass with a `delayMs` to wait before serving (shaping) instead of a denial.
 *
 * @example
 * ```ts
 * const shaped = leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 });
 * // at t=0: five pass, the 6th-8th pass with delayMs 100, 200, 300, the 9th is denied
 * ```
 */
export function leakyBucket(options: LeakyBucketOptions): LeakyBucketPolicy {
  requireObject(options, "leakyBucket");
  const rate = positiveInt(options.rate, "rate");
  const periodMs = toMs(options.period, "period");
  const burst = quotaInt(options.burst, "burst");
  const queue = options.queue === undefined ? 0 : queueInt(options.queue, "queue");
  const emissionIntervalUs = gcraTiming(rate, periodMs, burst, queue, "burst");
  const name =
    options.name === undefined
      ? `${burst}-burst-${rate}-per-${formatMs(periodMs)}${queue > 0 ? `-queue-${queue}` : ""}`
      : validateName(options.name, "name");
  return Object.freeze({
    kind: "leakyBucket",
    name,
    limit: burst,
    windowSeconds: ceilRatioSeconds(burst, periodMs, rate),
    rate,
    periodMs,
    burst,
    queue,
    emissionIntervalUs,
    ...blockOf(options.block),
  });
}

export const leakyBucketAlgorithm: AlgorithmDefinition<LeakyBucketPolicy, GcraState> = {
  ...gcraParts,
  kind: "leakyBucket",
  code: "lb",
  create: (options) => leakyBucket(options as unknown as LeakyBucketOptions),
  options: (p) => ({ rate: p.rate, period: p.periodMs, burst: p.burst, queue: p.queue }),
  isValid: gcraParts.isGcraValid,
};
