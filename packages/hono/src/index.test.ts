import {
  type Decision,
  MemoryStore,
  RateLimiter,
  SluiceConfigError,
  fixedWindow,
  leakyBucket,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import { Hono } from "hono";
import type { Context, Env, MiddlewareHandler } from "hono";
import { afterEach, describe, expect, expectTypeOf, it, vi } from "vitest";
import { type HonoRateLimiterOptions, type RateLimitVariables, UNKNOWN_CLIENT_KEY, rateLimiter } from "./index.js";

/** A whole minute (and second) in epoch ms, so window arithmetic is easy to read. */
const T0 = 1_700_000_040_000;

/** A clock the test moves by hand. */
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

/** Every header that starts with `ratelimit`, `x-ratelimit` or is `retry-after`, as a plain object. */
function limitHeaders(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of res.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") out[name] = value;
  }
  return out;
}

const byKeyHeader = (c: { req: { header(name: string): string | undefined } }) => c.req.header("x-key") ?? "anonymous";

afterEach(() => {
  vi.useRealTimers();
});

describe("allowed and denied requests", () => {
  it("writes ietf + legacy headers by default and sets c.get('rateLimit')", async () => {
    const { store } = clock();
    const seen: Decision[] = [];
    const app = new Hono()
      .use(rateLimiter({ limiter: threePerMinute(store), key: byKeyHeader }))
      .get("/", (c) => {
        expectTypeOf(c.get("rateLimit")).toEqualTypeOf<Decision | undefined>();
        const decision = c.get("rateLimit");
        if (decision !== undefined) seen.push(decision);
        return c.json({ remaining: decision?.remaining });
      });

    const res = await app.request(new Request("http://localhost/", { headers: { "x-key": "a" } }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ remaining: 2 });
    expect(limitHeaders(res)).toEqual({
      "ratelimit-policy": '"3-per-1m";q=3;w=60',
      ratelimit: '"3-per-1m";r=2;t=60',
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "2",
      "x-ratelimit-reset": "1700000100",
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ allowed: true, now: T0, limit: 3, remaining: 2, resetAt: T0 + 60_000, policy: "3-per-1m", reason: "ok" });
  });

  it("answers the fourth request with the RFC 9457 429 and does not call the handler", async () => {
    const { state, store } = clock();
    const { app, calls } = appWith({ limiter: threePerMinute(store), key: byKeyHeader });
    for (let i = 0; i < 3; i++) expect((await get(app)).status).toBe(200);
    state.t = T0 + 15_000;
    const res = await get(app);
    expect(res.status).toBe(429);
    expect(calls).toEqual(["handler", "handler", "handler"]);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(limitHeaders(res)).toEqual({
      "ratelimit-policy": '"3-per-1m";q=3;w=60',
      ratelimit: '"3-per-1m";r=0;t=45',
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1700000100",
      "retry-after": "45",
    });
    expect(await res.text()).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",' +
        '"title":"Request cannot be satisfied as assigned quota has been exceeded",' +
        '"status":429,"detail":"Quota of policy \\"3-per-1m\\" exceeded; retry after 45 seconds.",' +
        '"retryAfter":45,"violated-policies":["3-per-1m"]}',
    );
    // other keys are not affected
    expect((await get(app, { "x-key": "b" })).status).toBe(200);
    // the next window lets the key in again
    state.t = T0 + 60_000;
    expect((await get(app)).status).toBe(200);
  });

  it("sets c.get('rateLimit') on a denial too, for outer middleware", async () => {
    const { store } = clock();
    const seen: (Decision | undefined)[] = [];
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(async (c, next) => {
      await next();
      seen.push(c.get("rateLimit"));
    });
    app.use(rateLimiter({ limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) }), key: () => "k" }));
    app.get("/", (c) => c.text("ok"));
    await app.request("/");
    await app.request("/");
    expect(seen.map((d) => [d?.allowed, d?.remaining, d?.reason])).toEqual([
      [true, 0, "ok"],
      [false, 0, "limit"],
    ]);
  });

  it("the returned middleware carries the rateLimit variable in its type: Decision | undefined", () => {
    const { store } = clock();
    const mw = rateLimiter({ limiter: threePerMinute(store), key: () => "k" });
    expectTypeOf(mw).toEqualTypeOf<MiddlewareHandler<Env & { Variables: RateLimitVariables }>>();
    new Hono().get("/", mw, (c) => {
      expectTypeOf(c.get("rateLimit")).toEqualTypeOf<Decision | undefined>();
      return c.text("ok");
    });
  });

  it("is generic over the app's Env: callbacks see a typed c.env, handlers a typed c.get('rateLimit')", async () => {
    type AppEnv = { Bindings: { PLAN: "free" | "pro"; LIMITED_BODY: string }; Variables: { user: string } };
    const { store } = clock();
    const mw = rateLimiter<AppEnv>({
      store,
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) },
      key: (c) => {
        expectTypeOf(c).toEqualTypeOf<Context<AppEnv>>();
        expectTypeOf(c.env.PLAN).toEqualTypeOf<"free" | "pro">();
        return c.req.header("x-key") ?? "anonymous";
      },
      tier: (c, key) => {
        expectTypeOf(key).toEqualTypeOf<string>();
        return c.env.PLAN;
      },
      cost: (c) => (c.env.PLAN === "pro" ? 1 : 1),
      skip: (c) => c.env.PLAN === undefined,
      onLimited: (c, decision) => {
        expectTypeOf(c.env.LIMITED_BODY).toEqualTypeOf<string>();
        expectTypeOf(decision).toEqualTypeOf<Decision>();
        return c.text(c.env.LIMITED_BODY, 429);
      },
    });
    expectTypeOf(mw).toEqualTypeOf<MiddlewareHandler<AppEnv & { Variables: RateLimitVariables }>>();
    const app = new Hono<AppEnv>().use(mw).get("/", (c) => {
      expectTypeOf(c.get("rateLimit")).toEqualTypeOf<Decision | undefined>();
      expectTypeOf(c.get("user")).toEqualTypeOf<string>();
      return c.text(`${c.get("rateLimit")?.remaining}`);
    });
    const env = { PLAN: "free", LIMITED_BODY: "free plan: slow down" } as const;
    const first = await app.request("/", {}, env);
    expect([first.status, await first.text()]).toEqual([200, "0"]);
    const second = await app.request("/", {}, env);
    expect([second.status, await second.text()]).toEqual([429, "free plan: slow down"]);
  });
});

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

