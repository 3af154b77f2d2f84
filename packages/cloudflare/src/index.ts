/**
 * Sluice on Cloudflare Workers: the `SluiceLimiter` Durable Object, which runs the core algorithms
 * with its own clock; `DurableObjectStore`, the core `Store` over it; and `withRateLimit()` around a
 * module Worker's `fetch`.
 *
 * @module
 */
export { SluiceLimiter, type SluiceLimiterEnv } from "./durable-object.js";
export {
  DurableObjectStore,
  MAX_SHARDS,
  type DurableObjectStoreOptions,
  type SluiceLimiterNamespace,
} from "./store.js";
export { withRateLimit, UNKNOWN_CLIENT_KEY, type RateLimitedFetch, type RateLimitedHandler, type WithRateLimitHandler } from "./with-rate-limit.js";
export type { WithRateLimitOptions, WithRateLimitCommonOptions, WithRateLimitLimiterOptions, WithRateLimitTieredOptions } from "./options.js";
// The RPC wire format between DurableObjectStore and SluiceLimiter (protocol.ts: the calls, their
// replies, policies as plain data) is internal: both ends ship in this package and change together.
export type { Decision } from "@sluice/core";
