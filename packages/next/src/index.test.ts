import {
  type Decision,
  type LimitOptions,
  MemoryStore,
  type Policy,
  QUOTA_EXCEEDED_TITLE,
  QUOTA_EXCEEDED_TYPE,
  RateLimiter,
  SluiceConfigError,
  SluiceInputError,
  fixedWindow,
  leakyBucket,
} from "@sluice/core";
import { type NextFetchEvent, NextRequest, NextResponse } from "next/server";
import { afterEach, describe, expect, expectTypeOf, it, vi } from "vitest";
import {
  type RateLimitProxy,
  UNKNOWN_CLIENT_KEY,
  rateLimitMiddleware,
  rateLimitProxy,
  withRateLimit,
} from "./index.js";
import { twoPerMinute } from "@sluice/testing/headers";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

function limiterOf(limits: Policy | Policy[], clock: () => number = () => T0): RateLimiter {
  return new RateLimiter({ store: new MemoryStore({ clock }), limits });
}

function request(path = "/api/items", headers: Record<string, string> = {}, init: { method?: string } = {}): NextRequest {
  return new NextRequest(`https://app.test${path}`, { headers, ...init });
}

const byApiKey = (r: NextRequest) => r.headers.get("x-api-key") ?? "anonymous";

/** A limiter whose decisions carry background work, as analytics would: each its own `pending`. */
class PendingLimiter extends RateLimiter {
  readonly pendings: Promise<void>[] = [];
  override async limit(key: string, options?: LimitOptions): Promise<Decision> {
    const decision = await super.limit(key, options);
    const pending = new Promise<void>((resolve) => setTimeout(resolve, 1));
    this.pendings.push(pending);
    return { ...decision, pending };
  }
}

function pendingLimiterOf(limit: number): PendingLimiter {
  return new PendingLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit, window: "1m" }) });
}

const problem429 = {
  type: QUOTA_EXCEEDED_TYPE,
  title: QUOTA_EXCEEDED_TITLE,
  status: 429,
  detail: 'Quota of policy "2-per-1m" exceeded; retry after 18 seconds.',
  retryAfter: 18,
  "violated-policies": ["2-per-1m"],
};

function headersOf(response: Response, ...names: string[]): Record<string, string | null> {
  return Object.fromEntries(names.map((n) => [n, response.headers.get(n)]));
}

function rateLimitHeadersOf(response: Response): Record<string, string> {
  const names = new Set(["ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"]);
  return Object.fromEntries([...response.headers].filter(([name]) => names.has(name)));
}

afterEach(() => {
  vi.useRealTimers();
});

