import { RateLimiter, slidingWindow } from "@sluice/core";
import { RedisStore } from "@sluice/redis";
import { createClient } from "redis";

// no offline queue: a command is never replayed after an outage the limiter already answered
const client = createClient({ url: process.env.REDIS_URL ?? "redis://localhost:6379", disableOfflineQueue: true });
client.on("error", (error: Error) => console.error(`redis: ${error.message}`));
await client.connect();

const limiter = new RateLimiter({
  store: new RedisStore(client),
  limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
  timeoutMs: 200, // a slow Redis counts as a failure (default 1000 ms): the decision falls back to memory
});

for (let i = 1; i <= 6; i++) {
  const decision = await limiter.limit("user:42");
  console.log(`request ${i}: ${decision.allowed ? `allowed, ${decision.remaining} left` : `denied, retry in ${decision.retryAfterMs} ms`}`);
}

await client.close(); // close the connection, so the process exits
