/**
 * The five algorithms (and the concurrency cap) as factories that validate and parse their options once and return a plain,
 * frozen {@link Policy}. A policy holds parameters only; every store runs the same semantics on it
 * (see `engine.ts` for the TypeScript implementation and `@sluice/redis` for the Lua one).
 *
 * Every number an algorithm keeps or compares is an integer (times in microseconds, windows in
 * milliseconds), so TypeScript and Lua reach bit-identical decisions.
 *
 * @module
 */
import { type Duration, MAX_DURATION_MS, formatMs, toMs } from "./duration.js";
import { SluiceConfigError, describe } from "./errors.js";

/**
 * The penalty box of a policy, parsed: when the policy denies, the key is blocked for
 * `baseMs × factor^(n-1)` (at most `maxMs`), n being the offences within `maxMs` of the end of the
 * previous block.
 */
export interface BlockSpec {
  readonly baseMs: number;
  /** A positive integer (integers keep every store's arithmetic exact). */
  readonly factor: number;
  readonly maxMs: number;
}

/**
 * The `block` option of every policy: a duration (`"15m"`: every offence blocks for 15 minutes),
 * or `{ base, factor, max }` to escalate repeated offences (`{ base: "1m", factor: 2, max: "1h" }`:
 * 1, 2, 4, ... minutes, at most an hour). An offence within `max` of the end of the previous block
 * counts as a repeat; after that the key starts again at `base`.
 */
export type BlockOption = Duration | { base: Duration; factor?: number; max?: Duration };

interface PolicyCommon {
  /** Name used in headers (`RateLimit-Policy`) and in storage keys. */
  readonly name: string;
  /** The quota reported in headers: `limit`, `capacity` or `burst`. */
  readonly limit: number;
  /** The `w` of `RateLimit-Policy`, in whole seconds. */
  readonly windowSeconds: number;
  /** The penalty box: how long a denial blocks the key; absent when the policy has none. */
  readonly block?: BlockSpec;
}

/** A counter per fixed window `floor(now / windowMs)`. */
export interface FixedWindowPolicy extends PolicyCommon {
  readonly kind: "fixedWindow";
  readonly windowMs: number;
}

/** Counts of the previous and current window, the previous one weighted by how much of it overlaps. */
export interface SlidingWindowPolicy extends PolicyCommon {
  readonly kind: "slidingWindow";
  readonly windowMs: number;
}

/** An exact log of (time, cost) entries inside the window. */
export interface SlidingLogPolicy extends PolicyCommon {
  readonly kind: "slidingLog";
  readonly windowMs: number;
}

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

/**
 * A cap on requests in flight per key: each allowed request holds a lease (one slot, whatever its
 * cost) until it is released (the response has been produced) or `leaseMs` has passed.
 * `windowSeconds` is the lease in whole seconds (internal; the IETF `RateLimit-Policy` member of a
 * concurrency policy has no `w`, but `qu="concurrent-requests"`).
 */
export interface ConcurrencyPolicy extends PolicyCommon {
  readonly kind: "concurrency";
  /** How long a lease lives when it is never released (a crashed instance, a lost connection). */
  readonly leaseMs: number;
  /** Never set: a concurrency policy has no penalty box. */
  readonly block?: undefined;
}

/** One configured limit, as returned by the algorithm factories. */
export type Policy =
  | FixedWindowPolicy
  | SlidingWindowPolicy
  | SlidingLogPolicy
  | TokenBucketPolicy
  | LeakyBucketPolicy
  | ConcurrencyPolicy;

/** The algorithm of a policy. */
export type PolicyKind = Policy["kind"];

