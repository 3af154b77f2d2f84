/**
 * Dry run (and a cached denial) through the Next.js route-handler wrapper and the proxy guard:
 * exact statuses and headers.
 */
import { type Decision, MemoryStore, RateLimiter, type RateLimiterOptions, type Store, fixedWindow } from "@sluice/core";
import type { BoundStore } from "@sluice/core/store";
import { NextRequest, NextResponse } from "next/server";
import { describe, expect, it } from "vitest";
import { rateLimitProxy, withRateLimit } from "./index.js";
import { twoPerMinute } from "@sluice/testing/headers";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

function request(headers: Record<string, string> = {}): NextRequest {
  return new NextRequest("https://app.test/api/items", { headers });
}

function dryRunLimiter(options: Partial<RateLimiterOptions> = {}): RateLimiter {
  return new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 2, window: "1m" }), mode: "dry-run", ...options });
}

function rateLimitHeadersOf(response: Response): Record<string, string> {
  const names = new Set(["ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"]);
  return Object.fromEntries([...response.headers].filter(([name]) => names.has(name)));
}

describe("dry run: withRateLimit (route handlers)", () => {
  it("the handler runs for every request with the marked decision; no headers; onLimited reports and is ignored", async () => {
    const reports: [string, Decision, unknown][] = [];
    const GET = withRateLimit(
      (_request, _context, decision) => Response.json({ allowed: decision?.allowed, dryRun: decision?.dryRun, remaining: decision?.remaining }),
      {
        limiter: dryRunLimiter(),
        key: () => "k",
        onLimited: (r, context, decision) => {
          reports.push([r.nextUrl.pathname, decision, context]);
          return Response.json({ error: "would be limited" }, { status: 429 });
        },
      },
    );
    const context = { params: Promise.resolve({}) };
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const response = await GET(request(), context);
      seen.push([response.status, await response.json(), rateLimitHeadersOf(response)]);
    }
    expect(seen).toEqual([
      [200, { allowed: true, dryRun: true, remaining: 1 }, {}],
      [200, { allowed: true, dryRun: true, remaining: 0 }, {}],
      [200, { allowed: false, dryRun: true, remaining: 0 }, {}],
    ]);
    expect(reports.map(([path, d, ctx]) => [path, d.allowed, d.dryRun, d.retryAfterMs, ctx === context])).toEqual([["/api/items", false, true, 18_000, true]]);
  });

  it("dryRunHeaders: true: the headers enforcing would send, never Retry-After", async () => {
    const GET = withRateLimit(() => new Response("ok"), { limiter: dryRunLimiter(), key: () => "k", dryRunHeaders: true });
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const response = await GET(request(), {});
      seen.push([response.status, rateLimitHeadersOf(response)]);
    }
    expect(seen).toEqual([
      [200, twoPerMinute(1)],
      [200, twoPerMinute(0)],
      [200, twoPerMinute(0)],
    ]);
  });
});

describe("dry run: rateLimitProxy", () => {
  it("denied requests continue (NextResponse.next()) with no headers; onLimited reports", async () => {
    const reports: Decision[] = [];
    const proxy = rateLimitProxy({
      limiter: dryRunLimiter(),
      key: () => "k",
      onLimited: (_r, _event, decision) => {
        reports.push(decision);
        return new Response(null, { status: 429 });
      },
    });
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const response = await proxy(request());
      expect(response).toBeInstanceOf(NextResponse);
      seen.push([response.status, response.headers.get("x-middleware-next"), rateLimitHeadersOf(response)]);
    }
    expect(seen).toEqual([
      [200, "1", {}],
      [200, "1", {}],
      [200, "1", {}],
    ]);
    expect(reports.map((d) => [d.allowed, d.dryRun, d.reason])).toEqual([[false, true, "limit"]]);
  });

  it("dryRunHeaders: true, and a dry-run tier beside an enforcing one", async () => {
    const proxy = rateLimitProxy({
      tiers: {
        free: fixedWindow({ limit: 2, window: "1m" }),
        beta: { limits: fixedWindow({ limit: 2, window: "1m" }), mode: "dry-run" },
      },
      store: new MemoryStore({ clock: () => T0 }),
      tier: (r) => r.headers.get("x-plan") ?? "free",
      key: (r) => r.headers.get("x-plan") ?? "free",
      dryRunHeaders: true,
    });
    const beta = [];
    for (let i = 0; i < 3; i++) {
      const response = await proxy(request({ "x-plan": "beta" }));
      beta.push([response.status, response.headers.get("x-middleware-next"), rateLimitHeadersOf(response)]);
    }
    expect(beta).toEqual([
      [200, "1", twoPerMinute(1)],
      [200, "1", twoPerMinute(0)],
      [200, "1", twoPerMinute(0)],
    ]);
    const free = [];
    for (let i = 0; i < 3; i++) {
      const response = await proxy(request());
      free.push([response.status, response.headers.get("x-middleware-next"), rateLimitHeadersOf(response)]);
    }
    expect(free).toEqual([
      [200, "1", twoPerMinute(1)],
      [200, "1", twoPerMinute(0)],
      [429, null, { ...twoPerMinute(0), "retry-after": "18" }],
    ]);
  });
});

describe("deny cache: rateLimitProxy", () => {
  it("a cached denial answers the same 429 and headers without reaching the store", async () => {
    const memory = new MemoryStore({ clock: () => T0 });
    let consumes = 0;
    // a store that answers asynchronously, like Upstash
    const remote: Store = {
      bind(namespace): BoundStore {
        const inner = memory.bind(namespace);
        return {
          consume: async (key, cost) => (consumes++, inner.consume(key, cost)),
          peek: async (key) => inner.peek(key),
          reset: async (key) => inner.reset(key),
          refund: async (key, cost, charge) => inner.refund(key, cost, charge),
          release: async (key, lease) => inner.release(key, lease),
        };
      },
    };
    const proxy = rateLimitProxy({ limiter: new RateLimiter({ store: remote, limits: fixedWindow({ limit: 2, window: "1m" }), denyCache: { clock: () => 0 } }), key: () => "k" });
    await proxy(request());
    await proxy(request());
    const denied = await proxy(request());
    const cached = await proxy(request());
    expect([denied.status, cached.status]).toEqual([429, 429]);
    expect(rateLimitHeadersOf(cached)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
    expect(rateLimitHeadersOf(denied)).toEqual(rateLimitHeadersOf(cached));
    expect(consumes).toBe(3);
  });
});

describe("countWhen: withRateLimit (route handlers)", () => {
  it("only failed attempts count; the 3rd failure is the 429", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 2, window: "1m" }) });
    const POST = withRateLimit(
      async (r: NextRequest) => ((await r.text()) === "right" ? Response.json({ ok: true }) : Response.json({ ok: false }, { status: 401 })),
      { limiter, key: () => "ip", countWhen: (_request, _context, response) => response.status >= 400 },
    );
    const context = { params: Promise.resolve({}) };
    const statuses = [];
    for (const body of ["right", "right", "wrong", "right", "wrong", "wrong"]) {
      statuses.push((await POST(new NextRequest("https://app.test/api/login", { method: "POST", body }), context)).status);
    }
    expect(statuses).toEqual([200, 200, 401, 200, 401, 429]);
    expect((await limiter.peek("ip")).remaining).toBe(0);
  });
});