describe("rateLimitProxy", () => {
  it("allowed: NextResponse.next() with the exact rate-limit headers; denied: the problem+json 429", async () => {
    const proxy = rateLimitProxy({ limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })), key: byApiKey });
    for (const remaining of [1, 0]) {
      const response = await proxy(request("/api/items", { "x-api-key": "alice" }));
      expect(response).toBeInstanceOf(NextResponse);
      expect(response.status).toBe(200);
      // how Next.js recognises "continue to the route": the header NextResponse.next() sets
      expect(response.headers.get("x-middleware-next")).toBe("1");
      expect(rateLimitHeadersOf(response)).toEqual(twoPerMinute(remaining));
    }
    const denied = await proxy(request("/api/items", { "x-api-key": "alice" }));
    expect(denied).toBeInstanceOf(NextResponse);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("x-middleware-next")).toBeNull();
    expect(denied.headers.get("content-type")).toBe("application/problem+json");
    expect(rateLimitHeadersOf(denied)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
    expect(await denied.json()).toEqual(problem429);
    // another key has its own quota
    expect((await proxy(request("/api/items", { "x-api-key": "bob" }))).status).toBe(200);
  });

  it("rateLimitMiddleware is the same factory, for middleware.ts", () => {
    expect(rateLimitMiddleware).toBe(rateLimitProxy);
    expectTypeOf(rateLimitProxy).returns.toEqualTypeOf<RateLimitProxy>();
  });

  it("trust: 'vercel' keys by x-vercel-forwarded-for, and requests without it share the key 'unknown'", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
    const proxy = rateLimitProxy({ limiter, trust: "vercel" });
    expect((await proxy(request("/", { "x-vercel-forwarded-for": "203.0.113.7" }))).status).toBe(200);
    expect((await proxy(request("/", { "x-vercel-forwarded-for": "203.0.113.7" }))).status).toBe(429);
    expect((await proxy(request("/", { "x-vercel-forwarded-for": "203.0.113.8" }))).status).toBe(200);
    // X-Forwarded-For is written by the client: not believed with trust "vercel"
    expect((await proxy(request("/", { "x-forwarded-for": "198.51.100.1" }))).status).toBe(200);
    expect((await proxy(request("/", { "x-forwarded-for": "198.51.100.2" }))).status).toBe(429);
    expect((await limiter.peek(UNKNOWN_CLIENT_KEY)).remaining).toBe(0);
    expect((await limiter.peek("198.51.100.1")).remaining).toBe(1);
  });

  it("trust: 1 believes the rightmost X-Forwarded-For entry; IPv6 clients are keyed by their /64", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
    const proxy = rateLimitProxy({ limiter, trust: 1 });
    expect((await proxy(request("/", { "x-forwarded-for": "10.0.0.1, 2001:db8:1:2::1" }))).status).toBe(200);
    // a client-chosen first entry does not help; another host of the same /64 is the same client
    expect((await proxy(request("/", { "x-forwarded-for": "10.9.9.9, 2001:db8:1:2:ffff::9" }))).status).toBe(429);
    expect((await limiter.peek("2001:db8:1:2::/64")).remaining).toBe(0);
  });

  it("skip: no decision, no headers, the request continues", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
    const proxy = rateLimitProxy({ limiter, key: byApiKey, skip: (r) => r.nextUrl.pathname === "/api/health" });
    for (let i = 0; i < 3; i++) {
      const response = await proxy(request("/api/health"));
      expect(response.headers.get("x-middleware-next")).toBe("1");
      expect(rateLimitHeadersOf(response)).toEqual({});
    }
    expect((await limiter.peek("anonymous")).remaining).toBe(1);
  });

  it("cost: a function of the request", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 10, window: "1m" }));
    const proxy = rateLimitProxy({ limiter, key: byApiKey, cost: (r) => (r.method === "POST" ? 5 : 1) });
    expect((await proxy(request("/api/x", {}, { method: "POST" }))).headers.get("ratelimit")).toBe('"10-per-1m";r=5;t=18');
    expect((await proxy(request("/api/x"))).headers.get("ratelimit")).toBe('"10-per-1m";r=4;t=18');
  });

  it("tiers: each plan its own limits, looked up by key", async () => {
    const tier = vi.fn((_r: NextRequest, _event: NextFetchEvent, key: string) => (key.startsWith("pro_") ? "pro" : "free"));
    const proxy = rateLimitProxy({
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 3, window: "1m" }) },
      store: new MemoryStore({ clock: () => T0 }),
      key: byApiKey,
      tier,
    });
    const statuses = async (key: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await proxy(request("/api", { "x-api-key": key }))).status);
      return out;
    };
    expect(await statuses("free_1", 2)).toEqual([200, 429]);
    expect(await statuses("pro_1", 4)).toEqual([200, 200, 200, 429]);
    expect(tier).toHaveBeenCalledTimes(2); // cached per key
    expect(tier.mock.calls[0]?.[2]).toBe("free_1"); // Next's (request, event), then the key
    expect(tier.mock.calls[0]?.[1]).toHaveProperty("waitUntil");
  });

  it("onLimited: its response is returned with the rate-limit headers added", async () => {
    const onLimited = vi.fn((r: NextRequest, _event: NextFetchEvent, d: Decision) =>
      NextResponse.json({ error: "slow down", path: r.nextUrl.pathname, retryAfterMs: d.retryAfterMs }, { status: 429 }),
    );
    const proxy = rateLimitProxy({ limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })), key: byApiKey, onLimited });
    await proxy(request());
    await proxy(request());
    const denied = await proxy(request("/api/slow"));
    expect(denied.status).toBe(429);
    expect(await denied.json()).toEqual({ error: "slow down", path: "/api/slow", retryAfterMs: 18_000 });
    expect(rateLimitHeadersOf(denied)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
    expect(onLimited).toHaveBeenCalledTimes(1);
  });

  it("an onLimited Response with immutable headers (Response.redirect) is copied into a NextResponse", async () => {
    const proxy = rateLimitProxy({
      limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })),
      key: byApiKey,
      onLimited: () => Response.redirect("https://app.test/slow-down", 303),
    });
    await proxy(request());
    const denied = await proxy(request());
    expect(denied).toBeInstanceOf(NextResponse);
    expect(denied.status).toBe(303);
    expect(denied.headers.get("location")).toBe("https://app.test/slow-down");
    expect(denied.headers.get("retry-after")).toBe("18");
  });

  it("passes decision.pending to event.waitUntil", async () => {
    const waited: Promise<unknown>[] = [];
    const limiter = pendingLimiterOf(1);
    const proxy = rateLimitProxy({ limiter, key: byApiKey });
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++) {
      // next/server exports NextFetchEvent as a type only; Next.js passes its own
      const event = { waitUntil: (p: Promise<unknown>) => waited.push(p) } as unknown as NextFetchEvent;
      statuses.push((await proxy(request(), event)).status);
    }
    expect(statuses).toEqual([200, 429]);
    expect(waited).toEqual(limiter.pendings);
    expect(waited[1]).toBe(limiter.pendings[1]);
    // a decision without background work (the limiter's shared resolved pending) has nothing to hand off
    const plain: Promise<unknown>[] = [];
    const event = { waitUntil: (p: Promise<unknown>) => plain.push(p) } as unknown as NextFetchEvent;
    await rateLimitProxy({ limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey })(request(), event);
    expect(plain).toEqual([]);
  });

  it("without an event, decision.pending goes to the waitUntil option (the event wins when there is one)", async () => {
    const viaOption: Promise<unknown>[] = [];
    const viaEvent: Promise<unknown>[] = [];
    const limiter = pendingLimiterOf(5);
    const proxy = rateLimitProxy({ limiter, key: byApiKey, waitUntil: (p) => viaOption.push(p) });
    await proxy(request());
    await proxy(request(), { waitUntil: (p: Promise<unknown>) => viaEvent.push(p) } as unknown as NextFetchEvent);
    expect([viaOption.length, viaEvent.length]).toEqual([1, 1]);
    const GET = withRateLimit(() => new Response("ok"), { limiter, key: byApiKey, waitUntil: (p) => viaOption.push(p) });
    await GET(request(), undefined);
    expect(viaOption).toHaveLength(2);
    expect(() => rateLimitProxy({ limiter, key: byApiKey, waitUntil: "after" as never })).toThrow(/^\[sluice\] \[next\] waitUntil must be a function; got "after"$/);
    expect(() => withRateLimit(() => new Response("ok"), { limiter, key: byApiKey, waitUntil: 1 as never })).toThrow(
      expect.objectContaining({ code: "SLUICE_CONFIG", option: "waitUntil" }),
    );
  });

  it("a leakyBucket with a queue: the request waits delayMs before continuing", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout"] });
    const limiter = limiterOf(leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 1 }));
    const inner = vi.fn(() => undefined);
    const proxy = rateLimitProxy({ limiter, key: byApiKey, proxy: inner });
    await proxy(request());
    expect(inner).toHaveBeenCalledTimes(1);
    const second = proxy(request());
    await vi.advanceTimersByTimeAsync(99);
    expect(inner).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(inner).toHaveBeenCalledTimes(2);
    expect((await second).headers.get("x-middleware-next")).toBe("1");
  });

  describe("around an existing proxy", () => {
    it("runs it for allowed requests only, with the event, and adds the headers to its response", async () => {
      const inner = vi.fn((r: NextRequest, event: NextFetchEvent) => {
        // called without an event, the proxy gets a stand-in whose waitUntil works
        expect(event.sourcePage).toBe(r.nextUrl.pathname);
        event.waitUntil(Promise.resolve());
        return NextResponse.rewrite(new URL("/v2" + r.nextUrl.pathname, r.url));
      });
      const proxy = rateLimitProxy({ limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })), key: byApiKey, proxy: inner });
      const first = await proxy(request("/api/items"));
      expect(first.headers.get("x-middleware-rewrite")).toBe("https://app.test/v2/api/items");
      expect(rateLimitHeadersOf(first)).toEqual(twoPerMinute(1));
      await proxy(request("/api/items"));
      const denied = await proxy(request("/api/items"));
      expect(denied.status).toBe(429);
      expect(denied.headers.get("x-middleware-rewrite")).toBeNull();
      expect(inner).toHaveBeenCalledTimes(2);
    });

    it("nothing returned means NextResponse.next(); a plain Response.redirect is copied; its own headers win", async () => {
      const answers: Array<Response | undefined> = [
        undefined,
        Response.redirect("https://app.test/login", 307),
        NextResponse.json({ own: true }, { headers: { "X-RateLimit-Limit": "custom" } }),
      ];
      const proxy = rateLimitProxy({
        limiter: limiterOf(fixedWindow({ limit: 10, window: "1m" })),
        key: byApiKey,
        proxy: () => answers.shift(),
      });
      const next = await proxy(request());
      expect(next.headers.get("x-middleware-next")).toBe("1");
      expect(next.headers.get("x-ratelimit-remaining")).toBe("9");
      const redirect = await proxy(request());
      expect(headersOf(redirect, "location", "x-ratelimit-remaining")).toEqual({
        location: "https://app.test/login",
        "x-ratelimit-remaining": "8",
      });
      expect(redirect.status).toBe(307);
      const own = await proxy(request());
      expect(headersOf(own, "x-ratelimit-limit", "x-ratelimit-remaining")).toEqual({ "x-ratelimit-limit": "custom", "x-ratelimit-remaining": "7" });
      expect(await own.json()).toEqual({ own: true });
    });

    it("skipped requests still go through it, without headers", async () => {
      const proxy = rateLimitProxy({
        limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })),
        key: byApiKey,
        skip: () => true,
        proxy: () => NextResponse.json({ ok: true }),
      });
      const response = await proxy(request());
      expect(await response.json()).toEqual({ ok: true });
      expect(rateLimitHeadersOf(response)).toEqual({});
    });

    it("a proxy that returns something other than a response is an error naming it", async () => {
      const proxy = rateLimitProxy({
        limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" })),
        key: byApiKey,
        proxy: (() => "hello") as never,
      });
      await expect(proxy(request())).rejects.toThrow(/^\[sluice\] \[next\] proxy must return a Response, a NextResponse or nothing; got "hello"$/);
      await expect(proxy(request())).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "proxy" }));
    });

    it("a proxy or onLimited that answers a network error is an error naming it", async () => {
      const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
      const proxy = rateLimitProxy({ limiter, key: byApiKey, proxy: () => Response.error() });
      await expect(proxy(request())).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "proxy" }));
      const limited = rateLimitProxy({ limiter, key: byApiKey, onLimited: () => Response.error() });
      await expect(limited(request())).rejects.toThrow(/^\[sluice\] \[next\] onLimited must return a response with a status; got a network error/);
      await expect(limited(request())).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "onLimited" }));
    });
  });

  describe("configuration errors are thrown by the factory, naming the option", () => {
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
    const free = fixedWindow({ limit: 1, window: "1m" });
    // [label, options, message, option]: the options of rateLimitProxy (the pipeline's are core's, tagged [next])
    const cases: Array<[string, unknown, RegExp, string]> = [
      ["no options", undefined, /^\[sluice\] \[next\] options must be an object with limiter \(or tiers\) and key \(or trust\)/, "options"],
      ["neither key nor trust", { limiter }, /^\[sluice\] \[next\] key must be a function \(request, event\) => string, or give trust .*\(no header is trusted by default\); got undefined$/, "key"],
      ["key and trust", { limiter, key: byApiKey, trust: "vercel" }, /^\[sluice\] \[next\] trust must be left out when key is given/, "trust"],
      ["an unknown trust", { limiter, trust: "x-forwarded-for" }, /^\[sluice\] \[next\] trust must be "cloudflare", "vercel" or a positive integer/, "trust"],
      ["a bad ipv6Subnet", { limiter, trust: "vercel", ipv6Subnet: 0 }, /^\[sluice\] \[next\] ipv6Subnet must be an integer from 1 to 128/, "ipv6Subnet"],
      ["ipv6Subnet without trust", { limiter, key: byApiKey, ipv6Subnet: 48 }, /^\[sluice\] \[next\] ipv6Subnet must be left out without trust/, "ipv6Subnet"],
      ["no limiter", { key: byApiKey }, /^\[sluice\] \[next\] limiter must be a RateLimiter \(or give tiers\)/, "limiter"],
      ["limiter and tiers", { limiter, tiers: { free }, tier: () => "free", key: byApiKey }, /^\[sluice\] \[next\] tiers must be left out when limiter is given/, "tiers"],
      ["skip not a function", { limiter, key: byApiKey, skip: true }, /^\[sluice\] \[next\] skip must be a function; got true$/, "skip"],
      ["onLimited not a function", { limiter, key: byApiKey, onLimited: 429 }, /^\[sluice\] \[next\] onLimited must be a function; got 429$/, "onLimited"],
      ["onDecision not a function", { limiter, key: byApiKey, onDecision: "log" }, /^\[sluice\] \[next\] onDecision must be a function/, "onDecision"],
      ["countWhen not a function", { limiter, key: byApiKey, countWhen: true }, /^\[sluice\] \[next\] countWhen must be a function/, "countWhen"],
      ["onCallbackError not a function", { limiter, key: byApiKey, onCallbackError: 1 }, /^\[sluice\] \[next\] onCallbackError must be a function/, "onCallbackError"],
      ["a zero cost", { limiter, key: byApiKey, cost: 0 }, /^\[sluice\] \[next\] cost must be a positive safe integer or a function; got 0$/, "cost"],
      ["bad headers", { limiter, key: byApiKey, headers: ["ietf", "draft-7"] }, /headers must not hold both "ietf" and "draft-7", which both write the RateLimit header/, "headers"],
      ["bad partitionKey", { limiter, key: byApiKey, partitionKey: { salt: 1 } }, /^\[sluice\] \[next\] partitionKey must be/, "partitionKey"],
      ["bad dryRunHeaders", { limiter, key: byApiKey, dryRunHeaders: "yes" }, /^\[sluice\] \[next\] dryRunHeaders must be/, "dryRunHeaders"],
      ["tiers without tier", { tiers: { free }, key: byApiKey }, /^\[sluice\] \[next\] tier must be a function/, "tier"],
      ["a tier's policy", { tiers: { free: [free, 1] }, tier: () => "free", key: byApiKey }, /^\[sluice\] \[next\] tiers\.free\[1\] must be a policy/, "tiers.free[1]"],
      ["a tiered timeoutMs", { tiers: { free }, tier: () => "free", key: byApiKey, timeoutMs: -1 }, /^\[sluice\] \[next\] timeoutMs must be/, "timeoutMs"],
      ["proxy not a function", { limiter, key: byApiKey, proxy: "/login" }, /^\[sluice\] \[next\] proxy must be a function/, "proxy"],
      ["forwardHeaders", { limiter, key: byApiKey, forwardHeaders: "yes" }, /^\[sluice\] \[next\] forwardHeaders must be true, false or a function/, "forwardHeaders"],
      ["waitUntil", { limiter, key: byApiKey, waitUntil: "after" }, /^\[sluice\] \[next\] waitUntil must be a function/, "waitUntil"],
    ];
    for (const [name, options, message, option] of cases) {
      it(name, () => {
        expect(() => rateLimitProxy(options as never)).toThrow(SluiceConfigError);
        expect(() => rateLimitProxy(options as never)).toThrow(message);
        expect(() => rateLimitProxy(options as never)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
      });
    }
  });
});

