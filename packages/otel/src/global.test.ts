/**
 * With no SDK installed, everything is the API's no-op: no error, the decisions unchanged, nothing
 * recorded. Once an SDK registers the global providers — even after the store was instrumented —
 * the same instrumented objects record from then on.
 */
import { metrics, trace } from "@opentelemetry/api";
import { MemoryStore, RateLimiter, createGuard, fixedWindow } from "@sluice/core";
import { afterAll, describe, expect, it } from "vitest";
import { METRIC_SLUICE_DECISIONS, METRIC_SLUICE_STORE_DURATION, instrumentDecisions, instrumentStore } from "./index.js";
import { startTestSdk } from "./test/sdk.js";

const T0 = 1_700_000_022_000;
const sdk = startTestSdk();
afterAll(async () => {
  metrics.disable();
  trace.disable();
  await sdk.shutdown();
});

// built before any SDK exists, as a module that builds its limiter at import time would
const guard = createGuard({
  limiter: new RateLimiter({ store: instrumentStore(new MemoryStore({ clock: () => T0 })), limits: fixedWindow({ limit: 3, window: "1m" }) }),
  key: (request) => request.headers.get("x-api-key") ?? "anonymous",
  onDecision: instrumentDecisions(),
});
const get = () => guard(new Request("https://api.test/", { headers: { "x-api-key": "k" } }));

describe("the global providers", () => {
  it("no SDK: no error, the same decisions, and nothing recorded", async () => {
    expect(trace.getTracerProvider().getTracer("x").startSpan("probe").isRecording()).toBe(false); // the API's no-op
    const first = await get();
    const second = await get();
    expect([first.decision?.remaining, second.decision?.remaining]).toEqual([2, 1]);
    expect(first.response).toBeUndefined();
    expect(sdk.spans()).toEqual([]);
    expect(await sdk.counter(METRIC_SLUICE_DECISIONS)).toEqual([]);
  });

  it("an SDK registered later is used from then on, by the objects made before it", async () => {
    expect(metrics.setGlobalMeterProvider(sdk.meterProvider)).toBe(true);
    expect(trace.setGlobalTracerProvider(sdk.tracerProvider)).toBe(true);
    const third = await get();
    const fourth = await get();
    expect([third.decision?.allowed, fourth.decision?.allowed]).toEqual([true, false]);
    // only the two decisions made since: the first two went to the no-op
    expect(await sdk.counter(METRIC_SLUICE_DECISIONS)).toEqual([
      { attributes: { "sluice.policy": "3-per-1m", "sluice.allowed": false, "sluice.reason": "limit" }, value: 1 },
      { attributes: { "sluice.policy": "3-per-1m", "sluice.allowed": true, "sluice.reason": "ok" }, value: 1 },
    ]);
    expect(sdk.spans().map((s) => [s.name, s.attributes["sluice.allowed"]])).toEqual([
      ["sluice.store consume", true],
      ["sluice.store consume", false],
    ]);
    expect((await sdk.histogram(METRIC_SLUICE_STORE_DURATION)).map((p) => p.count)).toEqual([2]);
  });
});
