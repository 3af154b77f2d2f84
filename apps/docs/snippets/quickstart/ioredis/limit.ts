import { RateLimiter, slidingWindow } from "@sluice/core";
import { RedisStore } from "@sluice/redis";
import { Redis } from "ioredis";

// no offline queue: a command is never replayed after an outage the limiter already answered
const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379", {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const limiter = new RateLimiter({
  store: new RedisStore(redis),
  limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
  timeoutMs: 200, // a slow Redis counts as a failure (default 1000 ms): the decision falls back to memory
});

for (let i = 1; i <= 6; i++) {
  const decision = await limiter.limit("user:42");
  console.log(`request ${i}: ${decision.allowed ? `allowed, ${decision.remaining} left` : `denied, retry in ${decision.retryAfterMs} ms`}`);
}

await redis.quit(); // close the connection, so the process exits