describe("withRateLimit", () => {
  type Ctx = { params: Promise<{ team: string }> };
  const ctx = (team: string): Ctx => ({ params: Promise.resolve({ team }) });

  it("runs the handler with request and context, adds the headers; denied: the 429 without calling it", async () => {
    const handler = vi.fn(async (r: NextRequest, { params }: Ctx) => Response.json({ team: (await params).team, path: r.nextUrl.pathname }));
    const GET = withRateLimit(handler, {
      limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })),
      key: async (_r, { params }) => `team:${(await params).team}`,
    });
    for (const remaining of [1, 0]) {
      const response = await GET(request("/api/teams/red"), ctx("red"));
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ team: "red", path: "/api/teams/red" });
      expect(rateLimitHeadersOf(response)).toEqual(twoPerMinute(remaining));
    }
    const denied = await GET(request("/api/teams/red"), ctx("red"));
    expect(denied.status).toBe(429);
    expect(denied.headers.get("content-type")).toBe("application/problem+json");
    expect(rateLimitHeadersOf(denied)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
    expect(await denied.json()).toEqual(problem429);
    expect(handler).toHaveBeenCalledTimes(2);
    expect((await GET(request("/api/teams/blue"), ctx("blue"))).status).toBe(200);
    expect(handler).toHaveBeenCalledTimes(3);
  });

  it("the handler gets the decision as its last argument (undefined when skipped)", async () => {
    const seen: [NextRequest, Ctx | undefined, Decision | undefined][] = [];
    const GET = withRateLimit(
      (r: NextRequest, c: Ctx | undefined, decision: Decision | undefined) => {
        expectTypeOf(decision).toEqualTypeOf<Decision | undefined>();
        seen.push([r, c, decision]);
        return Response.json({ remaining: decision?.remaining ?? null });
      },
      { limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })), key: byApiKey, skip: (r) => r.nextUrl.pathname === "/health" },
    );
    const r = request();
    const c = ctx("red");
    expect(await (await GET(r, c)).json()).toEqual({ remaining: 1 });
    expect(seen[0]?.[0]).toBe(r);
    expect(seen[0]?.[1]).toBe(c);
    expect(seen[0]?.[2]).toMatchObject({ allowed: true, remaining: 1, limit: 2, policy: "2-per-1m", reason: "ok" });
    expect(await (await GET(request("/health"), c)).json()).toEqual({ remaining: null });
    expect(seen[1]?.[2]).toBeUndefined();
  });

  it("a handler response with immutable headers is copied; headers the handler set win", async () => {
    const responses = [
      () => Response.redirect("https://app.test/elsewhere", 302),
      () => new Response("own", { headers: { RateLimit: "mine" } }),
    ];
    const GET = withRateLimit(() => (responses.shift() as () => Response)(), {
      limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })),
      key: byApiKey,
    });
    const redirect = await GET(request(), undefined);
    expect(redirect.status).toBe(302);
    expect(headersOf(redirect, "location", "ratelimit")).toEqual({ location: "https://app.test/elsewhere", ratelimit: '"2-per-1m";r=1;t=18' });
    const own = await GET(request(), undefined);
    expect(own.headers.get("ratelimit")).toBe("mine");
    expect(own.headers.get("ratelimit-policy")).toBe('"2-per-1m";q=2;w=60');
    expect(await own.text()).toBe("own");
  });

  it("skip and cost receive (request, context); onLimited (request, context, decision)", async () => {
    const seen: string[] = [];
    const GET = withRateLimit(() => new Response("ok"), {
      limiter: limiterOf(fixedWindow({ limit: 3, window: "1m" })),
      key: byApiKey,
      skip: (_r, c: Ctx | undefined) => c === undefined,
      cost: async (_r, c) => ((await c?.params)?.team === "big" ? 3 : 1),
      onLimited: async (_r, c, d) => {
        seen.push(`${(await c?.params)?.team}:${d.remaining}`);
        return new Response("no", { status: 429 });
      },
    });
    expect(rateLimitHeadersOf(await GET(request(), undefined))).toEqual({});
    expect((await GET(request(), ctx("small"))).headers.get("x-ratelimit-remaining")).toBe("2");
    const denied = await GET(request(), ctx("big"));
    expect(denied.status).toBe(429);
    expect(denied.headers.get("x-ratelimit-remaining")).toBe("2");
    expect(seen).toEqual(["big:2"]);
  });

  it("draft-6 headers only, when asked", async () => {
    const GET = withRateLimit(() => new Response("ok"), {
      limiter: limiterOf(fixedWindow({ limit: 2, window: "1m" })),
      key: byApiKey,
      headers: "draft-6",
    });
    const response = await GET(request(), undefined);
    expect(Object.fromEntries([...response.headers].filter(([n]) => n.includes("ratelimit")))).toEqual({
      "ratelimit-limit": "2",
      "ratelimit-remaining": "1",
      "ratelimit-reset": "18",
    });
  });

  it.each([
    ["handler", () => withRateLimit("GET" as never, { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey }), /^\[sluice\] \[next\] handler must be the route handler/],
    ["key", () => withRateLimit(() => new Response(), { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })) } as never), /^\[sluice\] \[next\] key must be a function \(request, context\) => string/],
    ["proxy", () => withRateLimit(() => new Response(), { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey, proxy: () => undefined } as never), /^\[sluice\] \[next\] proxy must be left out of withRateLimit/],
    ["forwardHeaders", () => withRateLimit(() => new Response(), { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey, forwardHeaders: true } as never), /^\[sluice\] \[next\] forwardHeaders must be left out/],
    ["waitUntil", () => withRateLimit(() => new Response(), { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey, waitUntil: "after" as never }), /^\[sluice\] \[next\] waitUntil must be a function/],
    ["cost", () => withRateLimit(() => new Response(), { limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey, cost: -1 }), /^\[sluice\] \[next\] cost must be/],
    ["tiers.pro", () => withRateLimit(() => new Response(), { tiers: { pro: [] }, tier: () => "pro", key: byApiKey }), /^\[sluice\] \[next\] tiers\.pro must hold at least one policy/],
  ])("a bad %s is a SluiceConfigError naming it", (option, make, message) => {
    expect(make).toThrow(SluiceConfigError);
    expect(make).toThrow(message);
    expect(make).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("a handler that returns no Response is a SluiceInputError naming the response", async () => {
    const GET = withRateLimit((() => undefined) as never, { limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" })), key: byApiKey });
    const answered = GET(request(), undefined);
    await expect(answered).rejects.toThrow(SluiceInputError);
    await expect(answered).rejects.toThrow("[sluice] [next] response must be a Response (what the handler returns); got undefined");
    await expect(answered).rejects.toThrow(expect.objectContaining({ code: "SLUICE_INPUT", option: "response" }));
  });
});

describe("the callback convention: Next's own arguments first, in Next's order, then what Sluice adds", () => {
  const event = { waitUntil: () => {} } as unknown as NextFetchEvent;
  const context = { params: Promise.resolve({ team: "red" }) };
  type Options = Record<string, unknown>;
  const entries: [string, (options: Options) => (r: NextRequest) => Promise<Response>, unknown][] = [
    ["rateLimitProxy: (request, event)", (options) => (r) => rateLimitProxy(options as never)(r, event), event],
    ["withRateLimit: (request, context)", (options) => (r) => withRateLimit(() => new Response("ok", { status: 201 }), options as never)(r, context), context],
  ];

  it.each(entries)("%s; tier(..., key), countWhen(..., response, decision), onDecision(..., decision, info)", async (_name, wrap, extra) => {
    const calls: [string, unknown[]][] = [];
    const record =
      <T>(name: string, value: T) =>
      (...args: unknown[]) => {
        calls.push([name, args]);
        return value;
      };
    const call = wrap({
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }) },
      store: new MemoryStore({ clock: () => T0 }),
      key: record("key", "k"),
      skip: record("skip", false),
      cost: record("cost", 1),
      tier: record("tier", "free"),
      onLimited: record("onLimited", new Response("no", { status: 429 })),
      countWhen: record("countWhen", true),
      onDecision: record("onDecision", undefined),
    });
    const first = request();
    const response = await call(first);
    const decision = calls.find(([name]) => name === "onDecision")?.[1][2];
    expect(decision).toMatchObject({ allowed: true, reason: "ok" });
    expect(calls).toEqual([
      ["skip", [first, extra]],
      ["key", [first, extra]],
      ["tier", [first, extra, "k"]],
      ["cost", [first, extra]],
      ["onDecision", [first, extra, decision, expect.objectContaining({ tier: "free", route: "GET /api/items" })]],
      ["countWhen", [first, extra, expect.objectContaining({ status: response.status === 201 ? 201 : 200 }), decision]],
    ]);
    // the very objects Next.js passed
    for (const [, args] of calls) expect(args[1]).toBe(extra);
  });

  it.each(entries)("%s: onLimited gets (..., decision); onCallbackError (..., error, callback)", async (_name, wrap, extra) => {
    const onLimited = vi.fn(() => new Response("no", { status: 429 }));
    const onCallbackError = vi.fn();
    const failure = new Error("logger down");
    const call = wrap({
      limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })),
      key: byApiKey,
      onLimited,
      onDecision: () => {
        throw failure;
      },
      onCallbackError,
    });
    const first = request();
    await call(first);
    const second = request();
    expect((await call(second)).status).toBe(429);
    expect(onLimited.mock.calls).toEqual([[second, extra, expect.objectContaining({ allowed: false, reason: "limit" })]]);
    expect(onCallbackError.mock.calls).toEqual([
      [first, extra, failure, "onDecision"],
      [second, extra, failure, "onDecision"],
    ]);
  });
});