/** Options of the three window algorithms. */
export interface WindowOptions {
  /** Requests (cost units) allowed per window: a positive safe integer. */
  limit: number;
  /** The window: milliseconds or a string like `"1m"`; at most 2^31-1 ms. */
  window: Duration;
  /** Name for headers and keys. Default `"<limit>-per-<window>"`, e.g. `"100-per-1m"`. */
  name?: string;
  /** Penalty box: when this policy denies, block the key for this long (see {@link BlockOption}). */
  block?: BlockOption;
}

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions {
  /** Tokens the bucket holds when full (the burst): a positive safe integer. */
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

/** Options of {@link leakyBucket}. */
export interface LeakyBucketOptions {
  /** Requests that drain per `period`: a positive safe integer. */
  rate: number;
  /** The period of `rate`, e.g. `"1s"`. */
  period: Duration;
  /** Requests that may pass at once on an empty bucket: a positive safe integer. */
  burst: number;
  /**
   * Requests beyond the burst that are admitted with a `delayMs` (traffic shaping) instead of
   * denied: a non-negative integer.
   * @default 0
   */
  queue?: number;
  /** Name for headers and keys. Default `"<burst>-burst-<rate>-per-<period>"` (`-queue-<n>` appended when queueing). */
  name?: string;
  /** Penalty box: when this policy denies, block the key for this long (see {@link BlockOption}). */
  block?: BlockOption;
}

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions {
  /** Requests of one key that may be in flight at once: a positive safe integer. */
  limit: number;
  /**
   * How long a lease lives if it is never released (the instance crashed, the connection was
   * lost): after it the slot is free again. Longer than your slowest response.
   * @default "30s"
   */
  lease?: Duration;
  /** Name for headers and keys. Default `"<limit>-in-flight"`, e.g. `"2-in-flight"`. */
  name?: string;
}

/** The largest span (µs) a GCRA bucket may cover, `(burst + queue) * emissionInterval`: 2^50 µs, about 35 years. */
const MAX_GCRA_SPAN_US = 2 ** 50;
const NAME_RE = /^[!#$%&'*+\-./0-9:<>?@A-Z[\]^_`a-z|~]{1,128}$/;

function requireObject(options: unknown, factory: string): asserts options is Record<string, unknown> {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new SluiceConfigError(`${factory}() needs an options object; got ${describe(options)}`);
  }
}

function positiveInt(value: unknown, option: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw new SluiceConfigError(`${option} must be a positive safe integer; got ${describe(value)}`);
  }
  return value;
}

function nonNegativeInt(value: unknown, option: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new SluiceConfigError(`${option} must be a non-negative safe integer; got ${describe(value)}`);
  }
  return value;
}

/** Validates a policy name (used in headers and keys); `option` names it in the error. */
export function validateName(value: unknown, option: string): string {
  if (typeof value !== "string" || !NAME_RE.test(value)) {
    throw new SluiceConfigError(
      `${option} must be 1-128 visible ASCII characters without spaces, quotes, backslashes, commas, semicolons, "=", parentheses or braces; got ${describe(value)}`,
    );
  }
  return value;
}

/** `ceil(a / b)` for non-negative safe integers, exactly. */
function ceilDiv(a: number, b: number): number {
  const rem = a % b;
  return (a - rem) / b + (rem === 0 ? 0 : 1);
}

function windowPolicy<K extends "fixedWindow" | "slidingWindow" | "slidingLog">(kind: K, options: unknown) {
  requireObject(options, kind);
  const limit = positiveInt(options.limit, `${kind}: limit`);
  const windowMs = toMs(options.window, `${kind}: window`);
  if (kind === "slidingWindow" && limit * windowMs > Number.MAX_SAFE_INTEGER) {
    throw new SluiceConfigError(
      `slidingWindow: limit × window (in ms) must be at most 2^53-1 so the weighted count stays exact; got limit ${limit} and window ${windowMs} ms`,
    );
  }
  const name =
    options.name === undefined ? `${limit}-per-${formatMs(windowMs)}` : validateName(options.name, `${kind}: name`);
  return Object.freeze({ kind, name, limit, windowMs, windowSeconds: ceilDiv(windowMs, 1000), ...blockOf(options.block, kind) });
}

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
  return windowPolicy("slidingWindow", options);
}

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

