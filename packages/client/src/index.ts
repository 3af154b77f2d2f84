/**
 * `@sluice/client`: for the people who call rate-limited APIs. Reads every rate-limit header style
 * (the IETF `RateLimit`/`RateLimit-Policy` lists, draft-7, draft-6, `X-RateLimit-*`,
 * `Retry-After`) and wraps `fetch` so that it paces itself and waits out 429s. No dependencies, no
 * Node APIs: browsers, Node.js, workerd, Deno and Bun.
 *
 * @example
 * ```ts
 * import { parseRateLimit, rateLimitedFetch } from "@sluice/client";
 *
 * const api = rateLimitedFetch();
 * const response = await api("https://api.example.com/quote");
 * console.log(parseRateLimit(response.headers).policies);
 * ```
 *
 * @module
 */
export { type FetchLike, type RateLimitedFetchOptions, type WaitInfo, rateLimitedFetch } from "./fetch.js";
export {
  type HeadersLike,
  type ParseRateLimitOptions,
  type RateLimitInfo,
  type RateLimitPolicy,
  type RateLimitStyle,
  parseRateLimit,
} from "./parse.js";
