/**
 * Token bucket: starts full with `capacity` tokens and refills continuously, stored as one GCRA
 * timestamp (see `../gcra.ts`).
 *
 * @module
 */
import { type Duration, formatMs, toMs } from "../../duration.js";
import { type AlgorithmDefinition, type PolicyCommon, positiveInt, quotaInt, requireObject, validateName } from "../definition.js";
import { type GcraState, ceilRatioSeconds, gcraParts, gcraTiming } from "../gcra.js";
import { type BlockOption, blockOf } from "../penalty-box.js";

/** A token bucket (starts full, refills continuously) stored as one GCRA timestamp. */
export interface TokenBucketPolicy extends PolicyCommon {
  readonly kind: "tokenBucket";
  readonly capacity: number;
  readonly refillRate: number;
  readonly intervalMs: number;
  /** GCRA emission interval `ceil(intervalMs * 1000 / refillRate)` in µs. */
  readonly emissionIntervalUs: number;
  /** Equal to `capacity`. */
  readonly burst: number;
  /** Always 0: a token bucket never shapes. */
  readonly queue: 0;
}

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions {
  /** Tokens the bucket holds when full (the burst): a positive integer of at most 2^52 (`MAX_QUOTA`). */
  capacity: number;
  /** Tokens added per `interval`: a positive safe integer. */
  refillRate: number;
  /** @default "1s" */
  interval?: Duration;
  /** Name for headers and keys. Default `"<capacity>-burst-<refillRate>-per-<interval>"`. */
  name?: string;
  /** Penalty box: when this policy denies, block the key for this long (see {@link BlockOption}). */
  block?: BlockOption;
}

/**
 * Token bucket: starts full with `capacity` tokens and refills `refillRate` tokens per `interval`,
 * continuously. Stored as one integer per key (the GCRA form); `remaining` is the whole tokens left.
 *
 * @example
 * ```ts
 * const burst = tokenBucket({ capacity: 10, refillRate: 1 }); // 10 at once, then 1 per second
 * ```
 */
export function tokenBucket(options: TokenBucketOptions): TokenBucketPolicy {
  requireObject(options, "tokenBucket");
  const capacity = quotaInt(options.capacity, "capacity");
  const refillRate = positiveInt(options.refillRate, "refillRate");
  const intervalMs = options.interval === undefined ? 1000 : toMs(options.interval, "interval");
  const emissionIntervalUs = gcraTiming(refillRate, intervalMs, capacity, 0, "capacity");
  const name =
    options.name === undefined ? `${capacity}-burst-${refillRate}-per-${formatMs(intervalMs)}` : validateName(options.name, "name");
  return Object.freeze({
    kind: "tokenBucket",
    name,
    limit: capacity,
    windowSeconds: ceilRatioSeconds(capacity, intervalMs, refillRate),
    capacity,
    refillRate,
    intervalMs,
    emissionIntervalUs,
    burst: capacity,
    queue: 0,
    ...blockOf(options.block),
  });
}

export const tokenBucketAlgorithm: AlgorithmDefinition<TokenBucketPolicy, GcraState> = {
  ...gcraParts,
  kind: "tokenBucket",
  code: "tb",
  create: (options) => tokenBucket(options as unknown as TokenBucketOptions),
  options: (p) => ({ capacity: p.capacity, refillRate: p.refillRate, interval: p.intervalMs }),
  isValid: (p) => p.queue === 0 && gcraParts.isGcraValid(p),
};
