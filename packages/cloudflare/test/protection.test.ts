/**
 * The deny cache and dry run through `withRateLimit` in workerd, with the Durable Object store:
 * real HTTP requests to a module Worker whose Durable Object RPCs are counted.
 */
import { T0 } from "@sluice/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedWorker, startWorker } from "./helpers.js";

let worker: StartedWorker;
beforeAll(async () => {
  worker = await startWorker("./fixtures/protection-worker.ts", { testClock: true });
});
afterAll(async () => {
  await worker?.stop();
});

const NOW = T0 + 15_000; // 45 s before the minute window ends

function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(new URL(path, worker.url), { headers: { "x-test-now": String(NOW), ...headers } });
}

async function rpcs(): Promise<{ consume: number; peek: number; reset: number }> {
  return (await get("/__rpcs")).json() as never;
}

async function reports(): Promise<string[]> {
  return (await get("/__reports")).json() as never;
}

/** The rate-limit headers of a response (and Retry-After), by lower-case name. */
function limitHeaders(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") out[name] = value;
  }
  return out;
}

describe("deny cache on the Durable Object store", () => {
  it("1,000 requests for a denied key make one RPC to the object", async () => {
    expect((await get("/cache/x", { "x-api-key": "hammer" })).status).toBe(200);
    await rpcs(); // from here on
    const reasons = new Map<string, number>();
    let first: Response | undefined;
    let last: Response | undefined;
    for (let i = 0; i < 1000; i++) {
      const response = await get("/cache/x", { "x-api-key": "hammer" });
      expect(response.status).toBe(429);
      const { reason } = (await response.json()) as { reason: string };
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      if (i === 0) first = response;
      last = response;
    }
    const counted = await rpcs();
    expect(counted).toEqual({ consume: 1, peek: 0, reset: 0, refund: 0 });
    expect(Object.fromEntries(reasons)).toEqual({ limit: 1, "cached-deny": 999 });
    // the cached 429 carries the same headers as the object's own (the hour has not rolled over)
    const h1 = limitHeaders(first!);
    const h2 = limitHeaders(last!);
    expect(h2["ratelimit-policy"]).toBe(h1["ratelimit-policy"]);
    expect(h2["x-ratelimit-reset"]).toBe(h1["x-ratelimit-reset"]);
    expect(h2["x-ratelimit-remaining"]).toBe("0");
    expect(Number(h2["retry-after"])).toBeGreaterThan(0);
    expect(Number(h2["retry-after"])).toBeLessThanOrEqual(Number(h1["retry-after"]));
    // another key still reaches the object
    expect((await get("/cache/x", { "x-api-key": "other" })).status).toBe(200);
    expect((await rpcs()).consume).toBe(1);
  });

  it("with denyCache: false, every denied request is an RPC", async () => {
    expect((await get("/cache-off/x", { "x-api-key": "k" })).status).toBe(200);
    await rpcs();
    for (let i = 0; i < 20; i++) expect(await (await get("/cache-off/x", { "x-api-key": "k" })).json()).toMatchObject({ reason: "limit" });
    expect(await rpcs()).toEqual({ consume: 20, peek: 0, reset: 0, refund: 0 });
  });
});

describe("dry run through withRateLimit", () => {
  it("denied requests reach the handler with no rate-limit headers; onLimited reports them", async () => {
    await reports();
    const seen: [number, string, Record<string, string>][] = [];
    for (let i = 0; i < 4; i++) {
      const response = await get("/dry/x", { "x-api-key": "alice" });
      seen.push([response.status, await response.text(), limitHeaders(response)]);
    }
    expect(seen).toEqual([
      [200, "served: allowed=true dryRun=true remaining=1", {}],
      [200, "served: allowed=true dryRun=true remaining=0", {}],
      [200, "served: allowed=false dryRun=true remaining=0", {}],
      [200, "served: allowed=false dryRun=true remaining=0", {}],
    ]);
    expect(await reports()).toEqual([
      "/dry/x alice: 2-per-1m allowed=false dryRun=true retryAfterMs=45000",
      // the second denial came from the deny cache: the same denial, a few ms later at most
      expect.stringMatching(/^\/dry\/x alice: 2-per-1m allowed=false dryRun=true retryAfterMs=4\d{4}$/),
    ]);
  });

  it("dryRunHeaders: true adds the headers enforcing would, without Retry-After", async () => {
    const seen: [number, string, Record<string, string>][] = [];
    for (let i = 0; i < 3; i++) {
      const response = await get("/dry-headers/x", { "x-api-key": "bob" });
      seen.push([response.status, await response.text(), limitHeaders(response)]);
    }
    const headers = (remaining: number) => ({
      "ratelimit-policy": '"2-per-1m";q=2;w=60',
      ratelimit: `"2-per-1m";r=${remaining};t=45`,
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": String(remaining),
      "x-ratelimit-reset": String((T0 + 60_000) / 1000),
    });
    expect(seen).toEqual([
      [200, "served: allowed=true dryRun=true remaining=1", headers(1)],
      [200, "served: allowed=true dryRun=true remaining=0", headers(0)],
      [200, "served: allowed=false dryRun=true remaining=0", headers(0)],
    ]);
    expect(await reports()).toEqual(["/dry-headers/x bob: 2-per-1m allowed=false dryRun=true retryAfterMs=45000"]);
  });

  it("one tier in dry run: it lets denied requests through while the other tier answers 429", async () => {
    const free = [await get("/dry-tiers/x", { "x-api-key": "f" }), await get("/dry-tiers/x", { "x-api-key": "f" })];
    expect(free.map((r) => r.status)).toEqual([200, 429]);
    expect(await free[1]!.text()).toBe("limited"); // enforcing: onLimited's response is the answer
    expect(free[1]!.headers.get("retry-after")).toBe("45");
    const pro = [];
    for (let i = 0; i < 3; i++) {
      const response = await get("/dry-tiers/x", { "x-api-key": "p", "x-plan": "pro" });
      pro.push([response.status, await response.text(), response.headers.get("ratelimit")]);
    }
    expect(pro).toEqual([
      [200, "served: allowed=true dryRun=true remaining=1", null],
      [200, "served: allowed=true dryRun=true remaining=0", null],
      [200, "served: allowed=false dryRun=true remaining=0", null],
    ]);
    expect(await reports()).toEqual([
      "/dry-tiers/x f: free allowed=false dryRun=false retryAfterMs=45000",
      "/dry-tiers/x p: pro allowed=false dryRun=true retryAfterMs=45000",
    ]);
  });
});

describe("countWhen through withRateLimit: only failed logins count", () => {
  it("successes are refunded (one refund RPC each); the 4th failure is the 429 before the handler", async () => {
    await rpcs();
    const attempt = async (password: string) => {
      const response = await get("/login/x", { "x-api-key": "carol", "x-test-now": String(NOW), "x-password": password });
      return [response.status, await response.text()];
    };
    const seen = [];
    for (const password of ["right", "right", "wrong", "right", "wrong", "wrong", "wrong", "right"]) seen.push(await attempt(password));
    expect(seen).toEqual([
      [200, "welcome"],
      [200, "welcome"],
      [401, "wrong password"],
      [200, "welcome"],
      [401, "wrong password"],
      [401, "wrong password"],
      [429, expect.stringContaining("quota-exceeded")],
      [429, expect.stringContaining("quota-exceeded")],
    ]);
    // 8 decisions (the last one from the deny cache: 7 consume RPCs), 3 refunds for the 3 successes
    expect(await rpcs()).toEqual({ consume: 7, peek: 0, reset: 0, refund: 3 });
  });
});
