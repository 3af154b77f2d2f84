/**
 * @module
 * Rate limiting for Next.js, built on `@sluice/core`: a guard for `proxy.ts` (Next.js 16) and
 * `middleware.ts` (earlier versions, and the edge runtime), and a wrapper for App Router route
 * handlers. IETF `RateLimit` headers (plus draft-7, draft-6 and legacy `X-RateLimit-*`), an RFC
 * 9457 `application/problem+json` 429, tiers, and no Node.js API: it runs on the Node.js and the
 * edge runtime alike. Imports only `next/server` from Next.js.
 */
export {
  rateLimitProxy,
  rateLimitMiddleware,
  type RateLimitProxy,
  type RateLimitProxyOptions,
  type ProxyFunction,
  type ProxyResult,
} from "./proxy.js";
export { withRateLimit, type RouteHandler, type WithRateLimitOptions } from "./route.js";
export {
  UNKNOWN_CLIENT_KEY,
  type RateLimitOptions,
  type RateLimitCommonOptions,
  type RateLimitLimiterOptions,
  type RateLimitTieredOptions,
} from "./options.js";
export type { Decision } from "@sluice/core";
