import { testStore } from "@sluice/testing";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { vi } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";

// The whole conformance suite with clock: "client" on a redis-server that refuses TIME. The
// stores are the production classes (no test hook): the suite's clock reaches them through
// Date.now, which clock: "client" reads on every call.

let server: RedisServer | undefined;
let bridge: UpstashBridge | undefined;
let client: IORedis | undefined;

async function noTimeServer(clock: () => number): Promise<RedisServer> {
  vi.spyOn(Date, "now").mockImplementation(clock);
  server ??= await startRedisServer({ args: ["--rename-command", "TIME", '""'] });
  return server;
}

testStore({
  name: 'RedisStore + ioredis, clock "client", a server without TIME',
  makeStore: async ({ clock }) => {
    client = new IORedis((await noTimeServer(clock)).url, { maxRetriesPerRequest: 1 });
    return new RedisStore(client, { clock: "client" });
  },
  teardown: async () => {
    await client?.quit();
  },
  numRuns: 25,
  invariantRuns: 10,
});

testStore({
  name: 'UpstashStore + @upstash/redis, clock "client", a server without TIME',
  makeStore: async ({ clock }) => {
    bridge = await startUpstashBridge({ redisUrl: (await noTimeServer(clock)).url });
    return new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }), { clock: "client" });
  },
  teardown: async () => {
    await bridge?.close();
    vi.restoreAllMocks();
    await server?.stop();
  },
  numRuns: 15,
  invariantRuns: 8,
});
