/**
 * The other process of the two-processes overrides test (`src/overrides-storage.test.ts`): with its own
 * client library (node-redis), on the same redis-server, it sets `{ scale: 10 }` for one key of
 * each limiter the parent uses (same prefixes, same policies), then prints "done". Configuration
 * comes from the environment: REDIS_URL, PREFIXES (comma-separated), KEY.
 */
import { RateLimiter, slidingLog, tokenBucket } from "@sluice/core";
import { createClient } from "redis";
import { RedisStore } from "../src/index.js";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`override-worker: ${name} is not set`);
  return value;
};

const client = createClient({ url: env("REDIS_URL"), RESP: 2 });
await client.connect();
const store = new RedisStore(client);
const [logPrefix, bucketPrefix] = env("PREFIXES").split(",");
const limiters = [
  new RateLimiter({ store, prefix: logPrefix, limits: slidingLog({ limit: 5, window: "1h", name: "log" }) }),
  new RateLimiter({ store, prefix: bucketPrefix, limits: tokenBucket({ capacity: 5, refillRate: 1, interval: "1d", name: "bucket" }) }),
];
for (const limiter of limiters) await limiter.setOverride(env("KEY"), { scale: 10 });
process.stdout.write("done\n");
await client.quit();
