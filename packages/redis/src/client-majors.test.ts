import { testStore } from "@sluice/testing";
import IORedis6 from "ioredis6";
import { createClient as createClient6 } from "redis6";
import { inject } from "vitest";
import { createTestRedisStore } from "./testing.js";

// The peer ranges promise ioredis ^5 || ^6 and node-redis (redis) ^5 || ^6. conformance.test.ts runs
// the suite on the 5.x the workspace pins; this file runs it on the 6.x majors, installed as npm
// aliases (ioredis6, redis6), with the clients' defaults: node-redis 6 speaks RESP3 unless told
// otherwise (node-redis 5 with RESP2 is in conformance.test.ts).

function ioredis6Transport() {
  let client: IORedis6 | undefined;
  return {
    makeStore: ({ clock }: { clock: () => number }) => {
      client = new IORedis6(inject("sluiceRedisUrl"), { maxRetriesPerRequest: 1 });
      return createTestRedisStore(client, { clock });
    },
    teardown: async () => {
      await client?.quit();
    },
  };
}

function nodeRedis6Transport() {
  let client: ReturnType<typeof createClient6> | undefined;
  return {
    makeStore: async ({ clock }: { clock: () => number }) => {
      client = createClient6({ url: inject("sluiceRedisUrl") });
      await client.connect();
      return createTestRedisStore(client, { clock });
    },
    teardown: async () => {
      await client?.close();
    },
  };
}

testStore({ name: "RedisStore + ioredis 6", ...ioredis6Transport(), numRuns: 25, invariantRuns: 10 });
testStore({ name: "RedisStore + node-redis 6 (its default protocol, RESP3)", ...nodeRedis6Transport(), numRuns: 25, invariantRuns: 10 });
