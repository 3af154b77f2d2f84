import { testStore } from "@sluice/testing";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { inject } from "vitest";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

// The same suite and the same recorded vectors as MemoryStore, through each transport.

let ioredis: IORedis | undefined;
testStore({
  name: "RedisStore + ioredis",
  makeStore: ({ clock }) => {
    ioredis = new IORedis(inject("sluiceRedisUrl"), { lazyConnect: false, maxRetriesPerRequest: 1 });
    return createTestRedisStore(ioredis, { clock });
  },
  teardown: async () => {
    await ioredis?.quit();
  },
  numRuns: 40,
});

let nodeRedis: ReturnType<typeof createClient> | undefined;
testStore({
  name: "RedisStore + node-redis",
  makeStore: async ({ clock }) => {
    nodeRedis = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
    await nodeRedis.connect();
    return createTestRedisStore(nodeRedis, { clock });
  },
  teardown: async () => {
    await nodeRedis?.quit();
  },
  numRuns: 40,
});

testStore({
  name: "UpstashStore + @upstash/redis (HTTP bridge)",
  makeStore: ({ clock }) =>
    createTestUpstashStore(
      new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false }),
      { clock },
    ),
  numRuns: 25,
});
