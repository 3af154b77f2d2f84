import { MemoryStore, type Store } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { createApp } from "./app.js";

/** A whole minute in epoch ms, 80_040 s into its UTC day (so the day window ends 6_360 s later). */
const T0 = 1_700_000_040_000;

/** `app.request` with the Node bindings `getConnInfo` reads: the socket's remote address. */
function client(app: ReturnType<typeof createApp>, remoteAddress = "203.0.113.5") {
  const env = { incoming: { socket: { remoteAddress, remotePort: 50_000, remoteFamily: remoteAddress.includes(":") ? "IPv6" : "IPv4" } } };
  return {
    get: (path: string, headers: Record<string, string> = {}) => app.request(path, { headers }, env),
    login: (password = "wrong") =>
      app.request(
        "/auth/login",
        { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "demo", password }) },
        env,
      ),
  };
}

function setup() {
  const state = { t: T0 };
  const app = createApp({ clock: () => state.t });
  return { state, app, ...client(app) };
}

describe("GET /health", () => {
  it("is never limited and has no rate-limit headers", async () => {
    const { get } = setup();
    for (let i = 0; i < 100; i++) {
      const res = await get("/health");
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit")).toBeNull();
      expect(res.headers.get("x-ratelimit-limit")).toBeNull();
    }
    expect(await (await get("/health")).json()).toEqual({ status: "ok" });
  });
});

