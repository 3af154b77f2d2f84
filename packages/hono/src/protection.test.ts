/**
 * Dry run and the deny cache through the Hono middleware: `app.request()` in, exact statuses and
 * headers out.
 */
import { type Decision, MemoryStore, RateLimiter, type Store, fixedWindow, leakyBucket } from "@sluice/core";
import type { BoundStore } from "@sluice/core/store";
import { Hono } from "hono";
import { describe, expect, it, vi } from "vitest";
import { rateLimiter } from "./index.js";
import { twoPerMinute } from "@sluice/testing/headers";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

const get = (app: { request: (request: Request) => Response | Promise<Response> }, headers: Record<string, string> = {}) =>
  app.request(new Request("http://localhost/", { headers }));

/** Every header that starts with `ratelimit`, `x-ratelimit` or is `retry-after`, as a plain object. */
function limitHeaders(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of res.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") out[name] = value;
  }
  return out;
}

function dryRunApp(options: { dryRunHeaders?: boolean } = {}) {
  const reports: Decision[] = [];
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 2, window: "1m" }), mode: "dry-run" });
  const app = new Hono<{ Variables: { rateLimit: Decision | undefined } }>();
  app.use(
    rateLimiter({
      limiter,
      key: (c) => c.req.header("x-key") ?? "anonymous",
      onLimited: (c, decision) => {
        reports.push(decision);
        return c.json({ error: "would be limited" }, 429); // ignored in dry run
      },
      ...options,
    }),
  );
  app.get("/", (c) => {
    const d = c.get("rateLimit");
    return c.text(`allowed=${d?.allowed} dryRun=${d?.dryRun}`);
  });
  return { app, reports };
}

describe("dry run", () => {
  it("every request reaches the handler: no 429, no headers; c.get('rateLimit') says what enforcing would do; onLimited reports", async () => {
    const { app, reports } = dryRunApp();
    const seen: [number, string, Record<string, string>][] = [];
    for (let i = 0; i < 4; i++) {
      const res = await get(app, { "x-key": "alice" });
      seen.push([res.status, await res.text(), limitHeaders(res)]);
    }
    expect(seen).toEqual([
      [200, "allowed=true dryRun=true", {}],
      [200, "allowed=true dryRun=true", {}],
      [200, "allowed=false dryRun=true", {}],
      [200, "allowed=false dryRun=true", {}],
    ]);
    expect(reports.map((d) => [d.allowed, d.dryRun, d.reason, d.retryAfterMs])).toEqual([
      [false, true, "limit", 18_000],
      [false, true, "limit", 18_000],
    ]);
  });

  it("dryRunHeaders: true: the headers enforcing would send, never Retry-After", async () => {
    const { app } = dryRunApp({ dryRunHeaders: true });
    const seen: [number, Record<string, string>][] = [];
    for (let i = 0; i < 3; i++) {
      const res = await get(app, { "x-key": "bob" });
      seen.push([res.status, limitHeaders(res)]);
    }
    expect(seen).toEqual([
      [200, twoPerMinute(1)],
      [200, twoPerMinute(0)],
      [200, twoPerMinute(0)],
    ]);
  });

  it("a dry-run tier beside an enforcing one", async () => {
    const app = new Hono();
    app.use(
      rateLimiter({
        tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: { limits: fixedWindow({ limit: 1, window: "1m" }), mode: "dry-run" } },
        store: new MemoryStore({ clock: () => T0 }),
        tier: (c) => c.req.header("x-plan") ?? "free",
        key: (c) => c.req.header("x-plan") ?? "free",
      }),
    );
    app.get("/", (c) => c.text("served"));
    const free = [await get(app), await get(app)];
    expect(free.map((r) => r.status)).toEqual([200, 429]);
    expect(limitHeaders(free[1]!)).toEqual({
      "ratelimit-policy": '"1-per-1m";q=1;w=60',
      ratelimit: '"1-per-1m";r=0;t=18',
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1700000040",
      "retry-after": "18",
    });
    const pro = [await get(app, { "x-plan": "pro" }), await get(app, { "x-plan": "pro" })];
    expect(await Promise.all(pro.map(async (r) => [r.status, await r.text(), limitHeaders(r)]))).toEqual([
      [200, "served", {}],
      [200, "served", {}],
    ]);
  });

  it("a shaping delay is not waited in dry run", async () => {
    vi.useFakeTimers({ now: T0 });
    try {
      const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 1 }), mode: "dry-run" });
      const app = new Hono();
      app.use(rateLimiter({ limiter, key: () => "k" }));
      app.get("/", (c) => c.text("served"));
      // with fake timers and no advance, a delayMs wait would never end
      expect((await get(app)).status).toBe(200);
      expect((await get(app)).status).toBe(200); // enforcing, this one would wait 100 ms
      expect((await get(app)).status).toBe(200);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("deny cache", () => {
  it("a cached denial answers the same 429 and headers without reaching the store", async () => {
    const memory = new MemoryStore({ clock: () => T0 });
    let consumes = 0;
    // a store that answers asynchronously, like Redis or a Durable Object
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
    const app = new Hono<{ Variables: { rateLimit: Decision | undefined } }>();
    app.use(rateLimiter({ limiter: new RateLimiter({ store: remote, limits: fixedWindow({ limit: 1, window: "1m" }), denyCache: { clock: () => 0 } }), key: () => "k" }));
    app.get("/", (c) => c.text("served"));
    expect((await get(app)).status).toBe(200);
    const denied = await get(app);
    const cached = await get(app);
    expect([denied.status, cached.status]).toEqual([429, 429]);
    expect(limitHeaders(cached)).toEqual(limitHeaders(denied));
    expect(limitHeaders(cached)).toMatchObject({ "retry-after": "18", ratelimit: '"1-per-1m";r=0;t=18' });
    expect(await cached.json()).toEqual(await denied.json());
    expect(consumes).toBe(2);
  });
});

