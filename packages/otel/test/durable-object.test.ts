/**
 * In workerd: `@sluice/cloudflare`'s `withRateLimit` over `DurableObjectStore` (the SQLite-backed
 * `SluiceLimiter` object, run by Miniflare), the store wrapped by `instrumentStore` and decisions
 * counted by `instrumentDecisions`, with the OpenTelemetry SDK running inside the Worker. Exact
 * counter values and attributes, span names, attributes and status for allowed, denied and failing
 * object calls, and what the Workers adapter hands `onDecision`.
 */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { partitionKeyOf } from "@sluice/core/adapter";
import { type StartedWorker, startWorker } from "@sluice/testing/miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const T0 = 1_700_000_022_000; // 42 s into a minute

let worker: StartedWorker | undefined;
let url: string;

beforeAll(async () => {
  worker = await startWorker({
    entry: new URL("./fixtures/worker.ts", import.meta.url),
    name: "sluice-otel-test",
    durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: true } },
    bindings: { SLUICE_ALLOW_TEST_CLOCK: "true" },
  });
  url = worker.url;
});

afterAll(async () => {
  await worker?.stop();
});

const get = (path: string, apiKey: string) => fetch(new URL(path, url), { headers: { "x-api-key": apiKey, "x-test-now": String(T0) } });

interface Recorded {
  spans: { name: string; kind: number; attributes: Record<string, unknown>; status: { code: number; message?: string }; events: string[] }[];
  decisions: { attributes: Record<string, unknown>; value: number }[];
  durations: { attributes: Record<string, unknown>; count: number }[];
  infos: { keyHash: string; tier: string | undefined; route: string; allowed: boolean; reason: string }[];
}

describe("Durable Object store and the Workers adapter, in workerd", () => {
  it("counts decisions, traces each object call with its outcome or its failure, and reports to onDecision", async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get("/api/hello?x=1", "alice")).status);
    statuses.push((await get("/broken/hello", "bob")).status);
    expect(statuses).toEqual([200, 200, 429, 200]); // bob: the fallback let him through
    const recorded = (await (await fetch(new URL("/telemetry", url))).json()) as Recorded;

    expect(recorded.decisions).toEqual([
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": false, "sluice.reason": "limit" }, value: 1 },
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": true, "sluice.reason": "ok" }, value: 2 },
      { attributes: { "sluice.policy": "per-minute", "sluice.allowed": true, "sluice.reason": "store-error" }, value: 1 },
    ]);

    const consume = (prefix: string) => ({ "sluice.store": "DurableObjectStore", "sluice.prefix": prefix, "sluice.operation": "consume", "sluice.cost": 1 });
    expect(recorded.spans.slice(0, 3)).toEqual([
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume("api"), "sluice.allowed": true, "sluice.policy": "per-minute", "sluice.reason": "ok", "sluice.remaining": 1 }, status: { code: SpanStatusCode.UNSET }, events: [] },
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume("api"), "sluice.allowed": true, "sluice.policy": "per-minute", "sluice.reason": "ok", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET }, events: [] },
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume("api"), "sluice.allowed": false, "sluice.policy": "per-minute", "sluice.reason": "limit", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET }, events: [] },
    ]);
    expect(recorded.spans[3]).toEqual({
      name: "sluice.store consume",
      kind: SpanKind.CLIENT,
      attributes: { ...consume("broken"), "error.type": "SluiceStoreError" },
      status: { code: SpanStatusCode.ERROR, message: "[sluice] [cloudflare] SluiceLimiter.consume() failed: Durable Object is overloaded. Requests queued for too long." },
      events: ["exception"],
    });
    expect(recorded.spans).toHaveLength(4);

    expect(recorded.durations).toEqual([
      { attributes: { "sluice.store": "DurableObjectStore", "sluice.operation": "consume", "error.type": "SluiceStoreError" }, count: 1 },
      { attributes: { "sluice.store": "DurableObjectStore", "sluice.operation": "consume" }, count: 3 },
    ]);

    const alice = partitionKeyOf("api::alice").slice(1, -1);
    expect(recorded.infos).toEqual([
      { keyHash: alice, route: "GET /api/hello", allowed: true, reason: "ok" },
      { keyHash: alice, route: "GET /api/hello", allowed: true, reason: "ok" },
      { keyHash: alice, route: "GET /api/hello", allowed: false, reason: "limit" },
      { keyHash: partitionKeyOf("broken::bob").slice(1, -1), route: "GET /broken/hello", allowed: true, reason: "store-error" },
    ]); // tier: undefined, left out by JSON
  });
});
