/**
 * `onDecision(request, env, ctx, decision, info)` through the Workers `withRateLimit`: once per
 * decided request, with the Worker's arguments, the key's hash, the tier and the route; never for a
 * skipped request; a throwing callback changes no response (its error goes to `onCallbackError`).
 * (Node, over MemoryStore: the wrapper imports nothing from `cloudflare:workers`. The same option
 * over the Durable Object store, in workerd, is tested with `@sluice/otel` in packages/otel.)
 */
import { type Decision, type DecisionInfo, MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { partitionKeyOf } from "@sluice/core/adapter";
import { describe, expect, it } from "vitest";
import { withRateLimit } from "../src/with-rate-limit.js";

const T0 = 1_700_000_022_000;
const ctx = { waitUntil: () => {}, passThroughOnException: () => {} } as unknown as ExecutionContext;
const get = (path: string, apiKey: string) => new Request(`https://worker.test${path}`, { headers: { "x-api-key": apiKey } });

describe("withRateLimit({ onDecision })", () => {
  it("reports decided requests with the decision the handler gets; not skipped ones", async () => {
    const seen: [Decision, string, string | undefined, string][] = [];
    const framework: unknown[][] = [];
    const handed: (Decision | undefined)[] = [];
    const worker = withRateLimit(
      (_request, _env, _ctx, rateLimit) => {
        handed.push(rateLimit);
        return new Response("ok");
      },
      {
        limiter: () => new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) }),
        key: (request) => request.headers.get("x-api-key") ?? "anonymous",
        skip: (request) => new URL(request.url).pathname === "/health",
        onDecision: (request, env, context, decision, info: DecisionInfo) => {
          framework.push([request, env, context]);
          seen.push([decision, info.keyHash, info.tier, info.route]);
        },
      },
    );
    const env = {};
    const statuses = [];
    const requests = ["/health", "/v1/x?token=t", "/v1/x"].map((path) => get(path, "alice"));
    for (const request of requests) statuses.push((await worker.fetch(request, env, ctx)).status);
    expect(statuses).toEqual([200, 200, 429]);
    // the Worker's own arguments first, the very objects
    expect(framework).toHaveLength(2);
    framework.forEach(([request, e, c], i) => {
      expect(request).toBe(requests[i + 1]);
      expect(e).toBe(env);
      expect(c).toBe(ctx);
    });
    const hash = partitionKeyOf("sluice::alice").slice(1, -1);
    expect(seen.map(([d, ...info]) => [d.reason, ...info])).toEqual([
      ["ok", hash, undefined, "GET /v1/x"],
      ["limit", hash, undefined, "GET /v1/x"],
    ]);
    expect(seen[0]?.[0]).toBe(handed[1]);
  });

  it("with tiers: the tier; a throwing callback changes no response", async () => {
    const tiers: (string | undefined)[] = [];
    const errors: [string, string][] = [];
    const worker = withRateLimit(() => new Response("ok"), {
      store: () => new MemoryStore({ clock: () => T0 }),
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) },
      tier: (_request, _env, _ctx, key) => (key === "pro-key" ? "pro" : "free"),
      key: (request) => request.headers.get("x-api-key") ?? "anonymous",
      onDecision: (_request, _env, _ctx, _decision, info) => {
        tiers.push(info.tier);
        throw new Error("the logger is down");
      },
      onCallbackError: (_request, _env, _ctx, error, callback) => errors.push([(error as Error).message, callback]),
    });
    const env = {};
    const statuses = [];
    for (const key of ["pro-key", "free-key", "free-key"]) statuses.push((await worker.fetch(get("/", key), env, ctx)).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect(tiers).toEqual(["pro", "free", "free"]);
    expect(errors).toEqual(Array(3).fill(["the logger is down", "onDecision"]));
  });
});
