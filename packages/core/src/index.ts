/**
 * Sluice core: the algorithms, the `RateLimiter`, the `Store` contract and `MemoryStore`, and the
 * Fetch-level pieces (guard, headers, 429 response, client identity) that every adapter wraps.
 * No runtime dependencies, no Node APIs: it runs wherever the Fetch API runs.
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
  isPolicy,
  blockDurationMs,
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
export { toMs, formatMs, MAX_DURATION_MS, type Duration, type DurationUnit } from "./duration.js";
export { SluiceError, SluiceConfigError, SluiceInputError, SluiceTimeoutError, SluiceStoreError } from "./errors.js";
export type { SluiceErrorCode, SluiceOptionErrorOptions } from "./errors.js";
export { MAX_KEY_LENGTH, MAX_POLICIES } from "./keys.js";
export {
  RateLimiter,
  DEFAULT_TIMEOUT_MS,
  type RateLimiterOptions,
  type LimitOptions,
  type RefundOptions,
  type LimiterMode,
  type StoreErrorMode,
} from "./limiter.js";
export {
  DEFAULT_DENY_CACHE_MAX_KEYS,
  denyCacheMarginMs,
  type DenyCacheOption,
  type DenyCacheOptions,
} from "./deny-cache.js";
export { MemoryStore, type MemoryStoreOptions } from "./memory-store.js";
// the header writer machinery (compileRateLimitHeaders, resolveHeaderStyles, HEADER_FORMATTERS,
// mergeRateLimitHeaders) is in the "@sluice/core/adapter" entry, with createPipeline
export {
  setRateLimitHeaders,
  ietfPolicyHeader,
  partitionKeyOf,
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
export { clientIp, normalizeIp, validateClientIpOptions, UNKNOWN_CLIENT_KEY, type ClientIpOptions, type ClientIpTrust } from "./client-ip.js";
export { createGuard, type Guard, type GuardOptions, type GuardResult } from "./guard.js";
// the options every adapter takes (createPipeline itself is in "@sluice/core/adapter")
export type {
  PipelineOptions,
  PipelineCommonOptions,
  CallbackName,
  DecisionInfo,
  PipelineLimiterOptions,
  PipelineTieredOptions,
  TierSettings,
  TierConfig,
} from "./pipeline/index.js";
// writing a store of your own: the contract, the key schema and a pure decide over a JSON state
// are in the "@sluice/core/store" entry
export type {
  Decision,
  DecisionReason,
  PolicyResult,
  Store,
  BoundStore,
  StoreNamespace,
  StoreResult,
  MaybePromise,
} from "./types.js";