describe("tiers", () => {
  function tieredApp(tierCacheTtlMs?: number) {
    const { store } = clock();
    const plans: Record<string, string> = { "key-free": "free", "key-pro": "pro", "key-odd": "platinum" };
    const lookups: string[] = [];
    const { app, calls } = appWith({
      store,
      tiers: {
        free: [fixedWindow({ limit: 2, window: "1m", name: "per-minute" })],
        pro: [fixedWindow({ limit: 5, window: "1m", name: "per-minute" })],
      },
      key: byKeyHeader,
      tier: async (c, key) => {
        lookups.push(`${c.req.path} ${key}`);
        return plans[key] ?? "free";
      },
      tierCacheTtlMs,
      headers: "ietf",
    });
    return { app, calls, lookups };
  }

  it("each key is limited by its tier's limits in its own namespace; the tier lookup is cached", async () => {
    const { app, lookups } = tieredApp();
    const free: number[] = [];
    const pro: number[] = [];
    for (let i = 0; i < 3; i++) free.push((await get(app, { "x-key": "key-free" })).status);
    for (let i = 0; i < 6; i++) pro.push((await get(app, { "x-key": "key-pro" })).status);
    expect(free).toEqual([200, 200, 429]);
    expect(pro).toEqual([200, 200, 200, 200, 200, 429]);
    const res = await get(app, { "x-key": "someone-else" });
    expect(limitHeaders(res)).toEqual({ "ratelimit-policy": '"per-minute";q=2;w=60', ratelimit: '"per-minute";r=1;t=60' });
    expect(lookups).toEqual(["/ key-free", "/ key-pro", "/ someone-else"]);
  });

  it("tierCacheTtlMs: 0 asks every time", async () => {
    const { app, lookups } = tieredApp(0);
    await get(app, { "x-key": "key-pro" });
    await get(app, { "x-key": "key-pro" });
    expect(lookups).toEqual(["/ key-pro", "/ key-pro"]);
  });

  it("an unknown tier name is a SluiceConfigError at the request that names it", async () => {
    const { app, calls } = tieredApp();
    const res = await get(app, { "x-key": "key-odd" });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: "SluiceConfigError",
      message: '[sluice] [hono] tier must return a configured tier (free, pro); got "platinum"',
    });
    expect(calls).toEqual([]);
  });
});