function gcraTiming(amount: number, spanMs: number, burst: number, queue: number, factory: string) {
  const emissionIntervalUs = Math.max(1, ceilDiv(spanMs * 1000, amount));
  if ((burst + queue) * emissionIntervalUs > MAX_GCRA_SPAN_US) {
    throw new SluiceConfigError(
      `${factory}: the bucket would take longer than 2^50 µs (about 35 years) to drain; lower the burst/capacity or raise the rate`,
    );
  }
  return emissionIntervalUs;
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
  const capacity = positiveInt(options.capacity, "tokenBucket: capacity");
  const refillRate = positiveInt(options.refillRate, "tokenBucket: refillRate");
  const intervalMs = options.interval === undefined ? 1000 : toMs(options.interval, "tokenBucket: interval");
  const emissionIntervalUs = gcraTiming(refillRate, intervalMs, capacity, 0, "tokenBucket");
  const name =
    options.name === undefined
      ? `${capacity}-burst-${refillRate}-per-${formatMs(intervalMs)}`
      : validateName(options.name, "tokenBucket: name");
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
    ...blockOf(options.block, "tokenBucket"),
  });
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
  const rate = positiveInt(options.rate, "leakyBucket: rate");
  const periodMs = toMs(options.period, "leakyBucket: period");
  const burst = positiveInt(options.burst, "leakyBucket: burst");
  const queue = options.queue === undefined ? 0 : nonNegativeInt(options.queue, "leakyBucket: queue");
  const emissionIntervalUs = gcraTiming(rate, periodMs, burst, queue, "leakyBucket");
  const name =
    options.name === undefined
      ? `${burst}-burst-${rate}-per-${formatMs(periodMs)}${queue > 0 ? `-queue-${queue}` : ""}`
      : validateName(options.name, "leakyBucket: name");
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
    ...blockOf(options.block, "leakyBucket"),
  });
}

/**
 * Concurrency: at most `limit` requests of a key in flight at once — the draft's
 * `qu="concurrent-requests"` quota unit — for expensive endpoints (exports, LLM calls, report
 * generation). An allowed request acquires a lease (`decision.lease`); the request pipeline of every
 * adapter releases it when the response has been produced (for a streamed body, when the stream
 * ends or is cancelled), and `limiter.release(key, decision)` does so for code outside an adapter.
 * A lease never released (a crashed instance, a lost connection) expires after `lease`, so slots
 * never leak.
 *
 * It combines with rate policies in one limiter, checked atomically with them in one round trip,
 * all or nothing: a request a rate policy denies acquires no lease, and one the concurrency policy
 * denies consumes no rate units. A request takes one slot whatever its `cost`. A denial's
 * `retryAfterMs` is 1 s, or the earliest lease expiry when that is sooner (a release may come at
 * any moment, so no exact retry time exists). It takes no `block` (a `SluiceConfigError`): a
 * concurrency denial ends as soon as a request finishes; put the penalty box on a rate policy.
 *
 * @example
 * ```ts
 * const exports = new RateLimiter({
 *   limits: [concurrency({ limit: 2, name: "exports" }), fixedWindow({ limit: 100, window: "1h" })],
 * });
 * // RateLimit-Policy: "exports";q=2;qu="concurrent-requests", "100-per-1h";q=100;w=3600
 * ```
 */
export function concurrency(options: ConcurrencyOptions): ConcurrencyPolicy {
  requireObject(options, "concurrency");
  const limit = positiveInt(options.limit, "concurrency: limit");
  const leaseMs = options.lease === undefined ? 30_000 : toMs(options.lease, "concurrency: lease");
  if ((options as { block?: unknown }).block !== undefined) {
    throw new SluiceConfigError(
      `concurrency: block is not supported (a concurrency denial ends as soon as a request in flight finishes); put block on a rate policy of the same limiter; got block ${describe((options as { block?: unknown }).block)}`,
    );
  }
  const name = options.name === undefined ? `${limit}-in-flight` : validateName(options.name, "concurrency: name");
  return Object.freeze({ kind: "concurrency", name, limit, leaseMs, windowSeconds: ceilDiv(leaseMs, 1000) });
}

