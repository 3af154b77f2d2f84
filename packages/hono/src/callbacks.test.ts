/**
 * The middleware's callbacks, request in, response out: `skip` lets a request through untouched,
 * `cost` (a number or a function of `c`) sets what it consumes, `onLimited` replaces the 429 — and
 * every callback takes Hono's `c` first, then what Sluice adds.
 */
import { MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { rateLimitHeadersOf as limitHeaders } from "@sluice/testing/headers";
import { Hono } from "hono";
import type { Context } from "hono";
import { describe, expect, it } from "vitest";
import { type HonoRateLimiterOptions, type RateLimitVariables, rateLimiter } from "./index.js";

/** A whole minute (and second) in epoch ms, so window arithmetic is easy to read. */
const T0 = 1_700_000_040_000;

/** A memory store on a clock the test moves by hand. */
function clock(start = T0) {
  const state = { t: start };
  return { state, store: new MemoryStore({ clock: () => state.t }) };
}

function threePerMinute(store: MemoryStore) {
  return new RateLimiter({ store, limits: fixedWindow({ limit: 3, window: "1m" }) });
}

/** An app with the middleware on `/*` and a handler that counts its calls. */
function appWith(options: HonoRateLimiterOptions) {
  const calls: string[] = [];
  const app = new Hono();
  app.onError((error, c) => c.json({ error: error.name, message: error.message }, 500));
  app.use(rateLimiter(options));
  app.get("/", (c) => {
    calls.push("handler");
    return c.json({ ok: true });
  });
  return { app, calls };
}

const get = (app: Hono, headers: Record<string, string> = {}, path = "/") =>
  app.request(new Request(`http://localhost${path}`, { headers }));

describe("skip", () => {
  it("skipped requests are not limited, get no headers and no c.get('rateLimit')", async () => {
    const { store } = clock();
    const seen: unknown[] = [];
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(
      rateLimiter({
        limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) }),
        key: () => "k",
        skip: async (c) => c.req.header("x-internal") === "yes",
      }),
    );
    app.get("/", (c) => {
      seen.push(c.get("rateLimit"));
      return c.text("ok");
    });
    for (let i = 0; i < 5; i++) {
      const res = await app.request("/", { headers: { "x-internal": "yes" } });
      expect(res.status).toBe(200);
      expect(limitHeaders(res)).toEqual({});
    }
    expect(seen).toEqual([undefined, undefined, undefined, undefined, undefined]);
    // nothing was consumed: the first limited request still passes, the second does not
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/")).status).toBe(429);
  });
});

describe("cost", () => {
  it("a number: every request consumes that many units", async () => {
    const { store } = clock();
    const { app, calls } = appWith({ limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1m" }) }), key: () => "k", cost: 2, headers: "draft-6" });
    expect((await get(app)).headers.get("ratelimit-remaining")).toBe("3");
    expect((await get(app)).headers.get("ratelimit-remaining")).toBe("1");
    const denied = await get(app);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-remaining")).toBe("1");
    expect(calls).toHaveLength(2);
  });

  it("a function of the context; a cost above the limit is never allowed", async () => {
    const { store } = clock();
    const { app } = appWith({
      limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1m" }) }),
      key: () => "k",
      cost: async (c) => Number(c.req.header("x-cost") ?? "1"),
      headers: "draft-6",
    });
    expect((await get(app, { "x-cost": "4" })).headers.get("ratelimit-remaining")).toBe("1");
    expect((await get(app)).headers.get("ratelimit-remaining")).toBe("0");
    const never = await get(app, { "x-cost": "6" });
    expect(never.status).toBe(429);
    expect(never.headers.get("retry-after")).toBeNull();
    expect(await never.json()).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: 'The request\'s cost exceeds the quota of policy "5-per-1m" and can never be allowed.',
      retryAfter: null,
      "violated-policies": ["5-per-1m"],
    });
  });

  it("a bad cost from the function is a SluiceInputError (500 through onError) that consumes nothing", async () => {
    const { store } = clock();
    const { app, calls } = appWith({ limiter: threePerMinute(store), key: () => "k", cost: () => 0, headers: "draft-6" });
    const res = await get(app);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "SluiceInputError", message: "[sluice] cost must be a positive safe integer; got 0" });
    expect(calls).toEqual([]);
  });
});

describe("onLimited", () => {
  it("receives (c, decision), replaces the 429 and gets the rate-limit headers", async () => {
    const { state, store } = clock();
    const args: [string, boolean, number][] = [];
    const { app, calls } = appWith({
      limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) }),
      key: () => "k",
      headers: "draft-6",
      onLimited: (c, decision) => {
        args.push([c.req.path, decision.allowed, decision.retryAfterMs]);
        return c.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, 503);
      },
    });
    await get(app);
    state.t = T0 + 1_500;
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "slow down", retryAfterMs: 58_500 });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(limitHeaders(res)).toEqual({ "ratelimit-limit": "1", "ratelimit-remaining": "0", "ratelimit-reset": "59", "retry-after": "59" });
    expect(args).toEqual([["/", false, 58_500]]);
    expect(calls).toEqual(["handler"]);
  });

  it("headers the custom response already has are kept", async () => {
    const { store } = clock();
    const { app } = appWith({
      limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) }),
      key: () => "k",
      headers: false,
      onLimited: () => new Response("no", { status: 429, headers: { "Retry-After": "3600" } }),
    });
    await get(app);
    const res = await get(app);
    expect(await res.text()).toBe("no");
    expect(res.headers.get("retry-after")).toBe("3600");
  });
});

describe("the callback convention: c first, then what Sluice adds", () => {
  it("key, skip and cost get (c); tier gets (c, key); onLimited gets (c, decision)", async () => {
    const { store } = clock();
    const calls: [string, unknown[]][] = [];
    const contexts: Context[] = [];
    const app = new Hono();
    app.use(async (c, next) => {
      contexts.push(c);
      await next();
    });
    app.use(
      rateLimiter({
        store,
        tiers: { free: fixedWindow({ limit: 1, window: "1m" }) },
        key: (...args) => {
          calls.push(["key", args]);
          return "k";
        },
        skip: (...args) => {
          calls.push(["skip", args]);
          return false;
        },
        cost: (...args) => {
          calls.push(["cost", args]);
          return 1;
        },
        tier: (...args) => {
          calls.push(["tier", args]);
          return "free";
        },
        onLimited: (...args) => {
          calls.push(["onLimited", args]);
          return args[0].text("limited", 429);
        },
      }),
    );
    app.get("/", (c) => c.text("ok"));
    await app.request("/");
    const denied = await app.request("/");
    expect(await denied.text()).toBe("limited");
    const [first, second] = contexts;
    expect(calls.map(([name]) => name)).toEqual(["skip", "key", "tier", "cost", "skip", "key", "cost", "onLimited"]);
    expect(calls.slice(0, 4)).toEqual([
      ["skip", [first]],
      ["key", [first]],
      ["tier", [first, "k"]],
      ["cost", [first]],
    ]);
    expect(calls[7]?.[1]).toHaveLength(2);
    expect(calls[7]?.[1][0]).toBe(second);
    expect(calls[7]?.[1][1]).toMatchObject({ allowed: false, reason: "limit" });
  });
});
