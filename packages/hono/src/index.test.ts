/**
 * The Hono middleware's main promise: an allowed request gets the rate-limit headers and
 * `c.get("rateLimit")`; a denied one gets the RFC 9457 429 without reaching the handler; and the
 * returned middleware carries the `rateLimit` variable in its type, over the app's own `Env`.
 * Headers, callbacks, keys, timing and configuration errors have test files of their own.
 */
import { type Decision, MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { rateLimitHeadersOf as limitHeaders } from "@sluice/testing/headers";
import { Hono } from "hono";
import type { Context, Env, MiddlewareHandler } from "hono";
import { describe, expect, expectTypeOf, it } from "vitest";
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

const byKeyHeader = (c: { req: { header(name: string): string | undefined } }) => c.req.header("x-key") ?? "anonymous";

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
