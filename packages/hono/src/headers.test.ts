/**
 * The rate-limit headers through the Hono middleware: each style (`"ietf"`, `"draft-7"`,
 * `"draft-6"`, `"legacy"`, a list, none), one IETF list member per policy, and the headers on the
 * response the client finally gets — whatever the handler, Hono's 404 or the error handler
 * returned, and beside what the handler or earlier middleware set.
 */
import { MemoryStore, RateLimiter, fixedWindow, tokenBucket } from "@sluice/core";
import { rateLimitHeadersOf as limitHeaders } from "@sluice/testing/headers";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { type HonoRateLimiterOptions, rateLimiter } from "./index.js";

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

describe("header styles", () => {
  const cases: [HonoRateLimiterOptions["headers"], Record<string, string>, Record<string, string>][] = [
    [
      "ietf",
      { "ratelimit-policy": '"3-per-1m";q=3;w=60', ratelimit: '"3-per-1m";r=2;t=60' },
      { "ratelimit-policy": '"3-per-1m";q=3;w=60', ratelimit: '"3-per-1m";r=0;t=50', "retry-after": "50" },
    ],
    [
      "draft-7",
      { ratelimit: "limit=3, remaining=2, reset=60", "ratelimit-policy": "3;w=60" },
      { ratelimit: "limit=3, remaining=0, reset=50", "ratelimit-policy": "3;w=60", "retry-after": "50" },
    ],
    [
      "draft-6",
      { "ratelimit-limit": "3", "ratelimit-remaining": "2", "ratelimit-reset": "60" },
      { "ratelimit-limit": "3", "ratelimit-remaining": "0", "ratelimit-reset": "50", "retry-after": "50" },
    ],
    [
      "legacy",
      { "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2", "x-ratelimit-reset": "1700000100" },
      { "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000100", "retry-after": "50" },
    ],
    [
      ["draft-6", "legacy"],
      {
        "ratelimit-limit": "3",
        "ratelimit-remaining": "2",
        "ratelimit-reset": "60",
        "x-ratelimit-limit": "3",
        "x-ratelimit-remaining": "2",
        "x-ratelimit-reset": "1700000100",
      },
      {
        "ratelimit-limit": "3",
        "ratelimit-remaining": "0",
        "ratelimit-reset": "50",
        "x-ratelimit-limit": "3",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": "1700000100",
        "retry-after": "50",
      },
    ],
    [false, {}, { "retry-after": "50" }],
  ];

  it.each(cases)("headers: %j", async (headers, allowed, denied) => {
    const { state, store } = clock();
    const { app } = appWith({ limiter: threePerMinute(store), key: () => "k", headers });
    expect(limitHeaders(await get(app))).toEqual(allowed);
    await get(app);
    await get(app);
    state.t = T0 + 10_000;
    const res = await get(app);
    expect(res.status).toBe(429);
    expect(limitHeaders(res)).toEqual(denied);
  });

  it("writes one ietf list member per policy", async () => {
    const { store } = clock();
    const limiter = new RateLimiter({
      store,
      limits: [tokenBucket({ capacity: 10, refillRate: 30, interval: "1m", name: "burst" }), fixedWindow({ limit: 1000, window: "1d", name: "per-day" })],
    });
    const { app } = appWith({ limiter, key: () => "k", headers: "ietf" });
    const res = await get(app);
    // T0 is 80_040 s into its UTC day: the day window ends 6_360 s later
    expect(limitHeaders(res)).toEqual({
      "ratelimit-policy": '"burst";q=10;w=20, "per-day";q=1000;w=86400',
      ratelimit: '"burst";r=9;t=2, "per-day";r=999;t=6360',
    });
  });
});

describe("headers end up on the final response", () => {
  it("when the handler returns a new Response", async () => {
    const { store } = clock();
    const app = new Hono();
    app.use(rateLimiter({ limiter: threePerMinute(store), key: () => "k", headers: "draft-6" }));
    app.get("/", () => new Response("plain", { headers: { "x-handler": "yes" } }));
    const res = await app.request("/");
    expect(await res.text()).toBe("plain");
    expect(res.headers.get("x-handler")).toBe("yes");
    expect(limitHeaders(res)).toEqual({ "ratelimit-limit": "3", "ratelimit-remaining": "2", "ratelimit-reset": "60" });
  });

  it("when the handler returns a response with immutable headers", async () => {
    const { store } = clock();
    const app = new Hono();
    app.use(rateLimiter({ limiter: threePerMinute(store), key: () => "k", headers: "draft-6" }));
    app.get("/", () => Response.redirect("http://localhost/elsewhere", 302));
    const res = await app.request("/");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("http://localhost/elsewhere");
    expect(res.headers.get("ratelimit-remaining")).toBe("2");
  });

  it("on Hono's 404 and on the error handler's response", async () => {
    const { store } = clock();
    const app = new Hono();
    app.onError((_error, c) => c.text("boom", 500));
    app.use(rateLimiter({ limiter: threePerMinute(store), key: () => "k", headers: "draft-6" }));
    app.get("/throws", () => {
      throw new Error("boom");
    });
    const missing = await app.request("/missing");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("ratelimit-remaining")).toBe("2");
    const failed = await app.request("/throws");
    expect(failed.status).toBe(500);
    expect(failed.headers.get("ratelimit-remaining")).toBe("1");
  });

  it("leaves headers the handler (or an inner limiter) set", async () => {
    const { store } = clock();
    const app = new Hono();
    app.use(rateLimiter({ limiter: threePerMinute(store), key: () => "k", headers: "draft-6" }));
    app.use(
      "/inner",
      rateLimiter({ limiter: new RateLimiter({ store, prefix: "inner", limits: fixedWindow({ limit: 10, window: "1m" }) }), key: () => "k", headers: "draft-6" }),
    );
    app.get("/", (c) => {
      c.header("RateLimit-Limit", "from-handler");
      return c.text("ok");
    });
    app.get("/inner", (c) => c.text("ok"));
    const own = await app.request("/");
    expect(limitHeaders(own)).toEqual({ "ratelimit-limit": "from-handler", "ratelimit-remaining": "2", "ratelimit-reset": "60" });
    const inner = await app.request("/inner");
    expect(limitHeaders(inner)).toEqual({ "ratelimit-limit": "10", "ratelimit-remaining": "9", "ratelimit-reset": "60" });
  });

  it("when the handler returns a new Response built from c.res.headers: each header once", async () => {
    const { store } = clock();
    const app = new Hono();
    app.use(rateLimiter({ limiter: threePerMinute(store), key: () => "k" }));
    app.get("/", (c) => new Response("copied", { headers: new Headers(c.res.headers) }));
    const res = await app.request("/");
    expect(await res.text()).toBe("copied");
    expect(limitHeaders(res)).toEqual({
      "ratelimit-policy": '"3-per-1m";q=3;w=60',
      ratelimit: '"3-per-1m";r=2;t=60',
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "2",
      "x-ratelimit-reset": String(T0 / 1000 + 60),
    });
  });

  it("keeps headers earlier middleware set on c.res on the 429", async () => {
    const { store } = clock();
    const app = new Hono();
    app.use(async (c, next) => {
      c.res.headers.set("x-request-id", "r1");
      await next();
    });
    app.use(rateLimiter({ limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) }), key: () => "k", headers: false }));
    app.get("/", (c) => c.text("ok"));
    await app.request("/");
    const res = await app.request("/");
    expect(res.status).toBe(429);
    expect(res.headers.get("x-request-id")).toBe("r1");
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(res.headers.get("retry-after")).toBe("60");
  });
});
