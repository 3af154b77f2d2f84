/**
 * Sluice core: the algorithms, the `RateLimiter` and `MemoryStore`, and the Fetch-level pieces
 * (guard, headers, 429 response, client identity) that every adapter wraps. No runtime
 * dependencies, no Node APIs: it runs wherever the Fetch API runs.
 *
 * This entry is what an application calls, with the types of those calls, the errors it may catch
 * and the defaults and bounds of its options. Two more entries serve other audiences:
 * `@sluice/core/adapter` (the request pipeline and the header writers, for adapter authors) and
 * `@sluice/core/store` (the `Store` contract, the key schema and a pure decision over JSON state,
 * for store authors). The export list of each is pinned by `entries.test.ts`.
 *
 * @example
 * ```ts
 * import { RateLimiter, fixedWindow, tokenBucket } from "@sluice/core";
 *
 * const limiter = new RateLimiter({
 *   limits: [tokenBucket({ capacity: 10, refillRate: 1 }), fixedWindow({ limit: 1000, window: "1d" })],
 * });
 * const decision = await limiter.limit("user:42");
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 * ```
 *
 * @module
 */
export {
  fixedWindow,
  slidingWindow,
  slidingLog,
  tokenBucket,
  leakyBucket,
  concurrency,
  type BlockOption,
  type BlockSpec,
  type Policy,
  type PolicyKind,
  type FixedWindowPolicy,
  type SlidingWindowPolicy,
  type SlidingLogPolicy,
  type TokenBucketPolicy,
  type LeakyBucketPolicy,
  type ConcurrencyPolicy,
  type ConcurrencyOptions,
  type WindowOptions,
  type TokenBucketOptions,
  type LeakyBucketOptions,
} from "./algorithms/index.js";
export { toMs, type Duration, type DurationUnit } from "./duration.js";
export { SluiceError, SluiceConfigError, SluiceInputError, SluiceTimeoutError, SluiceStoreError } from "./errors.js";
export type { SluiceErrorCode, SluiceOptionErrorOptions } from "./errors.js";
// the bounds of what a user passes: a key's length, the policies of one limiter, a quota
export { MAX_KEY_LENGTH, MAX_POLICIES } from "./keys.js";
export { MAX_QUOTA } from "./algorithms/index.js";
export {
  RateLimiter,
  DEFAULT_TIMEOUT_MS,
  type RateLimiterOptions,
  type LimitOptions,
  type RefundOptions,
  type LimiterMode,
  type StoreErrorMode,
} from "./limiter/index.js";
export { DEFAULT_DENY_CACHE_MAX_KEYS, type DenyCacheOption, type DenyCacheOptions } from "./deny-cache.js";
export { DEFAULT_RESERVE_MAX_AGE_MS, DEFAULT_RESERVE_SHARE, type ReserveOption, type ReserveOptions } from "./reservations.js";
export { MemoryStore, type MemoryStoreOptions } from "./memory-store.js";
export {
  setRateLimitHeaders,
  DEFAULT_HEADER_STYLES,
  type HeaderStyle,
  type HeadersOption,
  type HeaderSink,
  type PartitionKeyOption,
} from "./headers.js";
export {
  limitedResponse,
  addRateLimitHeaders,
  quotaExceededProblem,
  QUOTA_EXCEEDED_TYPE,
  QUOTA_EXCEEDED_TITLE,
  type QuotaExceededProblem,
} from "./response.js";
export { clientIp, normalizeIp, UNKNOWN_CLIENT_KEY, type ClientIpOptions, type ClientIpTrust } from "./client-ip.js";
export { createGuard, type Guard, type GuardOptions, type GuardResult } from "./guard.js";
// what a guard's (and every adapter's) options hand to callbacks and take as tiers
export type { CallbackName, DecisionInfo, TierConfig, TierSettings } from "./pipeline/index.js";
export type { Decision, DecisionReason, PolicyResult, Store } from "./types.js";
export type { Override, OverrideOptions } from "./overrides.js";
