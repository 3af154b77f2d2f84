import { describe, expect, it } from "vitest";
import {
  MemoryStore,
  type Policy,
  QUOTA_EXCEEDED_TITLE,
  QUOTA_EXCEEDED_TYPE,
  RateLimiter,
  type Store,
  createGuard,
  fixedWindow,
  limitedResponse,
  quotaExceededProblem,
  setRateLimitHeaders,
} from "./index.js";
import { toDecision } from "./store.js";

/** 42 s into a minute (18 s before the window ends) and 2 s into a 10-second window. */
const T0 = 1_700_000_022_000;

function limiterAt(limits: Policy | Policy[]) {
  return new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits });
}

const TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const TITLE = "Request cannot be satisfied as assigned quota has been exceeded";

/** Sends `requests` requests through a default guard; all but the last must pass, the last must be denied. */
async function denied(limiter: RateLimiter, requests: number) {
  const guard = createGuard({ limiter, key: () => "k" });
  for (let i = 0; i < requests - 1; i++) expect((await guard(new Request("https://api.test/"))).response).toBeUndefined();
  const { decision, headers, response } = await guard(new Request("https://api.test/"));
  expect(decision?.allowed).toBe(false);
  if (response === undefined) throw new Error("expected a 429 response");
  return { headers, response, decision };
}

