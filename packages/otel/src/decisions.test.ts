/**
 * instrumentDecisions: the `sluice.decisions` counter's descriptor and attributes for every kind
 * of decision (ok, limit, cost-exceeds-limit, store-error, timeout, dry run, tiers), fed by
 * `onDecision` of the request pipeline.
 */
import { MemoryStore, RateLimiter, SluiceConfigError, type Store, createGuard, fixedWindow } from "@sluice/core";
import { afterAll, describe, expect, it } from "vitest";
import { INSTRUMENTATION_SCOPE, INSTRUMENTATION_VERSION, METRIC_SLUICE_DECISIONS, instrumentDecisions } from "./index.js";
import { startTestSdk } from "./test/sdk.js";
import { readFileSync } from "node:fs";

const T0 = 1_700_000_022_000;
const store = () => new MemoryStore({ clock: () => T0 });
const byApiKey = (request: Request) => request.headers.get("x-api-key") ?? "anonymous";
const get = (guard: (request: Request) => Promise<unknown>, apiKey: string, cost = "1") =>
  guard(new Request("https://api.test/", { headers: { "x-api-key": apiKey, "x-cost": cost } }));

describe("instrumentDecisions", () => {
  const sdk = startTestSdk();
  afterAll(() => sdk.shutdown());

  it("counts by policy, allowed, reason, tier and dry run, with the descriptor of a counter of {decision}", async () => {
    const onDecision = instrumentDecisions({ meterProvider: sdk.meterProvider });
    const cost = (request: Request) => Number(request.headers.get("x-cost"));
    const plain = createGuard({ limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 2, window: "1m", name: "small" }) }), key: byApiKey, cost, onDecision });
    await get(plain, "a");
    await get(plain, "a");
    await get(plain, "a");
    await get(plain, "b", "3"); // more than the limit: can never pass
    const tiered = createGuard({
      store: store(),
      tiers: { free: fixedWindow({ limit: 1, window: "1m", name: "free" }), trial: { limits: fixedWindow({ limit: 1, window: "1m", name: "trial" }), mode: "dry-run" } },
      tier: (_request, key) => (key.startsWith("t") ? "trial" : "free"),
      key: byApiKey,
      onDecision,
    });
    await get(tiered, "f1");
    await get(tiered, "t1");
    await get(tiered, "t1"); // would be denied: served, counted as a dry-run denial
    const rejecting = () => Promise.reject(new Error("down"));
    const hanging = () => new Promise<never>(() => {});
    const down: Store = { bind: () => ({ consume: rejecting, peek: rejecting, reset: rejecting, refund: rejecting, release: rejecting }) };
    const hung: Store = { bind: () => ({ consume: hanging, peek: hanging, reset: hanging, refund: hanging, release: hanging }) };
    const failing = createGuard({ limiter: new RateLimiter({ store: down, limits: fixedWindow({ limit: 1, window: "1m", name: "down" }), onStoreError: "deny" }), key: byApiKey, onDecision });
    const slow = createGuard({ limiter: new RateLimiter({ store: hung, limits: fixedWindow({ limit: 1, window: "1m", name: "hung" }), timeoutMs: 20 }), key: byApiKey, onDecision });
    await get(failing, "x");
    await get(slow, "x");

    expect(await sdk.counter(METRIC_SLUICE_DECISIONS)).toEqual([
      { attributes: { "sluice.policy": "down", "sluice.allowed": false, "sluice.reason": "store-error" }, value: 1 },
      { attributes: { "sluice.policy": "free", "sluice.allowed": true, "sluice.reason": "ok", "sluice.tier": "free" }, value: 1 },
      { attributes: { "sluice.policy": "hung", "sluice.allowed": true, "sluice.reason": "timeout" }, value: 1 },
      { attributes: { "sluice.policy": "small", "sluice.allowed": false, "sluice.reason": "cost-exceeds-limit" }, value: 1 },
      { attributes: { "sluice.policy": "small", "sluice.allowed": false, "sluice.reason": "limit" }, value: 1 },
      { attributes: { "sluice.policy": "small", "sluice.allowed": true, "sluice.reason": "ok" }, value: 2 },
      { attributes: { "sluice.policy": "trial", "sluice.allowed": false, "sluice.reason": "limit", "sluice.tier": "trial", "sluice.dry_run": true }, value: 1 },
      { attributes: { "sluice.policy": "trial", "sluice.allowed": true, "sluice.reason": "ok", "sluice.tier": "trial", "sluice.dry_run": true }, value: 1 },
    ]);
    expect((await sdk.descriptors()).filter((d) => d.name === METRIC_SLUICE_DECISIONS)).toEqual([
      {
        scope: INSTRUMENTATION_SCOPE,
        version: INSTRUMENTATION_VERSION,
        name: "sluice.decisions",
        unit: "{decision}",
        description: "Rate-limit decisions made by the Sluice request pipeline",
        type: 3, // DataPointType.SUM
      },
    ]);
  });

  it("refuses a meterProvider that is not one, and options that are not an object: SluiceConfigError naming each", () => {
    const bad = () => instrumentDecisions({ meterProvider: { getMeter: 1 } as never });
    expect(bad).toThrow(SluiceConfigError);
    expect(bad).toThrow("[sluice] [otel] meterProvider must be an OpenTelemetry MeterProvider");
    expect(bad).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "meterProvider" }));
    expect(() => instrumentDecisions(null as never)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "options", message: "[sluice] [otel] options must be an object; got null" }));
  });

  it("the scope's version is the package's", () => {
    const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(INSTRUMENTATION_VERSION).toBe(manifest.version);
  });
});
