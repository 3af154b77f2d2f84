/**
 * `onDecision` through both Next.js entry points, `withRateLimit` (route handlers:
 * `(request, context, decision, info)`) and `rateLimitProxy` (proxy.ts / middleware.ts:
 * `(request, event, decision, info)`): once per decided request, with Next.js's own arguments, the
 * key's hash, the tier and the route (`request.nextUrl` without the query); never for a skipped
 * request; a throwing callback changes no response.
 */
import { type Decision, type DecisionInfo, MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { partitionKeyOf } from "@sluice/core/adapter";
import { NextRequest } from "next/server";
import { describe, expect, it } from "vitest";
import { rateLimitProxy, withRateLimit } from "./index.js";

const T0 = 1_700_000_022_000;
const limiter = (limit: number) => new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit, window: "1m" }) });
const request = (path: string, apiKey: string, method = "GET") => new NextRequest(`https://app.test${path}`, { method, headers: { "x-api-key": apiKey } });
const byApiKey = (r: NextRequest) => r.headers.get("x-api-key") ?? "anonymous";

function recorder() {
  const seen: { framework: [NextRequest, unknown]; decision: Decision; keyHash: string; tier: string | undefined; route: string }[] = [];
  const onDecision = (request: NextRequest, extra: unknown, decision: Decision, info: DecisionInfo) =>
    seen.push({ framework: [request, extra], decision, keyHash: info.keyHash, tier: info.tier, route: info.route });
  return { seen, onDecision };
}

describe("onDecision in Next.js", () => {
  it("withRateLimit: each decided request once, with the decision the handler gets", async () => {
    const { seen, onDecision } = recorder();
    const handed: (Decision | undefined)[] = [];
    const GET = withRateLimit(
      (_request, _context: { params: Promise<{ id: string }> }, decision) => {
        handed.push(decision);
        return Response.json({ ok: true });
      },
      { limiter: limiter(1), key: byApiKey, onDecision },
    );
    const context = { params: Promise.resolve({ id: "7" }) };
    const first = request("/api/items/7?q=secret", "alice");
    expect((await GET(first, context)).status).toBe(200);
    expect((await GET(request("/api/items/7", "alice"), context)).status).toBe(429);
    expect(seen.map((s) => [s.decision.allowed, s.decision.reason, s.route, s.tier, s.keyHash])).toEqual([
      [true, "ok", "GET /api/items/7", undefined, partitionKeyOf("sluice::alice").slice(1, -1)],
      [false, "limit", "GET /api/items/7", undefined, partitionKeyOf("sluice::alice").slice(1, -1)],
    ]);
    expect(seen[0]?.decision).toBe(handed[0]);
    // Next's own (request, context), the very objects, before what Sluice adds
    expect(seen[0]?.framework[0]).toBe(first);
    expect(seen[0]?.framework[1]).toBe(context);
  });

  it("rateLimitProxy: tiers, skipped requests unreported, a throwing callback harmless", async () => {
    const tiers: (string | undefined)[] = [];
    const routes: string[] = [];
    const events: unknown[] = [];
    const errors: [string, string][] = [];
    const proxy = rateLimitProxy({
      store: new MemoryStore({ clock: () => T0 }),
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) },
      tier: (_request, _event, key) => (key === "pro-key" ? "pro" : "free"),
      key: byApiKey,
      skip: (r) => r.nextUrl.pathname === "/api/health",
      onDecision: (_request, event, _decision, info) => {
        events.push(event);
        tiers.push(info.tier);
        routes.push(info.route);
        throw new Error("the logger is down");
      },
      onCallbackError: (request, _event, error, callback) => errors.push([`${request.nextUrl.pathname} ${(error as Error).message}`, callback]),
    });
    const statuses = [];
    for (const [path, key, method] of [["/api/health", "free-key", "GET"], ["/api/a", "pro-key", "POST"], ["/api/b", "free-key", "GET"], ["/api/b", "free-key", "GET"]] as const) {
      statuses.push((await proxy(request(path, key, method))).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(tiers).toEqual(["pro", "free", "free"]);
    expect(routes).toEqual(["POST /api/a", "GET /api/b", "GET /api/b"]);
    expect(events.every((e) => typeof (e as { waitUntil?: unknown }).waitUntil === "function")).toBe(true);
    expect(errors).toEqual([
      ["/api/a the logger is down", "onDecision"],
      ["/api/b the logger is down", "onDecision"],
      ["/api/b the logger is down", "onDecision"],
    ]);
  });
});
