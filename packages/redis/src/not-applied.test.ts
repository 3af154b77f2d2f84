import { RateLimiter, SluiceStoreError, fixedWindow } from "@sluice/core";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore } from "./redis-store.js";
import { UpstashStore } from "./upstash-store.js";

// A refund whose call certainly never reached Redis (the connection was refused, the client
// refused to send it) fails with SluiceStoreError.notApplied, and the decision's units stay
// refundable: the next refund of the same decision is sent and gives them back. Any failure after
// which the call may have run (a connection closed with the call in flight, a timeout) uses the
// units up, so a decision is never refunded twice. Real clients, real servers, real failures.

let server: RedisServer;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server.stop();
});

const limits = fixedWindow({ limit: 3, window: "1h", name: "hourly" });

/** Calls of the decide script the server has run (EVALSHA and EVAL), from `INFO commandstats`. */
async function scriptCalls(): Promise<number> {
  const admin = new IORedis(server.url);
  try {
    const info = await admin.info("commandstats");
    let calls = 0;
    for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
    return calls;
  } finally {
    admin.disconnect();
  }
}

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("a refund that never reached Redis leaves the decision refundable", () => {
  it("@upstash/redis, the HTTP endpoint refuses the connection (ECONNREFUSED): notApplied; once it is back, the same refund gives the units back", async () => {
    let bridge: UpstashBridge = await startUpstashBridge({ redisUrl: server.url });
    const { port, token } = bridge;
    try {
      const store = new UpstashStore(new UpstashRedis({ url: `http://127.0.0.1:${port}`, token, retry: false }));
      const limiter = new RateLimiter({ store, limits, prefix: "na-upstash", onStoreError: "deny" });
      const spent = await limiter.limit("k", { cost: 3 });
      expect(spent).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.limit("k")).allowed).toBe(false);

      await bridge.close();
      const error = await limiter.refund("k", { decision: spent }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceStoreError);
      expect((error as SluiceStoreError).notApplied).toBe(true);

      bridge = await startUpstashBridge({ redisUrl: server.url, port, token });
      await bridge.redisReady();
      await limiter.refund("k", { decision: spent });
      expect(await limiter.limit("k", { cost: 3 })).toMatchObject({ allowed: true, remaining: 0 });
      // and the units were refunded once: a third refund gives nothing more
      await limiter.refund("k", { decision: spent });
      expect((await limiter.limit("k")).allowed).toBe(false);
    } finally {
      await bridge.close();
    }
  });

  it("ioredis { enableOfflineQueue: false }, the server is down (\"Stream isn't writeable\"): notApplied; once it is back, the same refund is sent", async () => {
    const client = new IORedis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    client.on("error", () => {});
    try {
      await until(() => client.status === "ready");
      const limiter = new RateLimiter({ store: new RedisStore(client), limits, prefix: "na-io", onStoreError: "deny" });
      const spent = await limiter.limit("k", { cost: 2 });
      expect(spent.allowed).toBe(true);

      await server.stop();
      await until(() => client.status !== "ready");
      const error = await limiter.refund("k", { decision: spent }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceStoreError);
      expect((error as SluiceStoreError).notApplied).toBe(true);

      await server.start();
      await until(() => client.status === "ready");
      const before = await scriptCalls();
      await limiter.refund("k", { decision: spent });
      // the retry reached Redis (had the failure used the units up, no call would be made)
      expect((await scriptCalls()) - before).toBeGreaterThan(0);
    } finally {
      client.disconnect();
      if (!server.running) await server.start();
    }
  });

  it("node-redis, a closed client (ClientClosedError): notApplied", async () => {
    const client = createClient({ url: server.url, RESP: 2 });
    client.on("error", () => {});
    await client.connect();
    const limiter = new RateLimiter({ store: new RedisStore(client), limits, prefix: "na-node", onStoreError: "deny" });
    const spent = await limiter.limit("k", { cost: 2 });
    expect(spent.allowed).toBe(true);
    client.destroy();
    const error = await limiter.refund("k", { decision: spent }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceStoreError);
    expect((error as SluiceStoreError).notApplied).toBe(true);
  });

  it("ioredis, a connection closed by the client (\"Connection is closed.\", which calls in flight get too): may have run, so not notApplied, and the units are used up", async () => {
    const client = new IORedis(server.url, { maxRetriesPerRequest: 0 });
    client.on("error", () => {});
    await until(() => client.status === "ready");
    const limiter = new RateLimiter({ store: new RedisStore(client), limits, prefix: "na-closed", onStoreError: "deny" });
    const spent = await limiter.limit("k", { cost: 2 });
    client.disconnect();
    await until(() => client.status === "end");
    const error = await limiter.refund("k", { decision: spent }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceStoreError);
    expect((error as SluiceStoreError).notApplied).toBe(false);
    // used up: a second refund resolves without a store call (and without an error)
    const before = await scriptCalls();
    await expect(limiter.refund("k", { decision: spent })).resolves.toBeDefined();
    expect((await scriptCalls()) - before).toBe(0);
  });
});
