/**
 * instrumentStore and instrumentDecisions on the real Redis stores: RedisStore over ioredis and
 * node-redis, and UpstashStore over HTTP through the REST bridge, all against a private
 * redis-server. Allowed, denied, answered by the deny cache (no store call, so no span) and a real
 * store error (a Redis WRONGTYPE reply from the decide script): exact counter values and
 * attributes, span names, attributes and status, histogram counts.
 */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { RateLimiter, type Store, createGuard, fixedWindow } from "@sluice/core";
import { createTestRedisStore, createTestUpstashStore } from "@sluice/redis/testing";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { METRIC_SLUICE_DECISIONS, METRIC_SLUICE_STORE_DURATION, instrumentDecisions, instrumentStore } from "./index.js";
import { startTestSdk } from "./test/sdk.js";

const T0 = 1_700_000_022_000; // 42 s into a minute: the window does not roll over during a test

let server: RedisServer;
let bridge: UpstashBridge;
let admin: IORedis;
const closers: (() => Promise<unknown> | void)[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url });
  admin = new IORedis(server.url);
});
afterAll(async () => {
  for (const close of closers) await close();
  admin?.disconnect();
  await bridge?.close();
  await server?.stop();
});

type Transport = { name: string; storeClass: string; store: () => Promise<Store> };

const transports: Transport[] = [
  {
    name: "ioredis",
    storeClass: "RedisStore",
    store: async () => {
      const client = new IORedis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
      await new Promise((resolve) => client.once("ready", resolve));
      closers.push(() => client.disconnect());
      return createTestRedisStore(client, { clock: () => T0 });
    },
  },
  {
    name: "node-redis",
    storeClass: "RedisStore",
    store: async () => {
      const client = createClient({ url: server.url, RESP: 2, disableOfflineQueue: true });
      await client.connect();
      closers.push(() => client.destroy());
      return createTestRedisStore(client, { clock: () => T0 });
    },
  },
  {
    name: "Upstash (HTTP)",
    storeClass: "UpstashStore",
    store: async () => createTestUpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }), { clock: () => T0 }),
  },
];

