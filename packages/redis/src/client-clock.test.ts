import { RateLimiter, SluiceConfigError, SluiceStoreError, type Store, fixedWindow } from "@sluice/core";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";

// A redis-server of our own that refuses TIME, as some managed Redis services do inside scripts.
let server: RedisServer;
let bridge: UpstashBridge;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  server = await startRedisServer({ args: ["--rename-command", "TIME", '""'] });
  bridge = await startUpstashBridge({ redisUrl: server.url });
});
afterAll(async () => {
  for (const close of closers) await close();
  await bridge.close();
  await server.stop();
});

type Make = (options?: { clock?: "server" | "client" }) => Promise<Store>;
const transports: [string, Make][] = [
  [
    "RedisStore + ioredis",
    async (options) => {
      const client = new IORedis(server.url, { maxRetriesPerRequest: 1 });
      closers.push(() => client.quit());
      return new RedisStore(client, options);
    },
  ],
  [
    "RedisStore + node-redis",
    async (options) => {
      const client = createClient({ url: server.url, RESP: 2 });
      await client.connect();
      closers.push(() => client.quit());
      return new RedisStore(client, options);
    },
  ],
  [
    "UpstashStore + @upstash/redis",
    async (options) => new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }), options),
  ],
];

describe('a server that refuses TIME: clock "server" fails naming the option, clock "client" works', () => {
  it("the server really has no TIME", async () => {
    const admin = new IORedis(server.url, { maxRetriesPerRequest: 1 });
    try {
      await expect(admin.call("TIME")).rejects.toThrow(/unknown command/i);
    } finally {
      admin.disconnect();
    }
  });

  for (const [name, make] of transports) {
    it(`${name}: the default clock is a SluiceStoreError that says { clock: "client" }`, async () => {
      const store = await make();
      const bound = store.bind({ prefix: "no-time", policies: [fixedWindow({ limit: 3, window: "1m" })] });
      const error = await Promise.resolve(bound.consume("k", 1)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceStoreError);
      const storeName = name.split(" ")[0];
      expect((error as Error).message).toMatch(/^\[sluice\] \[redis\] the decide script failed: .*(TIME|[Uu]nknown).*/s);
      expect((error as Error).message).toContain(
        `. This server refuses Redis TIME inside scripts: construct the store with { clock: "client" } (new ${storeName}(client, { clock: "client" }))`,
      );
      // through a limiter it is a store failure like any other
      const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 3, window: "1m" }), prefix: "no-time-l", onStoreError: "deny" });
      expect(await limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
    });

    it(`${name}: clock "client" decides with this process's time`, async () => {
      const store = await make({ clock: "client" });
      const limiter = new RateLimiter({
        store,
        limits: fixedWindow({ limit: 3, window: "1m", name: "m" }),
        prefix: `client-${name.split(" ").at(-1)?.replace(/\W/g, "")}`,
        denyCache: false,
      });
      // four requests in one minute's window: not in the last 2 s of one
      if (60_000 - (Date.now() % 60_000) < 2_000) await new Promise((resolve) => setTimeout(resolve, 2_100));
      const before = Date.now();
      const decisions = [];
      for (let i = 0; i < 4; i++) decisions.push(await limiter.limit("k"));
      const after = Date.now();
      expect(decisions.map((d) => [d.allowed, d.remaining, d.reason])).toEqual([
        [true, 2, "ok"],
        [true, 1, "ok"],
        [true, 0, "ok"],
        [false, 0, "limit"],
      ]);
      for (const d of decisions) {
        expect(d.now).toBeGreaterThanOrEqual(before);
        expect(d.now).toBeLessThanOrEqual(after);
      }
      const last = decisions[3]!;
      expect(last.resetAt).toBe(Math.floor(last.now / 60_000) * 60_000 + 60_000);
      expect(last.retryAfterMs).toBe(last.resetAt - last.now);
    });
  }

  it("clock must be \"server\" or \"client\"", () => {
    const client = { evalsha: async () => 0, eval: async () => 0, del: async () => 0 };
    expect(() => new UpstashStore(client, { clock: "local" as never })).toThrow(SluiceConfigError);
    expect(() => new UpstashStore(client, { clock: "local" as never })).toThrow('[sluice] [redis] clock must be "server" or "client"; got "local"');
    expect(() => new RedisStore({ ...client, defineCommand: () => 0 } as never, { clock: 1 as never })).toThrow(
      '[sluice] [redis] clock must be "server" or "client"; got 1',
    );
    expect(() => new UpstashStore(client, null as never)).toThrow("[sluice] [redis] options must be an object like { clock }; got null");
  });
});
