import { RateLimiter, slidingWindow } from "@sluice/core";
import { UpstashStore } from "@sluice/redis";
import { Redis } from "@upstash/redis";

const limiter = new RateLimiter({
  store: new UpstashStore(Redis.fromEnv()), // reads UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN
  limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
});

for (let i = 1; i <= 6; i++) {
  const decision = await limiter.limit("user:42");
  console.log(`request ${i}: ${decision.allowed ? `allowed, ${decision.remaining} left` : `denied, retry in ${decision.retryAfterMs} ms`}`);
}
