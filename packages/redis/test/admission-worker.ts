/**
 * One OS process of the no-over-admission test: for each phase it waits for the phase's start time
 * (shared by all processes), then runs CALLERS concurrent callers, each making REQUESTS decisions on
 * the same key, and prints how many were allowed. Configuration comes from the environment.
 */
import { RateLimiter, type Policy, fixedWindow, leakyBucket, slidingLog, tokenBucket } from "@sluice/core";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { RedisStore, UpstashStore } from "../src/index.js";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`admission-worker: ${name} is not set`);
  return value;
};
const redisUrl = env("REDIS_URL");
const upstashUrl = env("UPSTASH_URL");
const upstashToken = env("UPSTASH_TOKEN");
const prefix = env("PREFIX");
const startAt = Number(env("START_AT"));
const phaseMs = Number(env("PHASE_MS"));
const callers = Number(env("CALLERS"));
const requests = Number(env("REQUESTS"));

const POLICIES: Record<string, () => Policy> = {
  fixedWindow: () => fixedWindow({ limit: 100, window: "1h" }),
  slidingLog: () => slidingLog({ limit: 100, window: "1h" }),
  // no refill inside the test: one token a day
  tokenBucket: () => tokenBucket({ capacity: 100, refillRate: 1, interval: "1d" }),
  leakyBucket: () => leakyBucket({ rate: 1, period: "1d", burst: 100 }),
};

const io = new IORedis(redisUrl);
const node = createClient({ url: redisUrl, RESP: 2 });
await node.connect();
const stores = {
  ioredis: new RedisStore(io),
  "node-redis": new RedisStore(node),
  upstash: new UpstashStore(new UpstashRedis({ url: upstashUrl, token: upstashToken, retry: false })),
};

const results: { store: string; policy: string; allowed: number; denied: number; failed: number }[] = [];
let phase = 0;
for (const [storeName, store] of Object.entries(stores)) {
  for (const [policyName, make] of Object.entries(POLICIES)) {
    const limiter = new RateLimiter({ store, limits: make(), prefix: `${prefix}-${storeName}-${policyName}`, onStoreError: "deny" });
    const wait = startAt + phase * phaseMs - Date.now();
    phase++;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    let allowed = 0;
    let denied = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        for (let i = 0; i < requests; i++) {
          const d = await limiter.limit("hot-key");
          if (d.reason === "store-error" || d.reason === "timeout") failed++;
          else if (d.allowed) allowed++;
          else denied++;
        }
      }),
    );
    results.push({ store: storeName, policy: policyName, allowed, denied, failed });
  }
}
process.stdout.write(`${JSON.stringify(results)}\n`);
await io.quit();
await node.quit();