describe.each(transports)("$name", ({ name, storeClass, store: makeStore }) => {
  it("counts allowed, denied, cached and failed decisions; one span and one measurement per store call", async () => {
    const sdk = startTestSdk();
    const prefix = `otel-${name.replace(/[^a-z]/gi, "")}`;
    const store = instrumentStore(await makeStore(), { meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const guard = createGuard({
      limiter: new RateLimiter({ store, prefix, limits: fixedWindow({ limit: 2, window: "1m", name: "per-minute" }) }),
      key: (request) => request.headers.get("x-api-key") ?? "anonymous",
      onDecision: instrumentDecisions({ meterProvider: sdk.meterProvider }),
    });
    const call = async (apiKey: string) => (await guard(new Request("https://api.test/hello", { headers: { "x-api-key": apiKey } }))).decision;

    // alice: two allowed, a denial from Redis, then the deny cache answers without a round trip
    const reasons = [];
    for (let i = 0; i < 4; i++) reasons.push((await call("alice"))?.reason);
    expect(reasons).toEqual(["ok", "ok", "limit", "cached-deny"]);
    // bob: his key holds a string, so the decide script's HGET fails with WRONGTYPE: a store error
    await admin.set(`{${prefix}::bob}`, "not a hash");
    const failed = await call("bob");
    expect([failed?.allowed, failed?.reason]).toEqual([true, "store-error"]); // the fallback answered

    expect(await sdk.counter(METRIC_SLUICE_DECISIONS)).toEqual([
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": false, "sluice.reason": "cached-deny" }, value: 1 },
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": false, "sluice.reason": "limit" }, value: 1 },
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": true, "sluice.reason": "ok" }, value: 2 },
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": true, "sluice.reason": "store-error" }, value: 1 },
    ]);

    const spans = sdk.spans();
    // four store calls: the cached denial made none
    expect(spans.map((s) => [s.name, s.kind])).toEqual(Array(4).fill(["sluice.store consume", SpanKind.CLIENT]));
    const base = { "sluice.store": storeClass, "sluice.prefix": prefix, "sluice.operation": "consume", "sluice.cost": 1 };
    expect(spans.slice(0, 3).map((s) => ({ attributes: s.attributes, status: s.status }))).toEqual([
      { attributes: { ...base, "sluice.allowed": true, "sluice.policy": "per-minute", "sluice.reason": "ok", "sluice.remaining": 1 }, status: { code: SpanStatusCode.UNSET } },
      { attributes: { ...base, "sluice.allowed": true, "sluice.policy": "per-minute", "sluice.reason": "ok", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET } },
      { attributes: { ...base, "sluice.allowed": false, "sluice.policy": "per-minute", "sluice.reason": "limit", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET } },
    ]);
    const error = spans[3];
    expect(error?.attributes).toEqual({ ...base, "error.type": "SluiceStoreError" });
    expect(error?.status.code).toBe(SpanStatusCode.ERROR);
    expect(error?.status.message).toMatch(/^\[sluice\] \[redis\] the decide script failed: .*WRONGTYPE/);
    expect(error?.events).toEqual(["exception"]);

    expect((await sdk.histogram(METRIC_SLUICE_STORE_DURATION)).map(({ attributes, count }) => ({ attributes, count }))).toEqual([
      { attributes: { "sluice.store": storeClass, "sluice.operation": "consume", "error.type": "SluiceStoreError" }, count: 1 },
      { attributes: { "sluice.store": storeClass, "sluice.operation": "consume" }, count: 3 },
    ]);
    for (const p of await sdk.histogram(METRIC_SLUICE_STORE_DURATION)) expect(p.sum).toBeLessThan(5); // a round trip on loopback, in seconds
    await sdk.shutdown();
  });

  it("with tiers: the tier on the counter, the spans and the histogram; peek and reset traced too", async () => {
    const sdk = startTestSdk();
    const prefix = `otel-tiers-${name.replace(/[^a-z]/gi, "")}`;
    const store = instrumentStore(await makeStore(), { meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const guard = createGuard({
      store,
      prefix,
      tiers: { free: fixedWindow({ limit: 1, window: "1m", name: "free-minute" }), pro: fixedWindow({ limit: 100, window: "1m", name: "pro-minute" }) },
      tier: (_request, key) => (key === "paying" ? "pro" : "free"),
      key: (request) => request.headers.get("x-api-key") ?? "anonymous",
      onDecision: instrumentDecisions({ meterProvider: sdk.meterProvider }),
    });
    const get = (apiKey: string) => guard(new Request("https://api.test/x", { headers: { "x-api-key": apiKey } }));
    await get("paying");
    await get("someone");
    await get("someone");
    expect(await sdk.counter(METRIC_SLUICE_DECISIONS)).toEqual([
      { attributes: { "sluice.policy": "free-minute", "sluice.allowed": false, "sluice.reason": "limit", "sluice.tier": "free" }, value: 1 },
      { attributes: { "sluice.policy": "free-minute", "sluice.allowed": true, "sluice.reason": "ok", "sluice.tier": "free" }, value: 1 },
      { attributes: { "sluice.policy": "pro-minute", "sluice.allowed": true, "sluice.reason": "ok", "sluice.tier": "pro" }, value: 1 },
    ]);
    expect(sdk.spans().map((s) => [s.attributes["sluice.tier"], s.attributes["sluice.allowed"]])).toEqual([
      ["pro", true],
      ["free", true],
      ["free", false],
    ]);
    const limiter = new RateLimiter({ store, prefix, limits: fixedWindow({ limit: 3, window: "1m" }) });
    await limiter.limit("carol");
    await limiter.peek("carol");
    await limiter.reset("carol");
    expect(sdk.spans().slice(3).map((s) => [s.name, s.attributes["sluice.remaining"], s.status.code])).toEqual([
      ["sluice.store consume", 2, SpanStatusCode.UNSET],
      ["sluice.store peek", 2, SpanStatusCode.UNSET],
      ["sluice.store reset", undefined, SpanStatusCode.UNSET],
    ]);
    expect((await sdk.histogram(METRIC_SLUICE_STORE_DURATION)).map(({ attributes, count }) => ({ attributes, count }))).toEqual([
      { attributes: { "sluice.store": storeClass, "sluice.operation": "consume" }, count: 1 },
      { attributes: { "sluice.store": storeClass, "sluice.operation": "peek" }, count: 1 },
      { attributes: { "sluice.store": storeClass, "sluice.operation": "reset" }, count: 1 },
      { attributes: { "sluice.store": storeClass, "sluice.tier": "free", "sluice.operation": "consume" }, count: 2 },
      { attributes: { "sluice.store": storeClass, "sluice.tier": "pro", "sluice.operation": "consume" }, count: 1 },
    ]);
    await sdk.shutdown();
  });
});