describe("the default 429", () => {
  it("is the registered quota-exceeded problem type", () => {
    expect(QUOTA_EXCEEDED_TYPE).toBe(TYPE);
    expect(QUOTA_EXCEEDED_TITLE).toBe(TITLE);
  });

  it("for a limit denial: status, content type, headers and the exact body", async () => {
    const { response, headers } = await denied(limiterAt(fixedWindow({ limit: 1, window: "1m" })), 2);
    expect(response.status).toBe(429);
    expect(Object.fromEntries(response.headers)).toEqual({
      "content-type": "application/problem+json",
      "ratelimit-policy": '"1-per-1m";q=1;w=60',
      ratelimit: '"1-per-1m";r=0;t=18',
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1700000040",
      "retry-after": "18",
    });
    // the guard's headers are the rate-limit headers only
    expect(headers.get("content-type")).toBeNull();
    expect(headers.get("retry-after")).toBe("18");
    expect(await response.text()).toBe(
      JSON.stringify({
        type: TYPE,
        title: TITLE,
        status: 429,
        detail: 'Quota of policy "1-per-1m" exceeded; retry after 18 seconds.',
        retryAfter: 18,
        "violated-policies": ["1-per-1m"],
      }),
    );
  });

  it("for a cost that exceeds the limit: retryAfter null and no Retry-After", async () => {
    const limiter = limiterAt(fixedWindow({ limit: 1, window: "1m" }));
    const guard = createGuard({ limiter, key: () => "k", cost: 2 });
    const result = await guard(new Request("https://api.test/"));
    expect(result.decision).toMatchObject({ allowed: false, reason: "cost-exceeds-limit", retryAfterMs: Infinity });
    const r = result.response as Response;
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBeNull();
    expect(Object.fromEntries(r.headers)).toEqual({
      "content-type": "application/problem+json",
      "ratelimit-policy": '"1-per-1m";q=1;w=60',
      ratelimit: '"1-per-1m";r=0;t=18', // the violated policy: r=0
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "1",
      "x-ratelimit-reset": "1700000040",
    });
    expect(await r.json()).toEqual({
      type: TYPE,
      title: TITLE,
      status: 429,
      detail: 'The request\'s cost exceeds the quota of policy "1-per-1m" and can never be allowed.',
      retryAfter: null,
      "violated-policies": ["1-per-1m"],
    });
  });

  it("for several policies: violated-policies lists only the denying ones, retryAfter is the binding one's", async () => {
    const perMinute = fixedWindow({ limit: 2, window: "1m", name: "per-minute" }); // 18 s to its window end
    const per10s = fixedWindow({ limit: 2, window: "10s", name: "per-10s" }); // 8 s to its window end
    const perDay = fixedWindow({ limit: 100, window: "1d", name: "per-day" });
    const { response } = await denied(limiterAt([perMinute, per10s, perDay]), 3);
    expect(response.headers.get("ratelimit")).toBe('"per-minute";r=0;t=18, "per-10s";r=0;t=8, "per-day";r=98;t=6378');
    expect(response.headers.get("retry-after")).toBe("18");
    expect(await response.json()).toEqual({
      type: TYPE,
      title: TITLE,
      status: 429,
      detail: 'Quota of policy "per-minute" exceeded; retry after 18 seconds.',
      retryAfter: 18,
      "violated-policies": ["per-minute", "per-10s"],
    });

    // only the 10-second policy denies the third request when the minute allows five
    const loose = fixedWindow({ limit: 5, window: "1m", name: "per-minute" });
    const second = await denied(limiterAt([loose, per10s, perDay]), 3);
    expect(second.response.headers.get("retry-after")).toBe("8");
    expect(await second.response.json()).toEqual({
      type: TYPE,
      title: TITLE,
      status: 429,
      detail: 'Quota of policy "per-10s" exceeded; retry after 8 seconds.',
      retryAfter: 8,
      "violated-policies": ["per-10s"],
    });
  });

  it("for a fail-closed store: says the store is unavailable", async () => {
    const down: Store = {
      bind: () => ({
        consume: () => Promise.reject(new Error("connection refused")),
        peek: () => Promise.reject(new Error("connection refused")),
        reset: () => Promise.reject(new Error("connection refused")),
        refund: () => Promise.reject(new Error("connection refused")),
        release: () => Promise.reject(new Error("connection refused")),
      }),
    };
    const limiter = new RateLimiter({ store: down, limits: fixedWindow({ limit: 5, window: "1m", name: "login" }), onStoreError: "deny" });
    const { response } = await denied(limiter, 1);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(await response.json()).toEqual({
      type: TYPE,
      title: TITLE,
      status: 429,
      detail: "The rate limiter's store is unavailable and the request was not allowed; retry after 1 second.",
      retryAfter: 1,
      "violated-policies": ["login"],
    });
  });

  it("never writes null into a sentence: a store-error decision whose cost can never pass", () => {
    const decision = toDecision(
      {
        now: T0,
        policies: [{ policy: "p", allowed: false, limit: 1, remaining: 1, resetAt: T0, retryAfterMs: Infinity, delayMs: 0, refillAt: T0 }],
      },
      "store-error",
    );
    expect(quotaExceededProblem(decision)).toEqual({
      type: TYPE,
      title: TITLE,
      status: 429,
      detail: 'The rate limiter\'s store is unavailable, and the request\'s cost exceeds the quota of policy "p".',
      retryAfter: null,
      "violated-policies": ["p"],
    });
  });

  it("limitedResponse copies the headers it is given and leaves them unchanged", async () => {
    const limiter = limiterAt(fixedWindow({ limit: 1, window: "1m" }));
    await limiter.limit("k");
    const decision = await limiter.limit("k");
    const headers = new Headers();
    setRateLimitHeaders(headers, decision, ["draft-6"], limiter.policies);
    const response = limitedResponse(decision, headers);
    expect(Object.fromEntries(headers)).toEqual({
      "ratelimit-limit": "1",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "18",
      "retry-after": "18",
    });
    expect(Object.fromEntries(response.headers)).toEqual({ ...Object.fromEntries(headers), "content-type": "application/problem+json" });
    expect(response.status).toBe(429);
  });

  it("limitedResponse given a list of pairs: the same headers, its own content type winning over one in the list, the list unchanged", async () => {
    const limiter = limiterAt(fixedWindow({ limit: 1, window: "1m" }));
    await limiter.limit("k");
    const decision = await limiter.limit("k");
    const list: [string, string][] = [
      ["RateLimit-Limit", "1"],
      ["Retry-After", "18"],
      ["Content-Type", "text/plain"],
    ];
    const response = limitedResponse(decision, list);
    expect(Object.fromEntries(response.headers)).toEqual({ "ratelimit-limit": "1", "retry-after": "18", "content-type": "application/problem+json" });
    expect(list).toEqual([
      ["RateLimit-Limit", "1"],
      ["Retry-After", "18"],
      ["Content-Type", "text/plain"],
    ]);
    expect([response.status, (await response.json()).status]).toEqual([429, 429]);
  });
});
