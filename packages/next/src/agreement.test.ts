/**
 * Headers that agree with the body in Next.js: every 429 of `withRateLimit` and `rateLimitProxy`
 * (the property over random limits and sequences), and two layers on one request — a proxy with
 * `forwardHeaders` in front of a wrapped route — answering with one set of headers that lists the
 * policies of both. (Built and started for real: apps/next's test.) Also: a `countWhen` that throws
 * serves the route's response, counted.
 */
import { MemoryStore, RateLimiter, fixedWindow, tokenBucket } from "@sluice/core";
import { checkHeadersAgreeWithBody, costOf, disagreement } from "@sluice/testing/agreement";
import { type NextFetchEvent, NextRequest, NextResponse } from "next/server";
import { describe, expect, it } from "vitest";
import { FORWARDED_HEADERS } from "./forward.js";
import { rateLimitProxy, withRateLimit } from "./index.js";

const T0 = 1_700_000_022_000;
const event = { waitUntil: () => {} } as unknown as NextFetchEvent;
const nextRequest = (request: Request) => new NextRequest(request.url, { headers: request.headers });

/** The request Next.js hands the route after the proxy: the proxy's request-header overrides applied. */
function upstream(request: NextRequest, proxied: Response): NextRequest {
  const overridden = proxied.headers.get("x-middleware-override-headers");
  if (overridden === null) return request;
  const headers = new Headers();
  for (const name of overridden.split(",")) {
    const value = proxied.headers.get(`x-middleware-request-${name.trim()}`);
    if (value !== null) headers.set(name.trim(), value);
  }
  return new NextRequest(request.url, { headers });
}

/** What Next.js sends: the proxy's response headers, then the route's where the proxy set none. */
function sent(proxied: Response, route: Response): Headers {
  const headers = new Headers();
  for (const [name, value] of proxied.headers) if (!name.startsWith("x-middleware-")) headers.set(name, value);
  for (const [name, value] of route.headers) if (!headers.has(name)) headers.set(name, value);
  return headers;
}

describe("headers agree with the body on every 429 (property)", () => {
  it("withRateLimit (route handler)", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const GET = withRateLimit(() => new Response("ok"), { limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf });
      return (request) => GET(nextRequest(request), {});
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("rateLimitProxy", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const proxy = rateLimitProxy({ limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf });
      return (request) => proxy(nextRequest(request), event);
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("a proxy with forwardHeaders in front of a wrapped route: what Next.js sends for the route's 429 agrees with its body", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const store = new MemoryStore({ clock });
      const proxy = rateLimitProxy({
        limiter: new RateLimiter({ store, prefix: "proxy", limits: fixedWindow({ limit: 100, window: "1m", name: "100-per-1m" }) }),
        key: () => "k",
        forwardHeaders: true,
      });
      const GET = withRateLimit(() => new Response("ok"), { limiter: new RateLimiter({ store, prefix: "route", limits }), key: () => "k", cost: costOf });
      return async (request) => {
        const first = nextRequest(request);
        const proxied = await proxy(first, event);
        if (proxied.headers.get("x-middleware-next") !== "1") return proxied;
        const route = await GET(upstream(first, proxied), {});
        return new Response(route.body, { status: route.status, headers: sent(proxied, route) });
      };
    });
    expect(checked).toBeGreaterThan(0);
  });
});

