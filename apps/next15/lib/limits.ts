/**
 * The limits of the app, shared by middleware.ts and the route handler. Each entry point is its
 * own bundle (middleware.ts on the edge runtime, the route on Node.js), so each has its own
 * `MemoryStore` and its own prefix.
 *
 * The intervals end in a quarter second (20.25 s, 30.25 s) on purpose: every relative header value
 * (`t`, `Retry-After`) then sits at least 250 ms away from a whole second, so the test can assert
 * exact header strings.
 */
import { MemoryStore, RateLimiter, tokenBucket } from "@sluice/core";

/** The key of a request: its API key, else one shared quota for anonymous callers. */
export function apiKeyOf(request: Request): string {
  return request.headers.get("x-api-key") ?? "anonymous";
}

/** /api/guarded/* (middleware.ts): a burst of 3, one more every 20.25 s. */
export function guardedLimiter(): RateLimiter {
  return new RateLimiter({
    store: new MemoryStore({ maxKeys: 10_000 }),
    prefix: "next15-app:guarded",
    limits: tokenBucket({ name: "guarded", capacity: 3, refillRate: 1, interval: "20250ms" }),
  });
}

/** /api/wrapped (withRateLimit): a burst of 2, one more every 30.25 s. */
export function wrappedLimiter(): RateLimiter {
  return new RateLimiter({
    store: new MemoryStore({ maxKeys: 10_000 }),
    prefix: "next15-app:wrapped",
    limits: tokenBucket({ name: "burst", capacity: 2, refillRate: 1, interval: "30250ms" }),
  });
}
