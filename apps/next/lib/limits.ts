/**
 * The limits and the store of the app, shared by proxy.ts and the route handlers.
 *
 * The store is chosen when a module that imports this one is first loaded, at run time (not at
 * build time): with UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN set, every limiter keeps
 * its counters in Redis through `@upstash/redis` (shared by every instance and every runtime);
 * without them, in a `MemoryStore`. A memory store is per module instance: proxy.ts, each
 * Node.js route and each edge route are separate bundles, so each has its own — which is why every
 * limiter below has its own prefix and no two entry points share a limiter.
 */
import { MemoryStore, RateLimiter, type Store, leakyBucket, tokenBucket } from "@sluice/core";
import { UpstashStore } from "@sluice/redis";
import { Redis } from "@upstash/redis";

/** Which store this process uses: "upstash" when both Upstash variables are set, else "memory". */
export function storeKind(): "upstash" | "memory" {
  return process.env.UPSTASH_REDIS_REST_URL && process.env.UPSTASH_REDIS_REST_TOKEN ? "upstash" : "memory";
}

function createStore(): Store {
  if (storeKind() === "memory") return new MemoryStore({ maxKeys: 10_000 });
  // fromEnv reads UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN
  return new UpstashStore(Redis.fromEnv({ enableTelemetry: false }));
}

/** The key of a request: its API key, else one shared quota for anonymous callers. */
export function apiKeyOf(request: Request): string {
  return request.headers.get("x-api-key") ?? "anonymous";
}

/*
 * The intervals end in a quarter second (20.25 s, 30.25 s; 1 h / 7 = 514.29 s) on purpose: every
 * relative header value (`t`, `Retry-After`) then sits at least 250 ms away from a whole second,
 * so it comes out the same whether Node's clock (whole ms) or Redis's (µs) decides, and the app's
 * test can assert exact header strings on both stores.
 */

/** /api/guarded/* (proxy.ts): a burst of 3, one more every 20.25 s. */
export function guardedLimiter(): RateLimiter {
  return new RateLimiter({
    store: createStore(),
    prefix: "next-app:guarded",
    limits: tokenBucket({ name: "guarded", capacity: 3, refillRate: 1, interval: "20250ms" }),
  });
}

/**
 * /api/wrapped and /api/edge (withRateLimit): a burst of 2 refilled one per 30.25 s, and 7 an hour
 * (a leaky bucket). A request must pass both.
 */
export function wrappedLimiter(prefix: string): RateLimiter {
  return new RateLimiter({
    store: createStore(),
    prefix,
    limits: [
      tokenBucket({ name: "burst", capacity: 2, refillRate: 1, interval: "30250ms" }),
      leakyBucket({ name: "hourly", rate: 7, period: "1h", burst: 7 }),
    ],
  });
}

/**
 * /api/guarded/burst (withRateLimit, behind proxy.ts too): one request, then one more every
 * 30.25 s — tighter than the proxy's, so this route is the one that answers the 429.
 */
export function burstLimiter(): RateLimiter {
  return new RateLimiter({
    store: createStore(),
    prefix: "next-app:burst",
    limits: tokenBucket({ name: "route-burst", capacity: 1, refillRate: 1, interval: "30250ms" }),
  });
}