describe("two layers: rateLimitProxy({ forwardHeaders }) and withRateLimit", () => {
  const setUp = (forwardHeaders: boolean | ((request: NextRequest) => boolean)) => {
    const store = new MemoryStore({ clock: () => T0 });
    const proxy = rateLimitProxy({
      limiter: new RateLimiter({ store, prefix: "proxy", limits: fixedWindow({ limit: 100, window: "1m" }) }),
      key: () => "k",
      forwardHeaders,
    });
    const GET = withRateLimit(() => Response.json({ hello: "world" }), {
      limiter: new RateLimiter({ store, prefix: "route", limits: tokenBucket({ capacity: 2, refillRate: 1, name: "2-burst" }) }),
      key: () => "k",
    });
    return { proxy, GET };
  };

  it("the proxy writes nothing on its NextResponse.next() but hands its headers to the route, which answers with both layers' policies, its 429 too", async () => {
    const { proxy, GET } = setUp((request) => request.nextUrl.pathname === "/api/hello");
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const request = new NextRequest("https://app.test/api/hello");
      const proxied = await proxy(request, event);
      expect([proxied.headers.get("x-middleware-next"), proxied.headers.get("ratelimit")]).toEqual(["1", null]);
      const route = await GET(upstream(request, proxied), {});
      const headers = sent(proxied, route);
      seen.push([route.status, headers.get("ratelimit-policy"), headers.get("ratelimit"), headers.get("x-ratelimit-remaining"), headers.get("retry-after")]);
      if (route.status === 429) expect(disagreement(headers, await route.json())).toBeUndefined();
    }
    const policy = '"100-per-1m";q=100;w=60, "2-burst";q=2;w=2';
    expect(seen).toEqual([
      [200, policy, '"100-per-1m";r=99;t=18, "2-burst";r=1;t=1', "1", null],
      [200, policy, '"100-per-1m";r=98;t=18, "2-burst";r=0;t=1', "0", null],
      [429, policy, '"100-per-1m";r=97;t=18, "2-burst";r=0;t=1', "0", "1"],
    ]);
    // a path the function does not name: the proxy writes its headers as usual
    const other = await proxy(new NextRequest("https://app.test/api/other"), event);
    expect(other.headers.get("ratelimit")).toBe('"100-per-1m";r=96;t=18');
    expect(other.headers.get(`x-middleware-request-${FORWARDED_HEADERS}`)).toBeNull();
  });

  it("a client cannot smuggle headers through: the proxy strips what it sent; the route ignores a value no proxy writes", async () => {
    const { proxy, GET } = setUp(false);
    const spoofed = new NextRequest("https://app.test/api/hello", { headers: { [FORWARDED_HEADERS]: JSON.stringify([["RateLimit", '"fake";r=9;t=9']]) } });
    const proxied = await proxy(spoofed, event);
    expect(proxied.headers.get("ratelimit")).toBe('"100-per-1m";r=99;t=18');
    const passedOn = upstream(spoofed, proxied);
    expect(passedOn.headers.has(FORWARDED_HEADERS)).toBe(false);
    for (const junk of ["not json", JSON.stringify([["Set-Cookie", "a=1"]]), JSON.stringify([["RateLimit", "bad\u0007value"]]), JSON.stringify({ RateLimit: "x" })]) {
      const route = await GET(new NextRequest("https://app.test/api/hello", { headers: { [FORWARDED_HEADERS]: junk } }), {});
      expect([route.headers.get("set-cookie"), route.headers.get("ratelimit")?.startsWith('"2-burst"')]).toEqual([null, true]);
    }
  });

  it("options: forwardHeaders is validated, and is the proxy's alone", () => {
    const limiter = new RateLimiter({ limits: fixedWindow({ limit: 1, window: "1m" }) });
    expect(() => rateLimitProxy({ limiter, key: () => "k", forwardHeaders: "yes" as never })).toThrow(
      '[sluice] [next] forwardHeaders must be true, false or a function (request, event) => boolean; got "yes"',
    );
    expect(() => withRateLimit(() => new Response("ok"), { limiter, key: () => "k", forwardHeaders: true } as never)).toThrow(
      "[sluice] [next] forwardHeaders must be left out of withRateLimit: it is an option of rateLimitProxy (the proxy forwards, the route merges what it receives)",
    );
  });

  it("a user proxy's own response is not forwarded: it gets the headers", async () => {
    const store = new MemoryStore({ clock: () => T0 });
    const proxy = rateLimitProxy({
      limiter: new RateLimiter({ store, limits: fixedWindow({ limit: 100, window: "1m" }) }),
      key: () => "k",
      forwardHeaders: true,
      proxy: () => NextResponse.redirect("https://app.test/login"),
    });
    const response = await proxy(new NextRequest("https://app.test/api/hello"), event);
    expect([response.status, response.headers.get("ratelimit")]).toEqual([307, '"100-per-1m";r=99;t=18']);
  });
});

describe("withRateLimit: a countWhen that throws", () => {
  it("serves the route's response, counted; onCallbackError(request, context, error, \"countWhen\")", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 3, window: "1m" }) });
    const context = { params: Promise.resolve({}) };
    const reported: unknown[][] = [];
    const POST = withRateLimit(() => Response.json({ ok: true }), {
      limiter,
      key: () => "ip",
      countWhen: () => {
        throw new Error("down");
      },
      onCallbackError: (...args) => reported.push(args),
    });
    const request = new NextRequest("https://app.test/api/login", { method: "POST" });
    const response = await POST(request, context);
    expect([response.status, response.headers.get("ratelimit")]).toEqual([200, '"3-per-1m";r=2;t=18']);
    expect(reported).toEqual([[request, context, new Error("down"), "countWhen"]]);
    expect((await limiter.peek("ip")).remaining).toBe(2);
  });
});
