/**
 * End to end: starts the real demo process (`node --conditions=@sluice/source --import tsx
 * src/main.ts`, exactly what `pnpm start` runs) on a free port and drives it over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoProcess, startDemo } from "./demo-process.js";

const PROBLEM_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const PROBLEM_TITLE = "Request cannot be satisfied as assigned quota has been exceeded";

let demo: DemoProcess | undefined;
let output = "";
let base = "";

beforeAll(async () => {
  demo = await startDemo();
  base = demo.base;
  output = demo.output();
});

afterAll(async () => {
  if (demo === undefined) return;
  // SIGTERM stops the server cleanly: exit code 0
  expect(await demo.stop()).toBe(0);
  expect(demo.output()).toContain("SIGTERM: stopping");
});

const api = (path: string, apiKey?: string) => fetch(`${base}${path}`, { headers: apiKey === undefined ? {} : { "x-api-key": apiKey } });
const login = (password: string) =>
  fetch(`${base}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "demo", password }),
  });
/** The default 429's `detail`, as `@sluice/core` writes it ("1 second" or "N seconds"). */
const quotaDetail = (policy: string, retryAfter: number) =>
  expect.stringMatching(new RegExp(`^Quota of policy "${policy}" exceeded; retry after ${retryAfter} seconds?\\.$`));

