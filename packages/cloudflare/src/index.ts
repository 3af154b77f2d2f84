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
  type SluiceLimiterStub,
} from "./store.js";
export {
  withRateLimit,
  UNKNOWN_CLIENT_KEY,
  type RateLimitedFetch,
  type RateLimitedHandler,
  type WithRateLimitHandler,
  type WithRateLimitOptions,
  type WithRateLimitCommonOptions,
  type WithRateLimitLimiterOptions,
  type WithRateLimitTieredOptions,
} from "./with-rate-limit.js";
export type {
  PolicySpec,
  LimiterCall,
  ConsumeCall,
  RefundCall,
  ReleaseCall,
  ResetCall,
  DecisionReply,
  ResetReply,
  Refusal,
  RefusalName,
} from "./protocol.js";
export type { Decision } from "@sluice/core";
