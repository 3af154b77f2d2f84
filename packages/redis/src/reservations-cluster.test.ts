import { type RedisCluster, startRedisCluster } from "@sluice/testing/redis-cluster";
import { testReservations } from "@sluice/testing/reservations-fuzz";
import IORedis from "ioredis";
import { createCluster } from "redis";
import { afterAll, beforeAll } from "vitest";
import { createTestRedisStore } from "./testing.js";

// Reservations on a Redis Cluster, through both clients: the reserve mode of the decide script runs
// on the node that holds the key's hash tag, like every decision (the whole conformance suite runs
// on single servers; the cold-start test covers a cluster's script loading).

let cluster: RedisCluster;

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

let ioredis: InstanceType<typeof IORedis.Cluster> | undefined;
testReservations({
  name: "RedisStore + ioredis Cluster",
  makeStore: async ({ clock }) => {
    ioredis = new IORedis.Cluster([...cluster.rootNodes], { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 1 } });
    await ioredis.connect();
    return createTestRedisStore(ioredis, { clock });
  },
  teardown: async () => {
    ioredis?.disconnect();
  },
});

let nodeRedis: { destroy(): void | Promise<void> } | undefined;
testReservations({
  name: "RedisStore + node-redis cluster",
  makeStore: async ({ clock }) => {
    const client = await createCluster({ rootNodes: cluster.urls.map((url) => ({ url })), RESP: 2 }).connect();
    nodeRedis = client;
    return createTestRedisStore(client, { clock });
  },
  teardown: async () => {
    await nodeRedis?.destroy();
  },
});
