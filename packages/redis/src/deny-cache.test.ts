/**
 * The deny cache in front of real Redis: once a key is denied, further calls for it are answered
 * by the limiter without a script call. Counted on the server (`INFO commandstats` of a
 * redis-server this file starts for itself) and, for Upstash, as HTTP requests to the bridge.
 */
import { RateLimiter, type Store, fixedWindow } from "@sluice/core";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";

let server: RedisServer;
let bridge: UpstashBridge;
let admin: IORedis;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url });
  admin = new IORedis(server.url);
});
afterAll(async () => {
  admin?.disconnect();
  await bridge?.close();
  await server?.stop();
});

/** Script calls (EVALSHA + EVAL) the server has run since the last `CONFIG RESETSTAT`. */
async function scriptCalls(): Promise<number> {
  const info = await admin.info("commandstats");
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
  return calls;
}

type Client = { name: string; make: () => Promise<{ store: Store; close: () => Promise<void> }> };
const clients: Client[] = [
  {
    name: "RedisStore + ioredis",
    make: async () => {
      const client = new IORedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
      await new Promise((resolve) => client.once("ready", resolve));
      return { store: new RedisStore(client), close: async () => client.disconnect() };
    },
  },
  {
    name: "RedisStore + node-redis",
    make: async () => {
      const client = createClient({ url: server.url, RESP: 2, disableOfflineQueue: true });
      await client.connect();
      return { store: new RedisStore(client), close: async () => client.destroy() };
    },
  },
  {
    name: "UpstashStore",
    make: async () => ({
      store: new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false })),
      close: async () => {},
    }),
  },
];

describe.each(clients)("$name", ({ name, make }) => {
  it("1,000 calls on a denied key: one script call (and, over HTTP, one request)", async () => {
    const { store, close } = await make();
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1h" }), prefix: `deny-${name.replace(/\W+/g, "-")}` });
    expect((await limiter.limit("k")).reason).toBe("ok"); // loads the script if needed
    await admin.config("RESETSTAT");
    bridge.resetCounts();
    const reasons: Record<string, number> = {};
    for (let i = 0; i < 1000; i++) {
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(false);
      reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
    }
    expect(reasons).toEqual({ limit: 1, "cached-deny": 999 });
    expect(await scriptCalls()).toBe(1);
    if (name === "UpstashStore") expect(bridge.counts.total).toBe(1);
    // another key still reaches Redis
    expect((await limiter.limit("other")).reason).toBe("ok");
    expect(await scriptCalls()).toBe(2);
    await close();
  });

  it("with denyCache: false every call is a script call; reset(key) forgets a cached denial", async () => {
    const { store, close } = await make();
    const prefix = `deny-off-${name.replace(/\W+/g, "-")}`;
    const off = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1h" }), prefix, denyCache: false });
    await off.limit("k");
    await admin.config("RESETSTAT");
    for (let i = 0; i < 10; i++) expect((await off.limit("k")).reason).toBe("limit");
    expect(await scriptCalls()).toBe(10);

    const on = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1h" }), prefix });
    expect((await on.limit("k")).reason).toBe("limit");
    expect((await on.limit("k")).reason).toBe("cached-deny");
    await on.reset("k");
    expect(await on.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
    await close();
  });
});