describe("GET /api/* by plan", () => {
  it("free key: ten calls pass, the 11th is the 429 of the burst policy", async () => {
    const { state, get } = setup();
    const remaining: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await get("/api/quote", { "x-api-key": "free-demo-key" });
      expect(res.status).toBe(200);
      remaining.push(res.headers.get("x-ratelimit-remaining") ?? "");
    }
    expect(remaining).toEqual(["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]);

    const res = await get("/api/quote", { "x-api-key": "free-demo-key" });
    expect(res.status).toBe(429);
    expect(Object.fromEntries(res.headers)).toEqual({
      "content-type": "application/problem+json",
      "ratelimit-policy": '"burst";q=10;w=20, "per-minute";q=30;w=60, "per-day";q=1000;w=86400',
      // t: the next token in 2 s; the minute's 21st unit once its window has rolled (60 s) and the
      // 10 counted weigh 9 (6 s more); the day's window ends in 6360 s
      ratelimit: '"burst";r=0;t=2, "per-minute";r=20;t=66, "per-day";r=990;t=6360',
      "retry-after": "2",
      "x-ratelimit-limit": "10",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1700000060",
    });
    expect(await res.text()).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",' +
        '"title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,' +
        '"detail":"Quota of policy \\"burst\\" exceeded; retry after 2 seconds.","retryAfter":2,"violated-policies":["burst"]}',
    );

    // one token refills every 2 s (30 per minute)
    state.t = T0 + 1_999;
    expect((await get("/api/quote", { "x-api-key": "free-demo-key" })).status).toBe(429);
    state.t = T0 + 2_000;
    expect((await get("/api/quote", { "x-api-key": "free-demo-key" })).status).toBe(200);
  });

  it("free key: the per-minute window binds once the bucket refills faster than the window allows", async () => {
    const { state, get } = setup();
    const statuses: number[] = [];
    // one call every 2 s keeps the bucket from emptying; the sliding window caps the minute at 30
    for (let i = 0; i < 31; i++) {
      state.t = T0 + i * 1_900;
      statuses.push((await get("/api/quote", { "x-api-key": "free-demo-key" })).status);
    }
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true);
    const res = await get("/api/quote", { "x-api-key": "free-demo-key" });
    expect(res.status).toBe(429);
    expect((await res.json())["violated-policies"]).toEqual(["per-minute"]);
  });

  it("pro and enterprise keys have their own, larger quotas", async () => {
    const { get } = setup();
    for (let i = 0; i < 50; i++) expect((await get("/api/quote", { "x-api-key": "pro-demo-key" })).status).toBe(200);
    expect((await get("/api/quote", { "x-api-key": "pro-demo-key" })).status).toBe(429);

    await get("/api/quote", { "x-api-key": "enterprise-demo-key" });
    // whoami peeks: the same answer twice, and nothing spent
    for (let i = 0; i < 2; i++) {
      const res = await get("/api/whoami", { "x-api-key": "enterprise-demo-key" });
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-policy")).toBe('"burst";q=200;w=4, "per-minute";q=3000;w=60, "per-day";q=500000;w=86400');
      expect(res.headers.get("x-ratelimit-remaining")).toBe("199");
      expect(await res.json()).toEqual({
        client: "key:enterprise-demo-key",
        owner: "Initech (enterprise plan)",
        tier: "enterprise",
        override: null,
        rateLimit: {
          policy: "burst",
          limit: 200,
          remaining: 199,
          resetAt: "2023-11-14T22:14:00.020Z",
          policies: {
            burst: { limit: 200, remaining: 199 },
            "per-minute": { limit: 3000, remaining: 2999 },
            "per-day": { limit: 500000, remaining: 499999 },
          },
          reason: "ok",
        },
      });
    }
  });

  it("GET /api/whoami spends nothing: the free burst is still ten calls after it, and it reports the 429 state", async () => {
    const { get } = setup();
    const key = { "x-api-key": "free-demo-key" };
    expect((await get("/api/whoami", key)).headers.get("x-ratelimit-remaining")).toBe("10");
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await get("/api/quote", key)).status);
    expect(statuses).toEqual([...Array(10).fill(200), 429]);
    const who = await get("/api/whoami", key);
    expect(who.status).toBe(200);
    expect(who.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(((await who.json()) as { rateLimit: { remaining: number } }).rateLimit.remaining).toBe(0);
  });

  it("callers without a key are limited by address as free, each address on its own", async () => {
    const { app } = setup();
    const a = client(app, "::ffff:198.51.100.7");
    const b = client(app, "198.51.100.8");
    const who = await a.get("/api/whoami");
    expect((await who.json()).client).toBe("ip:198.51.100.7");
    for (let i = 0; i < 10; i++) expect((await a.get("/api/quote")).status).toBe(200);
    expect((await a.get("/api/quote")).status).toBe(429);
    expect((await b.get("/api/quote")).status).toBe(200);
    // a key is a separate client even from the same address
    expect((await a.get("/api/quote", { "x-api-key": "free-demo-key" })).status).toBe(200);
  });

  it("an unknown API key gets 401 and consumes nothing", async () => {
    const { get } = setup();
    for (let i = 0; i < 20; i++) {
      const res = await get("/api/whoami", { "x-api-key": "not-a-key" });
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      expect(res.headers.get("ratelimit")).toBeNull();
      expect(await res.json()).toEqual({
        type: "about:blank",
        title: "Unauthorized",
        status: 401,
        detail: "Unknown API key. Send one of the demo keys in x-api-key, or none to be limited by address.",
      });
    }
  });

  it("GET /api/export costs 5 units", async () => {
    const { get } = setup();
    const first = await get("/api/export", { "x-api-key": "free-demo-key" });
    expect(first.status).toBe(200);
    // t: the next token in 2 s; the minute's 26th unit after the roll (60 s) once 5 weigh 4 (12 s)
    expect(first.headers.get("ratelimit")).toBe('"burst";r=5;t=2, "per-minute";r=25;t=72, "per-day";r=995;t=6360');
    expect((await get("/api/export", { "x-api-key": "free-demo-key" })).status).toBe(200);
    expect((await get("/api/export", { "x-api-key": "free-demo-key" })).status).toBe(429);
  });
});

