/**
 * `onDecision(c, decision, info)` through the Hono middleware: once per decided request, with the
 * request's context, the decision the handler sees at `c.get("rateLimit")`, the key's hash, the
 * tier and the route; never for a skipped request; a throwing callback changes no response (its
 * error goes to `onCallbackError(c, error, "onDecision")`).
 */
import { type Decision, type DecisionInfo, MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { partitionKeyOf } from "@sluice/core/adapter";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { type RateLimitVariables, rateLimiter } from "./index.js";

const T0 = 1_700_000_022_000;
const store = () => new MemoryStore({ clock: () => T0 });

describe("rateLimiter({ onDecision })", () => {
  it("reports each decided request once, with the decision c.get('rateLimit') holds; skipped requests not at all", async () => {
    const seen: [Decision, { keyHash: string; tier: string | undefined; route: string }][] = [];
    const handed: (Decision | undefined)[] = [];
    const contexts: [unknown, unknown][] = [];
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(
      rateLimiter({
        limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 1, window: "1m" }) }),
        key: (c) => c.req.header("x-api-key") ?? "anonymous",
        skip: (c) => c.req.path === "/health",
        onDecision: (c, decision, info: DecisionInfo) => {
          contexts.push([c, (c as unknown as { get(name: string): unknown }).get("rateLimit")]);
          seen.push([decision, { keyHash: info.keyHash, tier: info.tier, route: info.route }]);
        },
      }),
    );
    const handlerContexts: unknown[] = [];
    app.get("*", (c) => {
      handed.push(c.get("rateLimit"));
      handlerContexts.push(c);
      return c.text("ok");
    });
    const statuses = [];
    for (const path of ["/health", "/api/items/7?page=2", "/api/items/7", "/health"]) {
      statuses.push((await app.request(path, { headers: { "x-api-key": "alice" } })).status);
    }
    expect(statuses).toEqual([200, 200, 429, 200]);
    expect(seen.map(([d, info]) => [d.allowed, d.reason, info.route, info.tier])).toEqual([
      [true, "ok", "GET /api/items/7", undefined],
      [false, "limit", "GET /api/items/7", undefined],
    ]);
    expect(seen[0]?.[0]).toBe(handed[1]); // the very decision the handler got
    expect(contexts[0]?.[0]).toBe(handlerContexts[1]); // Hono's own c, first
    expect(contexts.map(([, d]) => d)).toEqual([undefined, undefined]); // called before c.set("rateLimit")
    expect(seen.every(([, info]) => info.keyHash === partitionKeyOf("sluice::alice").slice(1, -1))).toBe(true);
  });

  it("with tiers: the tier; a callback that throws changes no response", async () => {
    const tiers: (string | undefined)[] = [];
    const errors: [string, string, string][] = [];
    const app = new Hono();
    app.use(
      rateLimiter({
        store: store(),
        tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) },
        tier: (_c, key) => (key === "pro-key" ? "pro" : "free"),
        key: (c) => c.req.header("x-api-key") ?? "anonymous",
        onDecision: (_c, _decision, info) => {
          tiers.push(info.tier);
          throw new Error("the logger is down");
        },
        onCallbackError: (c, error, callback) => errors.push([c.req.path, (error as Error).message, callback]),
      }),
    );
    app.post("*", (c) => c.text("ok"));
    const statuses = [];
    for (const key of ["pro-key", "free-key", "free-key"]) statuses.push((await app.request("/x", { method: "POST", headers: { "x-api-key": key } })).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect(tiers).toEqual(["pro", "free", "free"]);
    expect(errors).toEqual(Array(3).fill(["/x", "the logger is down", "onDecision"]));
  });
});