describe("countWhen: only failed logins count", () => {
  it("a success is refunded after the handler; the 4th failure is the 429 before the handler runs", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 3, window: "5m", name: "login" }) });
    let handled = 0;
    const app = new Hono();
    app.use("/login", rateLimiter({ limiter, key: (c) => c.req.header("x-ip") ?? "?", countWhen: (_c, response) => response.status >= 400 }));
    app.post("/login", async (c) => {
      handled++;
      return (await c.req.text()) === "right" ? c.text("welcome") : c.text("wrong password", 401);
    });
    const attempt = async (password: string) => {
      const res = await app.request(new Request("http://localhost/login", { method: "POST", body: password, headers: { "x-ip": "203.0.113.7" } }));
      return [res.status, res.headers.get("ratelimit")];
    };
    const seen = [];
    for (const password of ["right", "wrong", "right", "wrong", "wrong", "wrong", "right"]) seen.push(await attempt(password));
    expect(seen).toEqual([
      [200, '"login";r=2;t=78'], // headers describe the decision before the refund
      [401, '"login";r=2;t=78'],
      [200, '"login";r=1;t=78'],
      [401, '"login";r=1;t=78'],
      [401, '"login";r=0;t=78'],
      [429, '"login";r=0;t=78'],
      [429, '"login";r=0;t=78'],
    ]);
    expect(handled).toBe(5);
    expect((await limiter.peek("203.0.113.7")).remaining).toBe(0);
  });
});

describe("penalty box through the middleware", () => {
  it("the denial that starts the block and the requests during it are 429s with Retry-After to its end", async () => {
    let now = T0;
    const limiter = new RateLimiter({
      store: new MemoryStore({ clock: () => now }),
      limits: fixedWindow({ limit: 2, window: "1m", name: "login", block: "15m" }),
    });
    const seen: [string | undefined, number][] = [];
    const app = new Hono<{ Variables: { rateLimit: Decision | undefined } }>();
    app.use(rateLimiter({ limiter, key: () => "203.0.113.7", onLimited: (c, decision) => (seen.push([decision.reason, decision.retryAfterMs]), c.text("blocked", 429)) }));
    app.get("/", (c) => c.text("ok"));
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(app)).status);
    expect(statuses).toEqual([200, 200, 429]);
    now += 60_000; // a new window, still blocked
    const res = await get(app);
    expect([res.status, limitHeaders(res)]).toEqual([
      429,
      {
        "ratelimit-policy": '"login";q=2;w=60',
        ratelimit: '"login";r=0;t=840',
        "retry-after": "840",
        "x-ratelimit-limit": "2",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(Math.ceil((T0 + 900_000) / 1000)),
      },
    ]);
    expect(seen).toEqual([
      ["blocked", 900_000],
      ["blocked", 840_000],
    ]);
    now = T0 + 900_000;
    expect((await get(app)).status).toBe(200);
  });
});
