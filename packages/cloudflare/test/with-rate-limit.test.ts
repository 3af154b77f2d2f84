/**
 * withRateLimit in workerd: real HTTP requests to a module Worker wrapped with the Durable Object
 * store. Exact headers and bodies (the test store's clock comes from `x-test-now`).
 */
import { T0 } from "@sluice/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedWorker, startWorker } from "./helpers.js";

let worker: StartedWorker;
beforeAll(async () => {
  worker = await startWorker("./fixtures/guarded-worker.ts", { testClock: true });
});
afterAll(async () => {
  await worker?.stop();
});

const NOW = T0 + 15_000; // 45 s before the minute window ends

function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(new URL(path, worker.url), { headers: { "x-test-now": String(NOW), ...headers }, redirect: "manual" });
}

/** The rate-limit headers of a response (and Retry-After), by lower-case name. */
function limitHeaders(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") out[name] = value;
  }
  return out;
}

describe("withRateLimit around a module Worker", () => {
  it("calls the handler and adds the headers while allowed; then answers the exact 429 without calling it", async () => {
    const seen: [number, string, Record<string, string>][] = [];
    for (let i = 0; i < 3; i++) {
      const response = await get("/t/hello", { "x-api-key": "alice" });
      expect(response.headers.get("x-handler")).toBe("yes");
      seen.push([response.status, await response.text(), limitHeaders(response)]);
    }
    const legacy = (remaining: number) => ({
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": String(remaining),
      "x-ratelimit-reset": String((T0 + 60_000) / 1000),
    });
    expect(seen).toEqual([
      [200, "hello, 2 left", { "ratelimit-policy": '"3-per-1m";q=3;w=60', ratelimit: '"3-per-1m";r=2;t=45', ...legacy(2) }],
      [200, "hello, 1 left", { "ratelimit-policy": '"3-per-1m";q=3;w=60', ratelimit: '"3-per-1m";r=1;t=45', ...legacy(1) }],
      [200, "hello, 0 left", { "ratelimit-policy": '"3-per-1m";q=3;w=60', ratelimit: '"3-per-1m";r=0;t=45', ...legacy(0) }],
    ]);

    const denied = await get("/t/hello", { "x-api-key": "alice" });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("content-type")).toBe("application/problem+json");
    expect(denied.headers.get("x-handler")).toBeNull();
    expect(limitHeaders(denied)).toEqual({
      "ratelimit-policy": '"3-per-1m";q=3;w=60',
      ratelimit: '"3-per-1m";r=0;t=45',
      ...legacy(0),
      "retry-after": "45",
    });
    expect(await denied.text()).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Quota of policy \\"3-per-1m\\" exceeded; retry after 45 seconds.","retryAfter":45,"violated-policies":["3-per-1m"]}',
    );
    // another key has its own quota
    expect(await (await get("/t/hello", { "x-api-key": "bob" })).text()).toBe("hello, 2 left");
  });

  it("a cost that can never pass: 429 without Retry-After, retryAfter null", async () => {
    const response = await get("/t/hello", { "x-api-key": "carol", "x-cost": "4" });
    expect(response.status).toBe(429);
    expect(limitHeaders(response)).not.toHaveProperty("retry-after");
    expect(await response.json()).toMatchObject({ retryAfter: null, detail: 'The request\'s cost exceeds the quota of policy "3-per-1m" and can never be allowed.' });
  });

  it("copies a response whose headers are immutable, and leaves headers the handler set", async () => {
    const redirect = await get("/t/redirect", { "x-api-key": "dave" });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toBe("https://example.com/next");
    expect(redirect.headers.get("ratelimit")).toBe('"3-per-1m";r=2;t=45');

    const own = await get("/t/own-header", { "x-api-key": "dave" });
    expect(await own.text()).toBe("mine");
    expect(own.headers.get("x-ratelimit-limit")).toBe("999");
    expect(own.headers.get("x-ratelimit-remaining")).toBe("1");
  });

  it("skip: no decision, no headers, nothing consumed", async () => {
    const response = await get("/t/health", { "x-api-key": "erin" });
    expect(await response.text()).toBe("hello, undefined left");
    expect(limitHeaders(response)).toEqual({});
    expect(await (await get("/t/hello", { "x-api-key": "erin" })).text()).toBe("hello, 2 left");
  });

  it("hands each decision's pending to ctx.waitUntil, allowed or denied, and builds the limiter once per env", async () => {
    const log = (await (await fetch(new URL("/__log", worker.url))).json()) as {
      factoryCalls: number;
      waitUntilCalls: number;
      waitUntilGotPending: boolean[];
      audit: string[];
    };
    // every limited request so far: alice x4, bob, carol, dave x2, erin (the skipped one decided nothing)
    expect(log.waitUntilCalls).toBe(9);
    expect(log.waitUntilGotPending).toEqual(Array(9).fill(true));
    expect(log.audit).toEqual([
      "alice:allowed",
      "alice:allowed",
      "alice:allowed",
      "alice:denied",
      "bob:allowed",
      "carol:denied",
      "dave:allowed",
      "dave:allowed",
      "erin:allowed",
    ]);
    expect(log.factoryCalls).toBe(1);
  });
});

