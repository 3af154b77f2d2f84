/**
 * Who shares a quota through the Hono middleware: tiers (each key limited by its tier's limits in
 * its own namespace, the tier lookup cached) and `trust` (keying by the client's address as the
 * named platform reports it, IPv6 by prefix, one shared key for requests without an address).
 */
import { MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { rateLimitHeadersOf as limitHeaders } from "@sluice/testing/headers";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { type HonoRateLimiterOptions, UNKNOWN_CLIENT_KEY, rateLimiter } from "./index.js";

/** A whole minute (and second) in epoch ms, so window arithmetic is easy to read. */
const T0 = 1_700_000_040_000;

/** A memory store on a clock the test moves by hand. */
function clock(start = T0) {
  const state = { t: start };
  return { state, store: new MemoryStore({ clock: () => state.t }) };
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