describe("GET /api/export: at most 2 in flight per key", () => {
  it("a third export while two are in flight is the 429 of the exports limit and spends nothing of the plan; once one is done, the next passes", async () => {
    // the first two exports are in flight until the test lets them finish; later ones finish at once
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    let bothBuilding!: () => void;
    const building = new Promise<void>((resolve) => (bothBuilding = resolve));
    let started = 0;
    const buildExport = async () => {
      started++;
      if (started === 2) bothBuilding();
      if (started <= 2) await finished;
    };
    const app = createApp({ clock: () => T0, buildExport });
    const { get } = client(app);
    const pro = { "x-api-key": "pro-demo-key" };
    const first = get("/api/export", pro);
    const second = get("/api/export", pro);
    await building; // both hold their slot and are building their export
    const third = await get("/api/export", pro);
    expect(third.status).toBe(429);
    expect(Object.fromEntries(third.headers)).toEqual({
      "content-type": "application/problem+json",
      "ratelimit-policy": '"exports";q=2;qu="concurrent-requests"',
      ratelimit: '"exports";r=0;t=1',
      "retry-after": "1",
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String((T0 + 60_000) / 1000),
    });
    expect(await third.json()).toMatchObject({ type: "https://iana.org/assignments/http-problem-types#quota-exceeded", retryAfter: 1, "violated-policies": ["exports"] });
    // another key has slots of its own
    expect((await get("/api/export", { "x-api-key": "enterprise-demo-key" })).status).toBe(200);

    finish();
    const done = await Promise.all([first, second]);
    expect(done.map((r) => r.status)).toEqual([200, 200]);
    const bodies = (await Promise.all(done.map((r) => r.json()))) as { exportsInFlight: unknown; rateLimit: { policies: { burst: { remaining: number } } } }[];
    // each saw both slots taken while it built its export; the plan charged 5 each
    expect(bodies.map((b) => b.exportsInFlight)).toEqual([
      { limit: 2, free: 0 },
      { limit: 2, free: 0 },
    ]);
    expect(bodies.map((b) => b.rateLimit.policies.burst.remaining).sort()).toEqual([40, 45]);
    // both responses sent: their slots are free; the 429 spent nothing of the burst (50 - 5 - 5 - 5)
    const fourth = await get("/api/export", pro);
    expect(fourth.status).toBe(200);
    expect(await fourth.json()).toMatchObject({ exportsInFlight: { limit: 2, free: 1 }, rateLimit: { policies: { burst: { remaining: 35 } } } });
  });
});