/** Parses the `block` option: `{}` when absent, else `{ block }`. */
function blockOf(option: unknown, factory: string): { block?: BlockSpec } {
  if (option === undefined) return {};
  if (typeof option === "number" || typeof option === "string") {
    const baseMs = toMs(option, `${factory}: block`);
    return { block: Object.freeze({ baseMs, factor: 1, maxMs: baseMs }) };
  }
  if (typeof option !== "object" || option === null || Array.isArray(option)) {
    throw new SluiceConfigError(`${factory}: block must be a duration like "15m" or { base, factor?, max? }; got ${describe(option)}`);
  }
  const o = option as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== "base" && k !== "factor" && k !== "max") {
      throw new SluiceConfigError(`${factory}: block takes base, factor and max; got an unknown option ${describe(k)}`);
    }
  }
  const baseMs = toMs(o.base, `${factory}: block.base`);
  const factor = o.factor === undefined ? 1 : positiveInt(o.factor, `${factory}: block.factor`);
  const maxMs = o.max === undefined ? (factor === 1 ? baseMs : MAX_DURATION_MS) : toMs(o.max, `${factory}: block.max`);
  if (maxMs < baseMs) {
    throw new SluiceConfigError(`${factory}: block.max must be at least block.base; got base ${baseMs} ms and max ${maxMs} ms`);
  }
  return { block: Object.freeze({ baseMs, factor, maxMs }) };
}

/** How long the n-th offence (1-based) blocks, in ms: `baseMs × factor^(n-1)`, at most `maxMs`. */
export function blockDurationMs(block: BlockSpec, offences: number): number {
  let ms = block.baseMs;
  for (let i = 1; i < offences && ms < block.maxMs; i++) ms = Math.min(block.maxMs, ms * block.factor);
  return Math.min(ms, block.maxMs);
}

/** `ceil(count * spanMs / amount / 1000)`: the seconds an empty bucket takes to refill `count`. */
function ceilRatioSeconds(count: number, spanMs: number, amount: number): number {
  const numerator = count * spanMs;
  const denominator = amount * 1000;
  if (Number.isSafeInteger(numerator) && Number.isSafeInteger(denominator)) return ceilDiv(numerator, denominator);
  return Math.ceil(numerator / denominator);
}

const isCount = (x: unknown, min = 1): boolean => typeof x === "number" && Number.isSafeInteger(x) && x >= min;

/**
 * True if `value` is a policy as the factories make them: the right `kind`, a valid name and every
 * parameter the algorithms read, as positive safe integers (so a hand-made object cannot slip
 * non-integers into the arithmetic).
 */
export function isPolicy(value: unknown): value is Policy {
  if (typeof value !== "object" || value === null) return false;
  const p = value as Record<string, unknown>;
  if (typeof p.name !== "string" || !NAME_RE.test(p.name) || !isCount(p.limit) || !isCount(p.windowSeconds)) return false;
  if (p.block !== undefined) {
    const b = p.block as Record<string, unknown> | null;
    if (typeof b !== "object" || b === null || !isCount(b.baseMs) || !isCount(b.factor) || !isCount(b.maxMs)) return false;
    if ((b.maxMs as number) < (b.baseMs as number) || (b.maxMs as number) > MAX_DURATION_MS) return false;
  }
  switch (p.kind) {
    case "fixedWindow":
    case "slidingLog":
      return isCount(p.windowMs) && (p.windowMs as number) <= MAX_DURATION_MS;
    case "slidingWindow":
      return isCount(p.windowMs) && (p.windowMs as number) <= MAX_DURATION_MS && (p.limit as number) * (p.windowMs as number) <= Number.MAX_SAFE_INTEGER;
    case "concurrency":
      return p.block === undefined && isCount(p.leaseMs) && (p.leaseMs as number) <= MAX_DURATION_MS;
    case "tokenBucket":
    case "leakyBucket":
      return (
        isCount(p.emissionIntervalUs) &&
        isCount(p.burst) &&
        isCount(p.queue, 0) &&
        p.limit === p.burst &&
        ((p.burst as number) + (p.queue as number)) * (p.emissionIntervalUs as number) <= MAX_GCRA_SPAN_US
      );
    default:
      return false;
  }
}
