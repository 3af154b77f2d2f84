/**
 * A response's rate-limit headers agree with its body: on every 429 the pipeline produces, each
 * violated policy is in `RateLimit-Policy` and in `RateLimit` with `r=0`, and `Retry-After` is
 * never earlier than its `t` (a property over random limits and sequences, injected clock); and
 * where two layers limit one request (`Platform.outerHeaders`), one set of headers lists both.
 */
import { AGREEMENT_T0, checkHeadersAgreeWithBody, costOf, disagreement } from "@sluice/testing/agreement";
import { describe, expect, it } from "vitest";
import { type Platform, createPipeline, mergeRateLimitHeaders } from "./adapter.js";
import { MemoryStore, RateLimiter, createGuard, fixedWindow, tokenBucket } from "./index.js";

type Args = [request: Request];
const platform: Platform<Args> = { where: "test", request: (request) => request };

describe("header/body agreement on every 429 (property)", () => {
  it("the pipeline's handle", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const { handle } = createPipeline<Args>({ limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf }, platform);
      return (request) => handle([request], () => new Response("ok"));
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("createGuard, finished with finish()", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const guard = createGuard({ limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf });
      return async (request) => {
        const { response, finish } = await guard(request);
        return response ?? finish(new Response("ok"));
      };
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("two layers (an outer layer's headers merged in): the inner layer's 429 agrees", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const store = new MemoryStore({ clock });
      const outer = createPipeline<Args>(
        { limiter: new RateLimiter({ store, prefix: "outer", limits: fixedWindow({ limit: 1000, window: "1m", name: "outer-per-1m" }) }), key: () => "k" },
        platform,
      );
      const forwarded = new WeakMap<Request, [string, string][]>();
      const inner = createPipeline<Args>(
        { limiter: new RateLimiter({ store, prefix: "inner", limits }), key: () => "k", cost: costOf },
        { ...platform, outerHeaders: (request) => forwarded.get(request) },
      );
      return async (request) => {
        const first = await outer.check(request);
        forwarded.set(request, first.headers);
        return inner.handle([request], () => new Response("ok"));
      };
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("the checker sees a disagreement: another layer's headers over the 429's body", async () => {
    const proxyHeaders = new Headers({ "RateLimit-Policy": '"100-per-1m";q=100;w=60', RateLimit: '"100-per-1m";r=88;t=48', "Retry-After": "1" });
    expect(disagreement(proxyHeaders, { "violated-policies": ["10-burst"], retryAfter: 1 })).toBe(
      '10-burst is not in RateLimit-Policy: "100-per-1m";q=100;w=60',
    );
    const early = new Headers({ "RateLimit-Policy": '"a";q=1;w=60', RateLimit: '"a";r=0;t=18', "Retry-After": "17" });
    expect(disagreement(early, { "violated-policies": ["a"], retryAfter: 17 })).toBe('Retry-After 17 < t=18 of a: "a";r=0;t=18');
  });
});

describe("mergeRateLimitHeaders", () => {
  const outer: [string, string][] = [
    ["RateLimit-Policy", '"100-per-1m";q=100;w=60'],
    ["RateLimit", '"100-per-1m";r=88;t=48'],
    ["X-RateLimit-Limit", "100"],
    ["X-RateLimit-Remaining", "88"],
    ["X-RateLimit-Reset", "1700000040"],
  ];

  it("joins the IETF lists, outer first; a denying inner layer binds the single-policy styles and brings Retry-After", () => {
    const inner: [string, string][] = [
      ["RateLimit-Policy", '"10-burst";q=10;w=10'],
      ["RateLimit", '"10-burst";r=0;t=1'],
      ["X-RateLimit-Limit", "10"],
      ["X-RateLimit-Remaining", "0"],
      ["X-RateLimit-Reset", "1700000023"],
      ["Retry-After", "1"],
    ];
    expect(mergeRateLimitHeaders(outer, inner)).toEqual([
      ["RateLimit-Policy", '"100-per-1m";q=100;w=60, "10-burst";q=10;w=10'],
      ["RateLimit", '"100-per-1m";r=88;t=48, "10-burst";r=0;t=1'],
      ["X-RateLimit-Limit", "10"],
      ["X-RateLimit-Remaining", "0"],
      ["X-RateLimit-Reset", "1700000023"],
      ["Retry-After", "1"],
    ]);
  });

  it("both allowing: the single-policy styles come from the layer with fewer remaining (the inner one on a tie)", () => {
    const roomy: [string, string][] = [
      ["RateLimit", '"10-burst";r=95;t=1'],
      ["X-RateLimit-Limit", "100"],
      ["X-RateLimit-Remaining", "95"],
    ];
    expect(mergeRateLimitHeaders(outer, roomy)).toEqual([
      ["RateLimit-Policy", '"100-per-1m";q=100;w=60'],
      ["RateLimit", '"100-per-1m";r=88;t=48, "10-burst";r=95;t=1'],
      ["X-RateLimit-Limit", "100"],
      ["X-RateLimit-Remaining", "88"],
      ["X-RateLimit-Reset", "1700000040"],
    ]);
    const tied: [string, string][] = [["X-RateLimit-Limit", "90"], ["X-RateLimit-Remaining", "88"]];
    expect(mergeRateLimitHeaders(outer, tied).slice(2, 4)).toEqual(tied);
  });

  it("a policy both layers name is the inner layer's; draft-7 against an IETF list: the binding layer's; Retry-After the later; innerDenied overrides", () => {
    expect(mergeRateLimitHeaders([["RateLimit", '"a";r=5;t=1, "b";r=2;t=3']], [["RateLimit", '"b";r=0;t=9']])).toEqual([["RateLimit", '"a";r=5;t=1, "b";r=0;t=9']]);
    expect(mergeRateLimitHeaders([["RateLimit", '"a";r=5;t=1']], [["RateLimit", "limit=10, remaining=0, reset=4"], ["Retry-After", "4"]])).toEqual([
      ["RateLimit", "limit=10, remaining=0, reset=4"],
      ["Retry-After", "4"],
    ]);
    expect(mergeRateLimitHeaders([["Retry-After", "30"]], [["Retry-After", "4"]])).toEqual([["Retry-After", "30"]]);
    expect(mergeRateLimitHeaders([["X-RateLimit-Remaining", "0"]], [["X-RateLimit-Remaining", "7"]], true)).toEqual([["X-RateLimit-Remaining", "7"]]);
  });
});

describe("Platform.outerHeaders", () => {
  const request = () => new Request("https://api.test/items");
  const outer: [string, string][] = [
    ["RateLimit-Policy", '"outer";q=100;w=60'],
    ["RateLimit", '"outer";r=99;t=38'],
  ];

  it("merged into the allowed response, the 429, a skipped request's response and onLimited's response", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => AGREEMENT_T0 }), limits: tokenBucket({ capacity: 1, refillRate: 1, interval: "10s", name: "inner" }) });
    const { handle } = createPipeline<Args>(
      { limiter, key: () => "k", headers: "ietf", skip: (r) => r.headers.has("x-skip") },
      { ...platform, outerHeaders: () => outer },
    );
    const ok = await handle([request()], () => new Response("ok"));
    expect([ok.headers.get("RateLimit-Policy"), ok.headers.get("RateLimit")]).toEqual(['"outer";q=100;w=60, "inner";q=1;w=10', '"outer";r=99;t=38, "inner";r=0;t=10']);
    const denied = await handle([request()], () => new Response("ok"));
    expect(denied.status).toBe(429);
    expect([denied.headers.get("RateLimit"), denied.headers.get("Retry-After")]).toEqual(['"outer";r=99;t=38, "inner";r=0;t=10', "10"]);
    expect(disagreement(denied.headers, await denied.json())).toBeUndefined();
    const skipped = await handle([new Request("https://api.test/items", { headers: { "x-skip": "1" } })], () => new Response("ok"));
    expect(skipped.headers.get("RateLimit")).toBe('"outer";r=99;t=38');
    const own = createPipeline<Args>(
      { limiter, key: () => "k", headers: "ietf", onLimited: () => new Response("no", { status: 429 }) },
      { ...platform, outerHeaders: () => outer },
    );
    expect((await own.handle([request()], () => new Response("ok"))).headers.get("RateLimit")).toBe('"outer";r=99;t=38, "inner";r=0;t=10');
  });

  it("undefined or empty: only this layer's headers", async () => {
    for (const answer of [undefined, []]) {
      const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => AGREEMENT_T0 }), limits: fixedWindow({ limit: 2, window: "1m", name: "inner" }) });
      const { check } = createPipeline<Args>({ limiter, key: () => "k", headers: "ietf" }, { ...platform, outerHeaders: () => answer });
      expect((await check(request())).headers).toEqual([
        ["RateLimit-Policy", '"inner";q=2;w=60'],
        ["RateLimit", '"inner";r=1;t=18'],
      ]);
    }
  });
});