describe("trust: keying by client address", () => {
  function ipApp(options: Partial<HonoRateLimiterOptions>) {
    const { store } = clock();
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    const app = new Hono();
    app.use(rateLimiter({ limiter, headers: false, ...options } as HonoRateLimiterOptions));
    app.get("/", (c) => c.text("ok"));
    return { app, limiter };
  }

  it('"cloudflare" keys by CF-Connecting-IP and ignores X-Forwarded-For', async () => {
    const { app, limiter } = ipApp({ trust: "cloudflare" });
    expect((await get(app, { "cf-connecting-ip": "203.0.113.7", "x-forwarded-for": "198.51.100.1" })).status).toBe(200);
    expect((await get(app, { "cf-connecting-ip": "203.0.113.7", "x-forwarded-for": "198.51.100.2" })).status).toBe(429);
    expect((await get(app, { "cf-connecting-ip": "203.0.113.8" })).status).toBe(200);
    expect((await limiter.peek("203.0.113.7")).remaining).toBe(0);
    expect((await limiter.peek("203.0.113.8")).remaining).toBe(0);
    expect((await limiter.peek("198.51.100.1")).remaining).toBe(1);
  });

  it("a number N keys by the N-th address from the right of X-Forwarded-For", async () => {
    const { app, limiter } = ipApp({ trust: 2 });
    expect((await get(app, { "x-forwarded-for": "10.0.0.1, 198.51.100.9, 10.0.0.2" })).status).toBe(200);
    expect((await limiter.peek("198.51.100.9")).remaining).toBe(0);
    // a spoofed leftmost entry does not change the key
    expect((await get(app, { "x-forwarded-for": "1.2.3.4, 198.51.100.9, 10.0.0.2" })).status).toBe(429);
  });

  it('"vercel" keys by x-vercel-forwarded-for', async () => {
    const { app, limiter } = ipApp({ trust: "vercel" });
    await get(app, { "x-vercel-forwarded-for": "192.0.2.4" });
    expect((await limiter.peek("192.0.2.4")).remaining).toBe(0);
  });

  it("IPv6 clients share a quota per /64 by default, or per ipv6Subnet", async () => {
    const a = ipApp({ trust: "cloudflare" });
    expect((await get(a.app, { "cf-connecting-ip": "2001:db8:1:2::1" })).status).toBe(200);
    expect((await get(a.app, { "cf-connecting-ip": "2001:db8:1:2:ffff::9" })).status).toBe(429);
    expect((await a.limiter.peek("2001:db8:1:2::/64")).remaining).toBe(0);

    const b = ipApp({ trust: "cloudflare", ipv6Subnet: 128 });
    expect((await get(b.app, { "cf-connecting-ip": "2001:db8:1:2::1" })).status).toBe(200);
    expect((await get(b.app, { "cf-connecting-ip": "2001:db8:1:2::2" })).status).toBe(200);
    expect((await b.limiter.peek("2001:db8:1:2::1/128")).remaining).toBe(0);
  });

  it(`requests without a trusted address share the key "${UNKNOWN_CLIENT_KEY}"`, async () => {
    const { app, limiter } = ipApp({ trust: "cloudflare" });
    expect((await get(app)).status).toBe(200);
    expect((await get(app, { "cf-connecting-ip": "not-an-ip", "x-forwarded-for": "198.51.100.1" })).status).toBe(429);
    expect((await limiter.peek("unknown")).remaining).toBe(0);
  });
});

