import { testStore } from "@sluice/testing";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { inject } from "vitest";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

// The same suite (the key-schema checks included), the same recorded vectors as MemoryStore,
// through each transport. Each suite opens its own connection.

function ioredisTransport() {
  let client: IORedis | undefined;
  return {
    makeStore: ({ clock }: { clock: () => number }) => {
      client = new IORedis(inject("sluiceRedisUrl"), { lazyConnect: false, maxRetriesPerRequest: 1 });
      return createTestRedisStore(client, { clock });
    },
    teardown: async () => {
      await client?.quit();
    },
  };
}

function nodeRedisTransport() {
  let client: ReturnType<typeof createClient> | undefined;
  return {
    makeStore: async ({ clock }: { clock: () => number }) => {
      client = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
      await client.connect();
      return createTestRedisStore(client, { clock });
    },
    teardown: async () => {
      await client?.quit();
    },
  };
}

function upstashTransport() {
  return {
    makeStore: ({ clock }: { clock: () => number }) =>
      createTestUpstashStore(
        new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false }),
        { clock },
      ),
  };
}

testStore({ name: "RedisStore + ioredis", ...ioredisTransport(), numRuns: 40, invariantRuns: 60 });
testStore({ name: "RedisStore + node-redis", ...nodeRedisTransport(), numRuns: 40, invariantRuns: 60 });
testStore({ name: "UpstashStore + @upstash/redis (HTTP bridge)", ...upstashTransport(), numRuns: 25, invariantRuns: 25 });
