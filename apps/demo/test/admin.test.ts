/**
 * The admin routes over real HTTP: `createApp()` with an injected clock and a known admin key,
 * served by `@hono/node-server` on a free port (as `main.ts` serves it), driven with `fetch`.
 * Overrides and manual blocks as the API's callers then see them: `q`/`r` in the headers, the
 * override in the JSON, `ttl` and block ends on the exact millisecond, 401s and 400s that name the
 * field (and change nothing).
 */
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../src/app.js";

/** A whole minute in epoch ms, 80_040 s into its UTC day. */
const T0 = 1_700_000_040_000;
const ADMIN_KEY = "test-admin-key_0123456789";
const FREE = "key:free-demo-key";
const FREE_POLICY = '"burst";q=10;w=20, "per-minute";q=30;w=60, "per-day";q=1000;w=86400';
const FREE_TIMES_TEN = '"burst";q=100;w=20, "per-minute";q=300;w=60, "per-day";q=10000;w=86400';

const servers: ServerType[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
});

/** The demo app on 127.0.0.1:<free port>, on the clock `state.t`. */
async function start() {
  const state = { t: T0 };
  const app = createApp({ clock: () => state.t, adminKey: ADMIN_KEY });
  const base = await new Promise<string>((resolve) => {
    servers.push(serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`)));
  });
  /** `authorization` null: no Authorization header. */
  const post = (path: string, body: unknown, authorization: string | null = `Bearer ${ADMIN_KEY}`) =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization === null ? {} : { authorization }) },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const get = (path: string, apiKey?: string) => fetch(`${base}${path}`, { headers: apiKey === undefined ? {} : { "x-api-key": apiKey } });
  const statusOf = async (res: Promise<Response>) => {
    const r = await res;
    await r.arrayBuffer();
    return r.status;
  };
  const who = async (apiKey?: string) => {
    const res = await get("/api/whoami", apiKey);
    expect(res.status).toBe(200);
    return { policy: res.headers.get("ratelimit-policy"), ratelimit: res.headers.get("ratelimit"), body: (await res.json()) as Record<string, unknown> };
  };
  return { state, base, post, get, statusOf, who };
}

describe("POST /admin/overrides", () => {
  it("{ scale: 10 }: ten times the plan's quotas in the answer, the headers (q, r) and the decision's override; cleared, the plan's own", async () => {
    const { post, get, who } = await start();
    const set = await post("/admin/overrides", { key: FREE, override: { scale: 10 } });
    expect(set.status).toBe(200);
    expect(set.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await set.json()).toEqual({ key: FREE, tier: "free", override: { scale: 10 }, expiresAt: null, quotas: { burst: 100, "per-minute": 300, "per-day": 10000 } });

    const first = await get("/api/quote", "free-demo-key");
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-policy")).toBe(FREE_TIMES_TEN);
    // the bucket's next token in 0.2 s (ten times the rate); the minute's unit weighs 1 until the
    // next window ends (120 s); the day's window ends in 6360 s
    expect(first.headers.get("ratelimit")).toBe('"burst";r=99;t=1, "per-minute";r=299;t=120, "per-day";r=9999;t=6360');
    expect(first.headers.get("x-ratelimit-limit")).toBe("100");
    expect(await first.json()).toMatchObject({ remaining: 99, override: { scale: 10 } });

    // a hundred in a row (the plan's burst is ten), the 101st is the 429 of the scaled bucket
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await get("/api/quote", "free-demo-key");
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([...Array(99).fill(200), 429]);
    const whoami = await who("free-demo-key");
    expect(whoami.policy).toBe(FREE_TIMES_TEN);
    expect(whoami.body).toMatchObject({ override: { scale: 10 }, rateLimit: { limit: 100, remaining: 0, reason: "limit" } });

    const clear = await post("/admin/overrides", { key: FREE, override: null });
    expect(clear.status).toBe(200);
    expect(await clear.json()).toEqual({ key: FREE, tier: "free", override: null, expiresAt: null, quotas: { burst: 10, "per-minute": 30, "per-day": 1000 } });
    // the plan's quotas again, over the same counts: the 100 spent just now leave nothing of the
    // burst or the minute, and 900 of the day
    const after = await who("free-demo-key");
    expect(after.policy).toBe(FREE_POLICY);
    expect(after.body).toMatchObject({
      override: null,
      rateLimit: { reason: "limit", policies: { burst: { limit: 10, remaining: 0 }, "per-minute": { limit: 30, remaining: 0 }, "per-day": { limit: 1000, remaining: 900 } } },
    });
    const denied = await get("/api/quote", "free-demo-key");
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-policy")).toBe(FREE_POLICY);
    await denied.arrayBuffer();
  });

  it("ttl: in force until the exact millisecond it ends, then the plan's quotas", async () => {
    const { state, post, who } = await start();
    const set = await post("/admin/overrides", { key: FREE, override: { scale: 10 }, ttl: "1h" });
    expect(await set.json()).toEqual({
      key: FREE,
      tier: "free",
      override: { scale: 10 },
      expiresAt: new Date(T0 + 3_600_000).toISOString(),
      quotas: { burst: 100, "per-minute": 300, "per-day": 10000 },
    });
    state.t = T0 + 3_600_000 - 1;
    expect(await who("free-demo-key")).toMatchObject({ policy: FREE_TIMES_TEN, body: { override: { scale: 10 } } });
    state.t = T0 + 3_600_000;
    expect(await who("free-demo-key")).toMatchObject({ policy: FREE_POLICY, body: { override: null, rateLimit: { limit: 10, remaining: 10 } } });
  });

  it("{ quotas } sets the named policy's quota only; { unlimited: true } lets everything through and counts nothing", async () => {
    const { post, get, statusOf, who } = await start();
    expect(await (await post("/admin/overrides", { key: FREE, override: { quotas: { "per-minute": 5 } } })).json()).toEqual({
      key: FREE,
      tier: "free",
      override: { quotas: { "per-minute": 5 } },
      expiresAt: null,
      quotas: { burst: 10, "per-minute": 5, "per-day": 1000 },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await statusOf(get("/api/quote", "free-demo-key")));
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await who("free-demo-key")).policy).toBe('"burst";q=10;w=20, "per-minute";q=5;w=60, "per-day";q=1000;w=86400');

    const pro = "key:pro-demo-key";
    expect(await (await post("/admin/overrides", { key: pro, override: { unlimited: true } })).json()).toEqual({
      key: pro,
      tier: "pro",
      override: { unlimited: true },
      expiresAt: null,
      quotas: null,
    });
    // the pro burst is 50: 80 in a row pass
    const passed: number[] = [];
    for (let i = 0; i < 80; i++) passed.push(await statusOf(get("/api/quote", "pro-demo-key")));
    expect(passed).toEqual(Array(80).fill(200));
    expect((await who("pro-demo-key")).body).toMatchObject({ override: { unlimited: true } });
    await post("/admin/overrides", { key: pro, override: null });
    // nothing was counted: the whole plan is left
    expect((await who("pro-demo-key")).body).toMatchObject({
      override: null,
      rateLimit: { policies: { burst: { limit: 50, remaining: 50 }, "per-minute": { limit: 300, remaining: 300 }, "per-day": { limit: 50000, remaining: 50000 } } },
    });
  });

  it("the plan is the key's own (ip:… is free), or the one `tier` names: overrides are per key within a plan's namespace", async () => {
    const { post, who } = await start();
    // an address is limited as free
    expect(await (await post("/admin/overrides", { key: "ip:127.0.0.1", override: { scale: 2 } })).json()).toMatchObject({ tier: "free", quotas: { burst: 20 } });
    expect(await who()).toMatchObject({ policy: '"burst";q=20;w=20, "per-minute";q=60;w=60, "per-day";q=2000;w=86400', body: { client: "ip:127.0.0.1", override: { scale: 2 } } });
    // the pro namespace's record of the free key: the free key's own quotas do not change
    expect(await (await post("/admin/overrides", { key: FREE, tier: "pro", override: { scale: 2 } })).json()).toMatchObject({ tier: "pro", quotas: { burst: 100 } });
    expect(await who("free-demo-key")).toMatchObject({ policy: FREE_POLICY, body: { override: null } });
  });
});

describe("POST /admin/blocks", () => {
  it("a manual block: 429 with reason blocked and Retry-After to its end, over any override; unblocked, 200 again", async () => {
    const { state, post, get, who } = await start();
    await post("/admin/overrides", { key: FREE, override: { unlimited: true } });
    const block = await post("/admin/blocks", { key: FREE, duration: "15m" });
    expect(block.status).toBe(200);
    expect(await block.json()).toEqual({ key: FREE, tier: "free", blocked: true, blockedUntil: new Date(T0 + 900_000).toISOString(), retryAfter: 900 });

    const res = await get("/api/quote", "free-demo-key");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("900");
    expect(res.headers.get("ratelimit")).toBe('"burst";r=0;t=900, "per-minute";r=0;t=900, "per-day";r=0;t=900');
    expect(await res.json()).toMatchObject({ status: 429, retryAfter: 900 });
    expect((await who("free-demo-key")).body).toMatchObject({ override: { unlimited: true }, rateLimit: { reason: "blocked", remaining: 0 } });

    // a minute later: 840 s left
    state.t = T0 + 60_000;
    const later = await get("/api/quote", "free-demo-key");
    expect([later.status, later.headers.get("retry-after")]).toEqual([429, "840"]);
    await later.arrayBuffer();

    const unblock = await post("/admin/blocks", { key: FREE, unblock: true });
    expect(unblock.status).toBe(200);
    expect(await unblock.json()).toEqual({ key: FREE, tier: "free", blocked: false, blockedUntil: null, retryAfter: null });
    const again = await get("/api/quote", "free-demo-key");
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ override: { unlimited: true } });
  });

  it("a block ends on the exact millisecond; blocking again replaces it", async () => {
    const { state, post, get, statusOf } = await start();
    await post("/admin/blocks", { key: FREE, duration: "15m" });
    expect(await (await post("/admin/blocks", { key: FREE, duration: "10s" })).json()).toMatchObject({ blockedUntil: new Date(T0 + 10_000).toISOString(), retryAfter: 10 });
    state.t = T0 + 9_999;
    const last = await get("/api/quote", "free-demo-key");
    expect([last.status, last.headers.get("retry-after")]).toEqual([429, "1"]);
    await last.arrayBuffer();
    state.t = T0 + 10_000;
    expect(await statusOf(get("/api/quote", "free-demo-key"))).toBe(200);
  });
});

describe("the admin key", () => {
  it("401 without it, with another key or another scheme, before the body is read; nothing changes", async () => {
    const { post, get, who } = await start();
    for (const [authorization, challenge] of [
      [null, 'Bearer realm="sluice-demo-admin"'],
      ["Bearer wrong-key", 'Bearer realm="sluice-demo-admin", error="invalid_token"'],
      [`Bearer ${ADMIN_KEY}x`, 'Bearer realm="sluice-demo-admin", error="invalid_token"'],
      [`Basic ${ADMIN_KEY}`, 'Bearer realm="sluice-demo-admin"'],
      [ADMIN_KEY, 'Bearer realm="sluice-demo-admin"'],
    ] as const) {
      for (const [path, body] of [
        ["/admin/overrides", { key: FREE, override: { unlimited: true } }],
        ["/admin/blocks", { key: FREE, duration: "1h" }],
        ["/admin/blocks", "not json"],
      ] as const) {
        const res = await post(path, body, authorization);
        expect(res.status).toBe(401);
        expect(res.headers.get("www-authenticate")).toBe(challenge);
        expect(res.headers.get("content-type")).toBe("application/problem+json");
        expect(await res.json()).toMatchObject({ title: "Unauthorized", status: 401 });
      }
    }
    expect((await who("free-demo-key")).body).toMatchObject({ override: null, rateLimit: { reason: "ok", remaining: 10 } });
    expect((await get("/api/quote", "free-demo-key")).status).toBe(200);
    // the scheme's name is case-insensitive
    expect((await post("/admin/overrides", { key: FREE, override: null }, `bearer ${ADMIN_KEY}`)).status).toBe(200);
  });
});

describe("bad input", () => {
  const cases: [path: string, body: unknown, option: string, detail: RegExp][] = [
    ["/admin/overrides", { key: FREE, override: { scale: -1 } }, "override.scale", /^\[sluice\] override\.scale must be a positive finite number; got -1$/],
    ["/admin/overrides", { key: FREE, override: { scale: 0.05 } }, "override.scale", /^\[sluice\] override\.scale must leave every quota at least 1/],
    ["/admin/overrides", { key: FREE, override: { scale: 1e300 } }, "override.scale", /^\[sluice\] override\.scale must keep policy "burst"'s quota at most/],
    ["/admin/overrides", { key: FREE, override: { quotas: { nope: 5 } } }, "override.quotas.nope", /names no policy of this limiter \(its policies: "burst", "per-minute", "per-day"\)$/],
    ["/admin/overrides", { key: FREE, override: { quotas: { "per-minute": 0 } } }, "override.quotas.per-minute", /must be a positive safe integer; got 0$/],
    ["/admin/overrides", { key: FREE, override: { quotas: {} } }, "override.quotas", /must be an object of policy names to quotas with at least one entry/],
    ["/admin/overrides", { key: FREE, override: { unlimited: false } }, "override.unlimited", /must be true; got false$/],
    ["/admin/overrides", { key: FREE, override: { scale: 2, unlimited: true } }, "override", /must have exactly one of scale, quotas and unlimited/],
    ["/admin/overrides", { key: FREE, override: 10 }, "override", /must be \{ scale \}, \{ quotas \} or \{ unlimited: true \}; got 10$/],
    ["/admin/overrides", { key: FREE }, "override", /^\[sluice\] override is required/],
    ["/admin/overrides", { key: FREE, override: { scale: 2 }, ttl: "soon" }, "ttl", /^\[sluice\] ttl must be a duration.*; got "soon"$/],
    ["/admin/overrides", { key: FREE, override: { scale: 2 }, ttl: 0 }, "ttl", /^\[sluice\] ttl must be a positive whole number of milliseconds; got 0$/],
    ["/admin/overrides", { key: FREE, override: null, ttl: "1h" }, "ttl", /^\[sluice\] ttl goes with an override to set/],
    ["/admin/overrides", { override: { scale: 2 } }, "key", /^\[sluice\] key must be the rate-limit key as the API uses it/],
    ["/admin/overrides", { key: "", override: { scale: 2 } }, "key", /^\[sluice\] key must be/],
    ["/admin/overrides", { key: "ip:\ud800", override: { scale: 2 } }, "key", /lone surrogate|well-formed/],
    ["/admin/overrides", { key: "key:no-such-key", override: { scale: 2 } }, "tier", /^\[sluice\] tier is required for key "key:no-such-key"/],
    ["/admin/overrides", { key: FREE, tier: "gold", override: { scale: 2 } }, "tier", /^\[sluice\] tier must be one of free, pro, enterprise; got "gold"$/],
    ["/admin/overrides", { key: FREE, override: { scale: 2 }, scale: 2 }, "scale", /^\[sluice\] scale is not a field of this request: it takes key, tier, override, ttl$/],
    ["/admin/overrides", "{not json", "body", /^\[sluice\] body must be a JSON object$/],
    ["/admin/overrides", "[1]", "body", /^\[sluice\] body must be a JSON object; got \[1\]$/],
    ["/admin/blocks", { key: FREE, duration: "soon" }, "duration", /^\[sluice\] duration must be a duration.*; got "soon"$/],
    ["/admin/blocks", { key: FREE, duration: -5 }, "duration", /^\[sluice\] duration must be a positive whole number of milliseconds; got -5$/],
    ["/admin/blocks", { key: FREE }, "duration", /^\[sluice\] duration is required/],
    ["/admin/blocks", { key: FREE, unblock: false }, "unblock", /^\[sluice\] unblock must be true; got false$/],
    ["/admin/blocks", { key: FREE, duration: "15m", unblock: true }, "duration", /not both$/],
    ["/admin/blocks", { key: FREE, duration: "15m", ttl: "1h" }, "ttl", /^\[sluice\] ttl is not a field of this request: it takes key, tier, duration, unblock$/],
  ];

  it("400 with the SluiceInputError's message and the field it names; nothing stored changes", async () => {
    const { post, get, who } = await start();
    for (const [path, body, option, detail] of cases) {
      const res = await post(path, body);
      const answer = (await res.json()) as Record<string, unknown>;
      expect([path, body, res.status, res.headers.get("content-type"), answer.option]).toEqual([path, body, 400, "application/problem+json", option]);
      expect(answer).toEqual({ type: "about:blank", title: "Bad Request", status: 400, detail: expect.stringMatching(detail), option });
    }
    // no override, no block: the plan's own quotas, the whole burst
    expect(await who("free-demo-key")).toMatchObject({ policy: FREE_POLICY, body: { override: null, rateLimit: { reason: "ok", remaining: 10 } } });
    expect((await get("/api/quote", "free-demo-key")).status).toBe(200);
  });

  it("a bad field does not undo what is in force: the override set before stays", async () => {
    const { post, who } = await start();
    await post("/admin/overrides", { key: FREE, override: { scale: 10 } });
    expect((await post("/admin/overrides", { key: FREE, override: { scale: 0 } })).status).toBe(400);
    expect((await post("/admin/overrides", { key: FREE, override: { scale: 2 }, ttl: "later" })).status).toBe(400);
    expect(await who("free-demo-key")).toMatchObject({ policy: FREE_TIMES_TEN, body: { override: { scale: 10 } } });
  });
});
