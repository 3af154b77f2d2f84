import { type Decision, RateLimiter, type Store, fixedWindow } from "@sluice/core";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis, { type RedisOptions } from "ioredis";
import { type RedisClientOptions, createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore } from "./redis-store.js";
import { UpstashStore } from "./upstash-store.js";

// An outage must never spend quota after recovery: decisions made while Redis was unreachable got
// their answer from the limiter's fallback; if the client queued their commands and sent them once
// Redis was back, those callers would be charged twice (once by the fallback, once by Redis), and
// callers who come after them would find their quota spent. With the client options the README
// recommends ("Redis settings"), nothing queued survives the outage; with the clients' defaults it
// does, which the second test of each pair shows.

const LIMIT = 10;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 25 ms until it holds, for at most `ms`. */
async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await sleep(25);
  }
}

interface Client {
  store: Store;
  /** Resolves once the client is connected again after the outage. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

let server: RedisServer;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server.stop();
});

/**
 * One decision from Redis, then an outage during which three decisions are made, then recovery.
 * Returns the decisions made during the outage and what Redis holds for the key after recovery
 * (the restarted server is empty, so anything there was written by a command of the outage).
 */
async function outage(
  client: Client,
  name: string,
  interrupt: { down: () => Promise<void>; up: () => Promise<void>; /** Redis keeps its data (only the path to it broke). */ keepsData: boolean },
) {
  const limits = fixedWindow({ limit: LIMIT, window: "1h", name: "hourly" });
  // the connection and the script first, under another prefix and with the time a loaded machine
  // may need for a cold start (the 250 ms below are for the outage, not for that)
  const warm = new RateLimiter({ store: client.store, limits, prefix: `${name}-warm`, timeoutMs: 60_000 });
  expect((await warm.limit("k")).reason).toBe("ok");
  const limiter = new RateLimiter({ store: client.store, limits, prefix: name, timeoutMs: 250 });
  expect((await limiter.limit("k")).reason).toBe("ok");
  await interrupt.down();
  const during: Decision[] = [];
  for (let i = 0; i < 3; i++) during.push(await limiter.limit("k"));
  await interrupt.up();
  await client.ready();
  await sleep(2500); // anything a client kept (a queue, a retry with backoff) has had time to run
  const admin = new IORedis(server.url);
  const stored = await admin.hget(`{${name}::k}`, "hourly|fw");
  admin.disconnect();
  // what the outage's decisions charged: the count, minus the decision made before it if Redis kept it
  const spent = (stored === null ? 0 : Number(stored.split(":")[1])) - (interrupt.keepsData ? 1 : 0);
  // the first decision after recovery (the same key and namespace), with the time a reconnect and a
  // script load may take on a loaded machine
  const after = await new RateLimiter({ store: client.store, limits, prefix: name, timeoutMs: 60_000 }).limit("k");
  await client.close();
  return { during, spent, after };
}

const restartRedis = { down: () => server.stop(), up: () => server.start(), keepsData: false };

function ioredis(options: RedisOptions): Promise<Client> {
  const client = new IORedis(server.url, options);
  client.on("error", () => {}); // failures reach the limiter
  return new Promise((resolve) =>
    client.once("ready", () =>
      resolve({
        store: new RedisStore(client),
        ready: () => until(() => client.status === "ready"),
        close: async () => client.disconnect(),
      }),
    ),
  );
}

async function nodeRedis(options: RedisClientOptions): Promise<Client> {
  const client = createClient({ url: server.url, RESP: 2, ...options });
  client.on("error", () => {});
  await client.connect();
  return {
    store: new RedisStore(client),
    ready: () => until(() => client.isReady),
    close: async () => client.destroy(),
  };
}

describe("an outage never spends quota after recovery, with the recommended client options", () => {
  it("ioredis { enableOfflineQueue: false, maxRetriesPerRequest: 0 }: Redis is untouched by the outage's decisions", async () => {
    const { during, spent, after } = await outage(await ioredis({ enableOfflineQueue: false, maxRetriesPerRequest: 0 }), "outage-io", restartRedis);
    expect(during.map((d) => [d.allowed, d.reason])).toEqual(Array(3).fill([true, "store-error"])); // answered at once, by the fallback
    expect(spent).toBe(0);
    expect(after).toMatchObject({ reason: "ok", remaining: LIMIT - 1 });
  });

  it("node-redis { disableOfflineQueue: true }: Redis is untouched by the outage's decisions", async () => {
    const { during, spent, after } = await outage(await nodeRedis({ disableOfflineQueue: true }), "outage-node", restartRedis);
    expect(during.map((d) => [d.allowed, d.reason])).toEqual(Array(3).fill([true, "store-error"]));
    expect(spent).toBe(0);
    expect(after).toMatchObject({ reason: "ok", remaining: LIMIT - 1 });
  });
});

describe("with the clients' default options, an outage DOES spend quota after recovery (why the README recommends otherwise)", () => {
  it("ioredis defaults (offline queue on, 20 retries per request): the queued decisions run once Redis is back", async () => {
    const { during, spent, after } = await outage(await ioredis({}), "outage-io-default", restartRedis);
    expect(during.map((d) => d.reason)).toEqual(["timeout", "timeout", "timeout"]); // each waited timeoutMs in the queue
    expect(spent).toBe(3); // charged again, by Redis, after the fallback had answered
    expect(after).toMatchObject({ reason: "ok", remaining: LIMIT - 4 });
  });

  it("node-redis defaults (offline queue on): the queued decisions run once Redis is back", async () => {
    const { during, spent } = await outage(await nodeRedis({}), "outage-node-default", restartRedis);
    expect(during.map((d) => d.reason)).toEqual(["timeout", "timeout", "timeout"]);
    expect(spent).toBe(3);
  });
});

describe("UpstashStore: the HTTP path goes away and comes back", () => {
  let bridge: UpstashBridge;
  let port: number;
  let token: string;
  beforeAll(async () => {
    bridge = await startUpstashBridge({ redisUrl: server.url });
    port = bridge.port;
    token = bridge.token;
  });
  afterAll(async () => {
    await bridge.close();
  });
  const restartBridge = {
    down: () => bridge.close(),
    up: async () => {
      await sleep(300);
      bridge = await startUpstashBridge({ redisUrl: server.url, port, token });
      await bridge.redisReady();
    },
    keepsData: true,
  };
  const upstash = (retry: false | { retries: number; backoff: (retryCount: number) => number } | undefined): Client => ({
    store: new UpstashStore(new UpstashRedis({ url: `http://127.0.0.1:${port}`, token, ...(retry === undefined ? {} : { retry }) })),
    ready: async () => {},
    close: async () => {},
  });

  it("@upstash/redis { retry: { retries: 1, backoff: () => 50 } } (retries well inside timeoutMs): untouched", async () => {
    const { during, spent, after } = await outage(upstash({ retries: 1, backoff: () => 50 }), "outage-upstash", restartBridge);
    expect(during.map((d) => [d.allowed, d.reason])).toEqual(Array(3).fill([true, "store-error"]));
    expect(spent).toBe(0);
    expect(after).toMatchObject({ reason: "ok", remaining: LIMIT - 2 }); // the decision before the outage, and this one
  });

  it("@upstash/redis default retry (5 retries, ~4.3 s of backoff): a late retry spends quota after the fallback answered", async () => {
    const { during, spent } = await outage(upstash(undefined), "outage-upstash-default", restartBridge);
    expect(during.map((d) => d.reason)).toEqual(["timeout", "timeout", "timeout"]);
    expect(spent).toBeGreaterThan(0);
  });
});
