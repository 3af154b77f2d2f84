import { RateLimiter, slidingWindow } from "@sluice/core";
import { rateLimitMiddleware } from "@sluice/next";
import { UpstashStore } from "@sluice/redis";
import { Redis } from "@upstash/redis";

// middleware.ts runs on the edge runtime: every instance counts in the same Upstash Redis
export const middleware = rateLimitMiddleware({
  limiter: new RateLimiter({
    store: new UpstashStore(Redis.fromEnv()), // reads UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN
    limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
  }),
  trust: "vercel", // key by the client address Vercel sends in x-vercel-forwarded-for
});

export const config = { matcher: "/api/:path*" };