describe("the demo process", () => {
  it("prints the demo keys and copy-pasteable curl commands", () => {
    for (const key of ["free-demo-key", "pro-demo-key", "enterprise-demo-key"]) expect(output).toContain(key);
    expect(output).toContain(`curl -i -H "x-api-key: free-demo-key" ${base}/api/whoami`);
    expect(output).toContain(`${base}/auth/login`);
  });

  it("GET /health is never limited", async () => {
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${base}/health`);
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit")).toBeNull();
      expect(await res.json()).toEqual({ status: "ok" });
    }
  });

  it("free key: ten calls pass, the 11th is a 429 with headers and a problem+json body", async () => {
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await api("/api/quote", "free-demo-key");
      expect(res.status).toBe(200);
      remaining.push(res.headers.get("x-ratelimit-remaining"));
      await res.arrayBuffer();
    }
    expect(remaining).toEqual(["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]);

    const res = await api("/api/quote", "free-demo-key");
    expect(res.status).toBe(429);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(res.headers.get("ratelimit-policy")).toBe('"burst";q=10;w=20, "per-minute";q=30;w=60, "per-day";q=1000;w=86400');
    expect(res.headers.get("ratelimit")).toMatch(/^"burst";r=0;t=(1|2), "per-minute";r=20;t=\d+, "per-day";r=990;t=\d+$/);
    expect(res.headers.get("x-ratelimit-limit")).toBe("10");
    expect(res.headers.get("x-ratelimit-remaining")).toBe("0");
    // one token every 2 s: the next one is at most 2 s away
    const retryAfter = Number(res.headers.get("retry-after"));
    expect([1, 2]).toContain(retryAfter);
    expect(await res.json()).toEqual({
      type: PROBLEM_TYPE,
      title: PROBLEM_TITLE,
      status: 429,
      detail: quotaDetail("burst", retryAfter),
      retryAfter,
      "violated-policies": ["burst"],
    });
  });

  it("pro key: passes where free is limited", async () => {
    for (let i = 0; i < 30; i++) {
      const res = await api("/api/quote", "pro-demo-key");
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const who = await api("/api/whoami", "pro-demo-key");
    expect(who.status).toBe(200);
    expect(who.headers.get("ratelimit-policy")).toBe('"burst";q=50;w=10, "per-minute";q=300;w=60, "per-day";q=50000;w=86400');
    const body = (await who.json()) as { client: string; tier: string; rateLimit: { policies: Record<string, { remaining: number }> } };
    expect(body.client).toBe("key:pro-demo-key");
    expect(body.tier).toBe("pro");
    // whoami peeks: the 30 quotes spent, whoami itself nothing
    expect(body.rateLimit.policies["per-day"]?.remaining).toBe(50_000 - 30);
  });

  it("no key: limited by address as free", async () => {
    const who = await api("/api/whoami");
    expect(who.status).toBe(200);
    expect(await who.json()).toMatchObject({ client: "ip:127.0.0.1", owner: null, tier: "free" });
    for (let i = 0; i < 10; i++) {
      const res = await api("/api/quote");
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const res = await api("/api/quote");
    expect(res.status).toBe(429);
    expect(res.headers.get("x-ratelimit-limit")).toBe("10");
    expect(((await res.json()) as { "violated-policies": string[] })["violated-policies"]).toEqual(["burst"]);
  });

  it("unknown key: 401", async () => {
    const res = await api("/api/whoami", "no-such-key");
    expect(res.status).toBe(401);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(res.headers.get("ratelimit")).toBeNull();
    expect(await res.json()).toMatchObject({ title: "Unauthorized", status: 401 });
  });

  it("login: five failed attempts, then a 15-minute block, even with the right password", async () => {
    const attemptsLeft: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await login("wrong");
      expect(res.status).toBe(401);
      attemptsLeft.push(((await res.json()) as { attemptsLeft: number }).attemptsLeft);
    }
    expect(attemptsLeft).toEqual([4, 3, 2, 1, 0]);
    const res = await login("demo");
    expect(res.status).toBe(429);
    expect(res.headers.get("ratelimit-policy")).toBe('"login";q=5;w=300');
    // the denial starts the penalty box: 15 minutes
    const retryAfter = Number(res.headers.get("retry-after"));
    expect(retryAfter).toBe(900);
    expect(await res.json()).toEqual({
      type: PROBLEM_TYPE,
      title: PROBLEM_TITLE,
      status: 429,
      detail: quotaDetail("login", retryAfter),
      retryAfter,
      "violated-policies": ["login"],
    });
  });
  it("admin: the key the banner prints sets overrides and blocks that the API's next request obeys; 401 without it, 400 naming the field", async () => {
    const adminKey = /\nAdmin key \([^)]*random, made at this start[^)]*\):\n {2}([0-9a-f]{32})\n/.exec(output)?.[1] ?? "";
    expect(adminKey).toMatch(/^[0-9a-f]{32}$/);
    expect(output).toContain(`curl -s -X POST ${base}/admin/overrides -H "Authorization: Bearer ${adminKey}"`);
    const admin = (path: string, body: unknown, key: string | null = adminKey) =>
      fetch(`${base}/admin/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
        body: JSON.stringify(body),
      });
    const key = "key:enterprise-demo-key";

    // the enterprise burst (200) cut to 1: the first quote passes, the second is the 429
    const set = await admin("overrides", { key, override: { quotas: { burst: 1 } } });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ key, tier: "enterprise", override: { quotas: { burst: 1 } }, expiresAt: null, quotas: { burst: 1, "per-minute": 3000, "per-day": 500000 } });
    const first = await api("/api/quote", "enterprise-demo-key");
    expect(first.status).toBe(200);
    // the bucket's rate scales with its quota: still 4 s to fill
    expect(first.headers.get("ratelimit-policy")).toBe('"burst";q=1;w=4, "per-minute";q=3000;w=60, "per-day";q=500000;w=86400');
    expect(await first.json()).toMatchObject({ remaining: 0, override: { quotas: { burst: 1 } } });
    const second = await api("/api/quote", "enterprise-demo-key");
    expect(second.status).toBe(429);
    await second.arrayBuffer();
    expect((await admin("overrides", { key, override: null })).status).toBe(200);
    // the bucket keeps its depth as time: the request under a burst of 1 left it empty (a token
    // back after 20 ms), so what follows runs { unlimited: true }, which a block still beats
    expect((await admin("overrides", { key, override: { unlimited: true } })).status).toBe(200);

    const block = await admin("blocks", { key, duration: "1h" });
    expect(await block.json()).toMatchObject({ key, blocked: true, retryAfter: 3600 });
    const blocked = await api("/api/quote", "enterprise-demo-key");
    expect([blocked.status, blocked.headers.get("retry-after")]).toEqual([429, "3600"]);
    await blocked.arrayBuffer();
    expect(await (await api("/api/whoami", "enterprise-demo-key")).json()).toMatchObject({ override: { unlimited: true }, rateLimit: { reason: "blocked" } });
    expect(await (await admin("blocks", { key, unblock: true })).json()).toMatchObject({ blocked: false });
    expect((await api("/api/quote", "enterprise-demo-key")).status).toBe(200);

    for (const wrong of [null, "0".repeat(32)]) {
      const res = await admin("blocks", { key, duration: "1h" }, wrong);
      expect(res.status).toBe(401);
      await res.arrayBuffer();
    }
    const bad = await admin("overrides", { key, override: { scale: Number.NaN } });
    expect(bad.status).toBe(400);
    // JSON has no NaN: it arrives as null
    expect(await bad.json()).toMatchObject({ status: 400, option: "override.scale", detail: "[sluice] override.scale must be a positive finite number; got null" });
    // nothing stored changed
    expect(await (await api("/api/whoami", "enterprise-demo-key")).json()).toMatchObject({ override: { unlimited: true }, rateLimit: { reason: "ok" } });
    expect((await api("/api/quote", "enterprise-demo-key")).status).toBe(200);
    expect((await admin("overrides", { key, override: null })).status).toBe(200);
  });
});

describe("SLUICE_ADMIN_KEY", () => {
  it("chooses the admin key: printed as given, the only one accepted", async () => {
    const chosen = "my-admin-key.2026~ok";
    const other = await startDemo({ SLUICE_ADMIN_KEY: chosen });
    try {
      expect(other.output()).toContain(`Admin key (Authorization: Bearer <key> on POST /admin/overrides and POST /admin/blocks; from SLUICE_ADMIN_KEY):\n  ${chosen}\n`);
      expect(other.output()).toContain(`-H "Authorization: Bearer ${chosen}"`);
      const post = (key: string) =>
        fetch(`${other.base}/admin/blocks`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ key: "ip:192.0.2.1", unblock: true }) });
      expect((await post(chosen)).status).toBe(200);
      expect((await post("another-key")).status).toBe(401);
    } finally {
      expect(await other.stop()).toBe(0);
    }
  });

  it("refuses a key that is no bearer token (it would not paste into the banner's curl lines): exit 1 with a message", async () => {
    await expect(startDemo({ SLUICE_ADMIN_KEY: 'has "quotes" and spaces' })).rejects.toThrow(/exited early \(code 1, signal null\)[\s\S]*SLUICE_ADMIN_KEY must be a bearer token/);
  });
});