describe("withRateLimit with the production store and trust", () => {
  it("keys by CF-Connecting-IP and decides with the object's own clock", async () => {
    const ip = { "cf-connecting-ip": "203.0.113.7" };
    const first = await get("/real/a", ip);
    expect(await first.json()).toEqual({ path: "/real/a", remaining: 1 });
    const reset = Number(first.headers.get("ratelimit-reset"));
    expect(limitHeaders(first)).toEqual({ "ratelimit-limit": "2", "ratelimit-remaining": "1", "ratelimit-reset": String(reset) });
    // the log's entry leaves one hour after the object admitted it
    expect([3599, 3600]).toContain(reset);
    expect((await get("/real/b", ip)).status).toBe(200);
    const denied = await get("/real/c", ip);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-remaining")).toBe("0");
    expect(denied.headers.get("retry-after")).toBe(denied.headers.get("ratelimit-reset"));
    expect((await get("/real/a", { "cf-connecting-ip": "203.0.113.8" })).status).toBe(200);
  });
});

describe("withRateLimit with tiers and a store factory", () => {
  it("limits each plan in its own namespace, shapes with delayMs, and answers onLimited's response with the headers", async () => {
    const free = { "x-api-key": "k1", "x-plan": "free" };
    const ok = await get("/tiers/x", free);
    expect([ok.status, await ok.text(), limitHeaders(ok)]).toEqual([
      200,
      "free 0",
      { ratelimit: "limit=1, remaining=0, reset=45", "ratelimit-policy": "1;w=60" },
    ]);
    const limited = await get("/tiers/x", free);
    expect([limited.status, await limited.json(), limitHeaders(limited)]).toEqual([
      429,
      { plan: "free", retryAfterMs: 45_000 },
      { ratelimit: "limit=1, remaining=0, reset=45", "ratelimit-policy": "1;w=60", "retry-after": "45" },
    ]);

    // (a key's plan is cached for tierCacheTtlMs: another key for the other plan)
    const pro = { "x-api-key": "k2", "x-plan": "pro" };
    const bodies: string[] = [];
    for (let i = 0; i < 3; i++) bodies.push(await (await get("/tiers/x", pro)).text());
    // the third passes the burst of 2 through the leaky bucket's queue (delayMs 100), binding "pro" on the tie at 0
    expect(bodies).toEqual(["shaped 1", "shaped 0", "pro 0"]);
    const fourth = await get("/tiers/x", pro);
    expect([fourth.status, await fourth.json()]).toEqual([429, { plan: "pro", retryAfterMs: 45_000 }]);
  });

  it("callbacks get the Worker's (request, env, ctx), then what Sluice adds: key, decision, info, response, error", async () => {
    const log = (await (await fetch(new URL("/__log", worker.url))).json()) as { callbacks: string[] };
    // the first two requests above: k1 allowed (its tier looked up once), then denied
    expect(log.callbacks.slice(0, 15)).toEqual([
      "skip(request, env, ctx)",
      "key(request, env, ctx)",
      'tier(request, env, ctx, "k1")',
      "cost(request, env, ctx)",
      "onDecision(request, env, ctx, decision(allowed), info(free))",
      'onCallbackError(request, env, ctx, error(logger down), "onDecision")',
      "countWhen(request, env, ctx, response(200), decision(allowed))",
      "skip(request, env, ctx)",
      "key(request, env, ctx)",
      "cost(request, env, ctx)",
      "onDecision(request, env, ctx, decision(denied), info(free))",
      'onCallbackError(request, env, ctx, error(logger down), "onDecision")',
      "onLimited(request, env, ctx, decision(denied))",
      "skip(request, env, ctx)",
      "key(request, env, ctx)",
    ]);
  });
});

describe("withRateLimit with a concurrency limit (DurableObjectStore)", () => {
  it("a streamed response holds its slot until the stream ends: a request meanwhile is a 429 with Retry-After 1, one after passes", async () => {
    const headers = { "x-api-key": "exporter" };
    const first = await fetch(new URL("/exports/report.csv", worker.url), { headers });
    expect([first.status, first.headers.get("content-type"), first.headers.get("ratelimit-policy"), first.headers.get("ratelimit")]).toEqual([
      200,
      "text/csv",
      '"exports";q=1;qu="concurrent-requests"',
      '"exports";r=0;t=1',
    ]);
    const reader = first.body!.getReader();
    await reader.read();
    const during = await fetch(new URL("/exports/report.csv", worker.url), { headers });
    expect([during.status, during.headers.get("retry-after"), during.headers.get("content-type")]).toEqual([429, "1", "application/problem+json"]);
    await during.arrayBuffer();
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/row 3\n$/);
    const after = await fetch(new URL("/exports/report.csv", worker.url), { headers });
    expect(after.status).toBe(200);
    await after.arrayBuffer();
    // another key never shared the slot
    const other = await fetch(new URL("/exports/report.csv", worker.url), { headers: { "x-api-key": "someone-else" } });
    expect(other.status).toBe(200);
    await other.arrayBuffer();
  });
});