describe("shaping: delayMs", () => {
  it("waits delayMs before calling the handler", async () => {
    vi.useFakeTimers({ now: 0 });
    const { store } = clock();
    // 10 per second, burst 1, queue 2: at one instant the 2nd and 3rd requests wait 100 and 200 ms
    const limiter = new RateLimiter({ store, limits: leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 2 }) });
    const ranAt: number[] = [];
    const seen: Decision[] = [];
    const app = new Hono()
      .use(rateLimiter({ limiter, key: () => "k", headers: "draft-6" }))
      .get("/", (c) => {
        ranAt.push(Date.now());
        seen.push(c.get("rateLimit") as Decision);
        return c.text("ok");
      });

    expect((await app.request("/")).status).toBe(200);
    expect(ranAt).toEqual([0]);

    const second = app.request("/");
    const third = app.request("/");
    await vi.advanceTimersByTimeAsync(99);
    expect(ranAt).toEqual([0]);
    expect(vi.getTimerCount()).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(ranAt).toEqual([0, 100]);
    await vi.advanceTimersByTimeAsync(99);
    expect(ranAt).toEqual([0, 100]);
    await vi.advanceTimersByTimeAsync(1);
    expect(ranAt).toEqual([0, 100, 200]);
    expect((await second).status).toBe(200);
    expect((await third).status).toBe(200);
    expect(seen.map((d) => d.delayMs)).toEqual([0, 100, 200]);

    // the fourth is beyond the queue: denied at once, no timer
    const fourth = await app.request("/");
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get("retry-after")).toBe("1");
    expect(vi.getTimerCount()).toBe(0);
    expect(ranAt).toHaveLength(3);
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

describe("decision.pending on Workers", () => {
  /** A limiter whose decisions carry background work, as analytics would. */
  class PendingLimiter extends RateLimiter {
    readonly pendings: Promise<void>[] = [];
    override async limit(key: string, options?: { cost?: number }): Promise<Decision> {
      const decision = await super.limit(key, options);
      const pending = new Promise<void>((resolve) => setTimeout(resolve, 1));
      this.pendings.push(pending);
      return { ...decision, pending };
    }
  }

  it("is handed to c.executionCtx.waitUntil, allowed or denied", async () => {
    const { store } = clock();
    const limiter = new PendingLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    const app = new Hono().use(rateLimiter({ limiter, key: () => "k" })).get("/", (c) => c.text("ok"));
    const waited: Promise<unknown>[] = [];
    const executionCtx = {
      waitUntil: (promise: Promise<unknown>) => {
        waited.push(promise);
      },
      passThroughOnException: () => {},
      props: {},
    };
    const statuses = [];
    for (let i = 0; i < 2; i++) statuses.push((await app.fetch(new Request("http://localhost/"), {}, executionCtx)).status);
    expect(statuses).toEqual([200, 429]);
    expect(waited).toHaveLength(2);
    expect(waited[0]).toBe(limiter.pendings[0]);
    expect(waited[1]).toBe(limiter.pendings[1]);
  });

  it("without an ExecutionContext (Node.js, app.request()) it is left to run and the request is answered", async () => {
    const { store } = clock();
    const limiter = new PendingLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    const app = new Hono().use(rateLimiter({ limiter, key: () => "k" })).get("/", (c) => c.text("ok"));
    expect((await app.request("/")).status).toBe(200);
    expect(limiter.pendings).toHaveLength(1);
    await limiter.pendings[0];
  });
});

describe("configuration errors are thrown by rateLimiter(), not at the first request", () => {
  const { store } = clock();
  const limiter = threePerMinute(store);
  // [label, options, message, option]: every option of rateLimiter(), with its path; the tag is hono's
  const free = fixedWindow({ limit: 1, window: "1m" });
  const cases: [string, unknown, RegExp, string][] = [
    ["no options", undefined, /^\[sluice\] \[hono\] options must be an object with limiter \(or tiers\) and key \(or trust\); got undefined$/, "options"],
    ["neither key nor trust", { limiter }, /^\[sluice\] \[hono\] key must be a function \(c\) => string, or give trust .*got undefined$/, "key"],
    ["key that is not a function", { limiter, key: "x-api-key" }, /^\[sluice\] \[hono\] key must be a function .*got "x-api-key"$/, "key"],
    ["key and trust", { limiter, key: () => "k", trust: 1 }, /^\[sluice\] \[hono\] trust must be left out when key is given/, "trust"],
    ["bad trust", { limiter, trust: "x-forwarded-for" }, /^\[sluice\] \[hono\] trust must be "cloudflare", "vercel" or a positive integer/, "trust"],
    ["trust 0", { limiter, trust: 0 }, /^\[sluice\] \[hono\] trust must be/, "trust"],
    ["bad ipv6Subnet", { limiter, trust: "cloudflare", ipv6Subnet: 129 }, /^\[sluice\] \[hono\] ipv6Subnet must be an integer from 1 to 128; got 129$/, "ipv6Subnet"],
    ["ipv6Subnet without trust", { limiter, key: () => "k", ipv6Subnet: 56 }, /^\[sluice\] \[hono\] ipv6Subnet must be left out without trust/, "ipv6Subnet"],
    ["no limiter or tiers", { key: () => "k" }, /^\[sluice\] \[hono\] limiter must be a RateLimiter \(or give tiers\); got undefined$/, "limiter"],
    ["limiter and tiers", { limiter, tiers: { free }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers must be left out when limiter is given/, "tiers"],
    ["cost 0", { limiter, key: () => "k", cost: 0 }, /^\[sluice\] \[hono\] cost must be a positive safe integer or a function; got 0$/, "cost"],
    ["cost 1.5", { limiter, key: () => "k", cost: 1.5 }, /cost must be/, "cost"],
    ["skip not a function", { limiter, key: () => "k", skip: true }, /^\[sluice\] \[hono\] skip must be a function; got true$/, "skip"],
    ["onLimited not a function", { limiter, key: () => "k", onLimited: 429 }, /^\[sluice\] \[hono\] onLimited must be a function; got 429$/, "onLimited"],
    ["onDecision not a function", { limiter, key: () => "k", onDecision: "log" }, /^\[sluice\] \[hono\] onDecision must be a function/, "onDecision"],
    ["countWhen not a function", { limiter, key: () => "k", countWhen: 400 }, /^\[sluice\] \[hono\] countWhen must be a function/, "countWhen"],
    ["onCallbackError not a function", { limiter, key: () => "k", onCallbackError: {} }, /^\[sluice\] \[hono\] onCallbackError must be a function/, "onCallbackError"],
    ["ietf with draft-7", { limiter, key: () => "k", headers: ["ietf", "draft-7"] }, /"ietf" and "draft-7", which both write/, "headers"],
    ["unknown header style", { limiter, key: () => "k", headers: "draft-8" }, /^\[sluice\] \[hono\] headers must be/, "headers"],
    ["partitionKey", { limiter, key: () => "k", partitionKey: "yes" }, /^\[sluice\] \[hono\] partitionKey must be/, "partitionKey"],
    ["dryRunHeaders", { limiter, key: () => "k", dryRunHeaders: "yes" }, /^\[sluice\] \[hono\] dryRunHeaders must be true or false/, "dryRunHeaders"],
    ["tiers without tier", { tiers: { free }, key: () => "k" }, /^\[sluice\] \[hono\] tier must be a function/, "tier"],
    ["empty tiers", { tiers: {}, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers must be an object/, "tiers"],
    ["a tier's policy", { tiers: { free: [free, "x"] }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers\.free\[1\] must be a policy/, "tiers.free[1]"],
    ["a tier's mode", { tiers: { free: { limits: free, mode: "off" } }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers\.free\.mode must be/, "tiers.free.mode"],
    ["negative tierCacheTtlMs", { tiers: { free }, tier: () => "free", key: () => "k", tierCacheTtlMs: -1 }, /^\[sluice\] \[hono\] tierCacheTtlMs must be/, "tierCacheTtlMs"],
    ["zero tierCacheMaxKeys", { tiers: { free }, tier: () => "free", key: () => "k", tierCacheMaxKeys: 0 }, /^\[sluice\] \[hono\] tierCacheMaxKeys must be/, "tierCacheMaxKeys"],
    ["a tiered prefix", { tiers: { free }, tier: () => "free", key: () => "k", prefix: "a b" }, /^\[sluice\] \[hono\] prefix must be/, "prefix"],
    ["a tiered store", { tiers: { free }, tier: () => "free", key: () => "k", store: {} }, /^\[sluice\] \[hono\] store must be a Store/, "store"],
    ["a tiered mode", { tiers: { free }, tier: () => "free", key: () => "k", mode: "shadow" }, /^\[sluice\] \[hono\] mode must be/, "mode"],
    ["a tiered denyCache", { tiers: { free }, tier: () => "free", key: () => "k", denyCache: { maxKeys: -1 } }, /^\[sluice\] \[hono\] denyCache\.maxKeys must be/, "denyCache.maxKeys"],
    ["a tiered onStoreError", { tiers: { free }, tier: () => "free", key: () => "k", onStoreError: "open" }, /^\[sluice\] \[hono\] onStoreError must be/, "onStoreError"],
    ["a tiered onStoreFailure", { tiers: { free }, tier: () => "free", key: () => "k", onStoreFailure: 1 }, /^\[sluice\] \[hono\] onStoreFailure must be a function/, "onStoreFailure"],
    ["a tiered timeoutMs", { tiers: { free }, tier: () => "free", key: () => "k", timeoutMs: 0 }, /^\[sluice\] \[hono\] timeoutMs must be/, "timeoutMs"],
  ];

  it.each(cases)("%s", (_name, options, message, option) => {
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(SluiceConfigError);
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(message);
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("a valid configuration does not throw", () => {
    expect(() => rateLimiter({ limiter, trust: "cloudflare" })).not.toThrow();
    expect(() => rateLimiter({ limiter: new RateLimiter({ limits: slidingWindow({ limit: 1, window: "1s" }) }), key: () => "k" })).not.toThrow();
  });
});