describe("POST /auth/login", () => {
  it("successful logins do not count: any number of them, then 5 failures still pass", async () => {
    const { state, login } = setup();
    const seen: [number, unknown][] = [];
    for (let i = 0; i < 8; i++) {
      state.t = T0 + i * 1_000;
      const res = await login(i % 4 === 3 ? "wrong" : "demo");
      seen.push([res.status, ((await res.json()) as { attemptsLeft: number }).attemptsLeft]);
    }
    // two failures among eight attempts: 3 attempts left
    expect(seen).toEqual([
      [200, 5],
      [200, 5],
      [200, 5],
      [401, 4],
      [200, 4],
      [200, 4],
      [200, 4],
      [401, 3],
    ]);
  });

  it("5 failed attempts per 5 minutes per address; the 6th is a 429 that blocks the address for 15 minutes", async () => {
    const { state, app, login } = setup();
    const attempts: [number, unknown][] = [];
    for (let i = 0; i < 5; i++) {
      state.t = T0 + i * 10_000;
      const res = await login();
      attempts.push([res.status, ((await res.json()) as { attemptsLeft: number }).attemptsLeft]);
    }
    expect(attempts).toEqual([
      [401, 4],
      [401, 3],
      [401, 2],
      [401, 1],
      [401, 0],
    ]);
    state.t = T0 + 60_000;
    const res = await login("demo");
    expect(res.status).toBe(429);
    // the denial starts the penalty box: 15 minutes, even though the oldest attempt leaves the log in 240 s
    expect(res.headers.get("retry-after")).toBe("900");
    expect(res.headers.get("ratelimit")).toBe('"login";r=0;t=900');
    expect(res.headers.get("ratelimit-policy")).toBe('"login";q=5;w=300');
    expect(await res.json()).toMatchObject({ status: 429, retryAfter: 900, "violated-policies": ["login"] });

    // another address is not affected
    expect((await client(app, "192.0.2.1").login("demo")).status).toBe(200);
    // the log has emptied long before, but the block holds until it ends, to the millisecond
    state.t = T0 + 960_000 - 1;
    expect((await login("demo")).status).toBe(429);
    state.t = T0 + 960_000;
    const ok = await login("demo");
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true, token: "demo-token", attemptsLeft: 5 });
  });

  it("fails closed when the store is down, while /api falls back to memory", async () => {
    const down = (): never => {
      throw new Error("store is down");
    };
    // (every method of the contract, failing)
    const brokenStore: Store = { bind: () => ({ consume: down, peek: down, reset: down, refund: down, release: down }) };
    const app = createApp({ store: brokenStore });
    const { get, login } = client(app);
    const denied = await login("demo");
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("1");
    expect(await denied.json()).toMatchObject({
      detail: expect.stringMatching(/^The rate limiter's store is unavailable\b.*; retry after 1 seconds?\.$/),
      "violated-policies": ["login"],
    });
    const api = await get("/api/quote", { "x-api-key": "free-demo-key" });
    expect(api.status).toBe(200);
    expect(api.headers.get("x-ratelimit-remaining")).toBe("9");
  });
});

describe("reservations on the /api routes", () => {
  /** A memory store behind a wrapper (a store a round trip away, to the limiters), counting the consume calls it is asked. */
  function counted(clock: () => number) {
    const inner = new MemoryStore({ clock });
    const calls = { consume: 0, reserve: 0 };
    const store: Store = {
      bind(namespace) {
        const b = inner.bind(namespace);
        return {
          consume: (key, cost, lease) => {
            calls.consume++;
            return lease === undefined ? b.consume(key, cost) : b.consume(key, cost, lease);
          },
          peek: (key) => b.peek(key),
          reset: (key) => b.reset(key),
          refund: (key, cost, charge) => b.refund(key, cost, charge),
          release: (key, lease) => b.release(key, lease),
          reserve: (key, units, holdMs) => {
            calls.reserve++;
            return b.reserve!(key, units, holdMs);
          },
          control: (key, command) => b.control!(key, command),
        };
      },
    };
    return { store, calls };
  }

  it("over a store that reserves, a hot key's requests are decided from units reserved ahead: fewer store decisions than requests, the same answers", async () => {
    const state = { t: T0 };
    const { store, calls } = counted(() => state.t);
    const { get } = client(createApp({ store }));
    const remaining: number[] = [];
    for (let i = 0; i < 60; i++) {
      const res = await get("/api/quote", { "x-api-key": "enterprise-demo-key" });
      expect(res.status).toBe(200);
      remaining.push(Number(res.headers.get("x-ratelimit-remaining")));
    }
    expect(calls.reserve).toBeGreaterThan(0);
    expect(calls.consume).toBeLessThan(60);
    // the burst (200) is what binds; every answer says what is left, never more than the last
    expect(Math.max(...remaining)).toBeLessThanOrEqual(199);
  });

  it("over the demo's own memory store it changes nothing: every request is the store's", async () => {
    const { get } = setup();
    const remaining: string[] = [];
    for (let i = 0; i < 12; i++) remaining.push((await get("/api/quote", { "x-api-key": "pro-demo-key" })).headers.get("x-ratelimit-remaining") ?? "");
    // exact, one by one, as without the option
    expect(remaining).toEqual(["49", "48", "47", "46", "45", "44", "43", "42", "41", "40", "39", "38"]);
  });
});
