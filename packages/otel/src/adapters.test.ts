/**
 * One `instrumentDecisions()` and one `instrumentStore()` through every adapter: Hono's
 * `rateLimiter`, Next's `withRateLimit` and `rateLimitProxy`, and core's `createGuard`. (The
 * Workers `withRateLimit` over the Durable Object store runs in workerd: packages/cloudflare's
 * telemetry test.) Exact counter values and spans per adapter.
 */
import { MemoryStore, RateLimiter, createGuard, fixedWindow } from "@sluice/core";
import { rateLimiter } from "@sluice/hono";
import { rateLimitProxy, withRateLimit as withRouteRateLimit } from "@sluice/next";
import { Hono } from "hono";
import { NextRequest } from "next/server";
import { afterAll, describe, expect, it } from "vitest";
import { METRIC_SLUICE_DECISIONS, METRIC_SLUICE_STORE_DURATION, instrumentDecisions, instrumentStore } from "./index.js";
import { startTestSdk } from "./test/sdk.js";

const T0 = 1_700_000_022_000;
const sdk = startTestSdk();
afterAll(() => sdk.shutdown());

const onDecision = instrumentDecisions({ meterProvider: sdk.meterProvider });
/** Each adapter its own store name, so its spans and measurements can be told apart. */
const limiterFor = (adapter: string) =>
  new RateLimiter({
    store: instrumentStore(new MemoryStore({ clock: () => T0 }), { name: adapter, meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider }),
    limits: fixedWindow({ limit: 2, window: "1m", name: adapter }),
  });

/** Sends three requests (the third is denied) and returns the statuses. */
async function threeRequests(send: () => Promise<Response>): Promise<number[]> {
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await send()).status);
  return statuses;
}

async function expectCounted(adapter: string) {
  const points = (await sdk.counter(METRIC_SLUICE_DECISIONS)).filter((p) => p.attributes["sluice.policy"] === adapter);
  expect(points).toEqual([
    { attributes: { "sluice.policy": adapter, "sluice.allowed": false, "sluice.reason": "limit" }, value: 1 },
    { attributes: { "sluice.policy": adapter, "sluice.allowed": true, "sluice.reason": "ok" }, value: 2 },
  ]);
  const spans = sdk.spans().filter((s) => s.attributes["sluice.store"] === adapter);
  expect(spans.map((s) => [s.name, s.attributes["sluice.allowed"]])).toEqual([
    ["sluice.store consume", true],
    ["sluice.store consume", true],
    ["sluice.store consume", false],
  ]);
  const measured = (await sdk.histogram(METRIC_SLUICE_STORE_DURATION)).filter((p) => p.attributes["sluice.store"] === adapter);
  expect(measured.map((p) => p.count)).toEqual([3]);
}

describe("through every adapter", () => {
  it("createGuard", async () => {
    const guard = createGuard({ limiter: limiterFor("guard"), key: () => "k", onDecision });
    const statuses = await threeRequests(async () => (await guard(new Request("https://api.test/"))).response ?? new Response("ok"));
    expect(statuses).toEqual([200, 200, 429]);
    await expectCounted("guard");
  });

  it("Hono rateLimiter", async () => {
    const app = new Hono();
    app.use(rateLimiter({ limiter: limiterFor("hono"), key: () => "k", onDecision }));
    app.get("/", (c) => c.text("ok"));
    expect(await threeRequests(async () => app.request("/"))).toEqual([200, 200, 429]);
    await expectCounted("hono");
  });

  it("Next withRateLimit (route handler)", async () => {
    const GET = withRouteRateLimit(() => Response.json({ ok: true }), { limiter: limiterFor("next-route"), key: () => "k", onDecision });
    expect(await threeRequests(() => GET(new NextRequest("https://app.test/api"), {}))).toEqual([200, 200, 429]);
    await expectCounted("next-route");
  });

  it("Next rateLimitProxy (proxy.ts)", async () => {
    const proxy = rateLimitProxy({ limiter: limiterFor("next-proxy"), key: () => "k", onDecision });
    expect(await threeRequests(() => proxy(new NextRequest("https://app.test/api")))).toEqual([200, 200, 429]);
    await expectCounted("next-proxy");
  });

});
