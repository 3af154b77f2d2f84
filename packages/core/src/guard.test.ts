import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type GuardOptions,
  MemoryStore,
  type Policy,
  RateLimiter,
  SluiceConfigError,
  SluiceInputError,
  createGuard,
  fixedWindow,
  slidingWindow,
} from "./index.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

function fixedClock() {
  return new MemoryStore({ clock: () => T0 });
}

function limiterOf(limits: Policy | Policy[], store = fixedClock()) {
  return new RateLimiter({ store, limits });
}

function request(path = "/items", headers: Record<string, string> = {}): Request {
  return new Request(`https://api.test${path}`, { headers });
}

const byApiKey = (r: Request) => r.headers.get("x-api-key") ?? "anonymous";

describe("createGuard with a limiter", () => {
  it("allowed: the decision and the rate-limit headers, no response", async () => {
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 3, window: "1m" })), key: byApiKey });
    const { decision, headers, response } = await guard(request("/items", { "x-api-key": "k1" }));
    expect(decision).toMatchObject({ allowed: true, remaining: 2, reason: "ok", policy: "3-per-1m" });
    expect(response).toBeUndefined();
    expect(Object.fromEntries(headers)).toEqual({
      "ratelimit-policy": '"3-per-1m";q=3;w=60',
      ratelimit: '"3-per-1m";r=2;t=18',
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "2",
      "x-ratelimit-reset": "1700000040",
    });
  });

  it("denied: the 429 carries the rate-limit headers, and so does the result", async () => {
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: byApiKey });
    await guard(request());
    const { decision, headers, response } = await guard(request());
    expect(decision).toMatchObject({ allowed: false, reason: "limit", retryAfterMs: 18_000 });
    const rateLimitHeaders = {
      "retry-after": "18",
      ratelimit: '"1-per-1m";r=0;t=18',
      "ratelimit-policy": '"1-per-1m";q=1;w=60',
      "x-ratelimit-reset": "1700000040",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-limit": "1",
    };
    expect(Object.fromEntries(headers)).toEqual(rateLimitHeaders);
    expect(response?.status).toBe(429);
    expect(Object.fromEntries(response?.headers ?? [])).toEqual({ ...rateLimitHeaders, "content-type": "application/problem+json" });
    // keys are separate: another key still passes
    expect((await guard(request("/items", { "x-api-key": "other" }))).response).toBeUndefined();
  });

  it("skip: no key, no decision, no headers, nothing consumed", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1m" }));
    const key = vi.fn(byApiKey);
    const guard = createGuard({ limiter, key, skip: async (r) => new URL(r.url).pathname === "/health" });
    for (let i = 0; i < 3; i++) {
      const result = await guard(request("/health"));
      expect(result.decision).toBeUndefined();
      expect(result.response).toBeUndefined();
      expect([...result.headers]).toEqual([]);
    }
    expect(key).not.toHaveBeenCalled();
    expect((await limiter.peek("anonymous")).remaining).toBe(1);
    expect((await guard(request("/items"))).decision?.allowed).toBe(true);
    expect(key).toHaveBeenCalledTimes(1);
  });

  it("cost as a number", async () => {
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 10, window: "1m" })), key: () => "k", cost: 3 });
    expect((await guard(request())).decision?.remaining).toBe(7);
    expect((await guard(request())).decision?.remaining).toBe(4);
    expect((await guard(request())).decision?.remaining).toBe(1);
    const denied = await guard(request());
    expect(denied.decision).toMatchObject({ allowed: false, remaining: 1, reason: "limit" });
  });

  it("cost as a function of the request, sync or async", async () => {
    const limiter = limiterOf(fixedWindow({ limit: 10, window: "1m" }));
    const cost = vi.fn((r: Request) => Number(r.headers.get("x-cost") ?? "1"));
    const guard = createGuard({ limiter, key: () => "k", cost });
    const r = request("/bulk", { "x-cost": "4" });
    expect((await guard(r)).decision?.remaining).toBe(6);
    expect(cost).toHaveBeenCalledWith(r);
    const asyncGuard = createGuard({ limiter, key: () => "k", cost: async () => 5 });
    expect((await asyncGuard(request())).decision?.remaining).toBe(1);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2", undefined])(
    "a cost function returning %j rejects with SluiceInputError and consumes nothing",
    async (bad) => {
      const limiter = limiterOf(fixedWindow({ limit: 10, window: "1m" }));
      const guard = createGuard({ limiter, key: () => "k", cost: () => bad as number });
      await expect(guard(request())).rejects.toThrow(SluiceInputError);
      await expect(guard(request())).rejects.toThrow(/^\[sluice\] cost must be a positive safe integer; got /);
      expect((await limiter.peek("k")).remaining).toBe(10);
    },
  );

  it("onLimited: called only on denial with (request, decision); its response gets the headers it lacks", async () => {
    const onLimited = vi.fn(
      async () => new Response("slow down", { status: 503, headers: { "Retry-After": "99", "X-Custom": "yes" } }),
    );
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: () => "k", onLimited, headers: "draft-6" });
    expect((await guard(request())).response).toBeUndefined();
    expect(onLimited).not.toHaveBeenCalled();
    const r = request();
    const { decision, response } = await guard(r);
    expect(onLimited).toHaveBeenCalledTimes(1);
    expect(onLimited).toHaveBeenCalledWith(r, decision);
    expect(response?.status).toBe(503);
    expect(await response?.text()).toBe("slow down");
    expect(Object.fromEntries(response?.headers ?? [])).toEqual({
      "content-type": "text/plain;charset=UTF-8",
      "retry-after": "99", // the handler's own value wins
      "x-custom": "yes",
      "ratelimit-limit": "1",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "18",
    });
  });

  it("onLimited returning a response with immutable headers (Response.redirect): a copy with the headers", async () => {
    const redirect = Response.redirect("https://api.test/too-many", 303);
    expect(() => redirect.headers.set("x", "1")).toThrow(TypeError); // immutable, the case under test
    const guard = createGuard({
      limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })),
      key: () => "k",
      headers: "legacy",
      onLimited: () => redirect,
    });
    await guard(request());
    const { response } = await guard(request());
    expect(response).not.toBe(redirect);
    expect(response?.status).toBe(303);
    expect(Object.fromEntries(response?.headers ?? [])).toEqual({
      location: "https://api.test/too-many",
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "1700000040",
      "retry-after": "18",
    });
  });

  it("onLimited returning Response.error(): returned unchanged (a network error carries no headers)", async () => {
    const error = Response.error();
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: () => "k", onLimited: () => error });
    await guard(request());
    const { response, headers } = await guard(request());
    expect(response).toBe(error);
    expect(headers.get("retry-after")).toBe("18");
  });

  it("onLimited returning something that is not a Response: SluiceConfigError", async () => {
    const guard = createGuard({
      limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })),
      key: () => "k",
      onLimited: () => "nope" as unknown as Response,
    });
    await guard(request());
    await expect(guard(request())).rejects.toThrow('[sluice] onLimited must return a Response; got "nope"');
    await expect(guard(request())).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "onLimited" }));
  });

  it("headers: false writes no rate-limit headers; a denial still says Retry-After", async () => {
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 1, window: "1m" })), key: () => "k", headers: false });
    const allowed = await guard(request());
    expect([...allowed.headers]).toEqual([]);
    const denied = await guard(request());
    expect(Object.fromEntries(denied.headers)).toEqual({ "retry-after": "18" });
    expect(Object.fromEntries(denied.response?.headers ?? [])).toEqual({
      "content-type": "application/problem+json",
      "retry-after": "18",
    });
  });

  it("writes the chosen styles only", async () => {
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" })), key: () => "k", headers: ["draft-7"] });
    expect(Object.fromEntries((await guard(request())).headers)).toEqual({
      ratelimit: "limit=5, remaining=4, reset=18",
      "ratelimit-policy": "5;w=60",
    });
  });

  it.each([[""], [42], [undefined], [null], [["k"]]])("a key function returning %j rejects with SluiceInputError", async (bad) => {
    const store = fixedClock();
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" }), store), key: () => bad as string });
    await expect(guard(request())).rejects.toThrow(SluiceInputError);
    await expect(guard(request())).rejects.toThrow(/^\[sluice\] key must be a non-empty string; got /);
    const asyncGuard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" }), store), key: async () => bad as string });
    await expect(asyncGuard(request())).rejects.toThrow(SluiceInputError);
    expect(store.size).toBe(0);
  });

  it("an error thrown by the key function propagates as is", async () => {
    const boom = new Error("no session");
    const guard = createGuard({ limiter: limiterOf(fixedWindow({ limit: 5, window: "1m" })), key: () => {
      throw boom;
    } });
    await expect(guard(request())).rejects.toBe(boom);
  });
});

describe("createGuard configuration errors (at creation)", () => {
  const limiter = limiterOf(fixedWindow({ limit: 5, window: "1m" }));
  const free = fixedWindow({ limit: 5, window: "1m" });
  // [label, options, message, option]: each option of createGuard, refused with its path
  const cases: [string, unknown, string | RegExp, string][] = [
    ["no options", undefined, "[sluice] options must be an object with limiter (or tiers) and key (or trust); got undefined", "options"],
    [
      "missing key",
      { limiter },
      '[sluice] key must be a function (request) => string, or give trust ("cloudflare", "vercel" or a number of trusted proxies) to key requests by client address (no header is trusted by default); got undefined',
      "key",
    ],
    ["key not a function", { limiter, key: "x-api-key" }, /^\[sluice\] key must be a function .*; got "x-api-key"$/, "key"],
    [
      "key and trust",
      { limiter, key: byApiKey, trust: "cloudflare" },
      "[sluice] trust must be left out when key is given: give key or trust, not both (trust keys requests by client address)",
      "trust",
    ],
    ["bad trust", { limiter, trust: "x-forwarded-for" }, /^\[sluice\] trust must be "cloudflare", "vercel" or a positive integer/, "trust"],
    ["bad ipv6Subnet", { limiter, trust: "cloudflare", ipv6Subnet: 0 }, "[sluice] ipv6Subnet must be an integer from 1 to 128; got 0", "ipv6Subnet"],
    ["ipv6Subnet without trust", { limiter, key: byApiKey, ipv6Subnet: 48 }, /^\[sluice\] ipv6Subnet must be left out without trust/, "ipv6Subnet"],
    ["cost 0", { limiter, key: byApiKey, cost: 0 }, "[sluice] cost must be a positive safe integer or a function; got 0", "cost"],
    ["cost -1", { limiter, key: byApiKey, cost: -1 }, /cost must be a positive safe integer or a function; got -1$/, "cost"],
    ["cost 1.5", { limiter, key: byApiKey, cost: 1.5 }, /cost must be .*; got 1\.5$/, "cost"],
    ["cost NaN", { limiter, key: byApiKey, cost: Number.NaN }, /cost must be .*; got NaN$/, "cost"],
    ["cost '1'", { limiter, key: byApiKey, cost: "1" }, /cost must be .*; got "1"$/, "cost"],
    ["bad header style", { limiter, key: byApiKey, headers: "draft-8" }, /^\[sluice\] headers must be "ietf", "draft-7", "draft-6", "legacy".*got "draft-8"$/, "headers"],
    ["headers true", { limiter, key: byApiKey, headers: true }, /headers must be .*got true$/, "headers"],
    ["a bad style in a list", { limiter, key: byApiKey, headers: ["ietf", "draft-8"] }, /^\[sluice\] headers\[1\] must be "ietf", .*; got "draft-8"$/, "headers[1]"],
    ["ietf with draft-7", { limiter, key: byApiKey, headers: ["ietf", "draft-7"] }, /"ietf" and "draft-7", which both write the RateLimit header/, "headers"],
    ["partitionKey", { limiter, key: byApiKey, partitionKey: "salt" }, '[sluice] partitionKey must be true, false or { salt: string }; got "salt"', "partitionKey"],
    ["dryRunHeaders", { limiter, key: byApiKey, dryRunHeaders: 1 }, "[sluice] dryRunHeaders must be true or false; got 1", "dryRunHeaders"],
    ["skip not a function", { limiter, key: byApiKey, skip: true }, "[sluice] skip must be a function; got true", "skip"],
    ["onLimited not a function", { limiter, key: byApiKey, onLimited: 429 }, "[sluice] onLimited must be a function; got 429", "onLimited"],
    ["onDecision not a function", { limiter, key: byApiKey, onDecision: {} }, "[sluice] onDecision must be a function; got an object", "onDecision"],
    ["countWhen not a function", { limiter, key: byApiKey, countWhen: "4xx" }, '[sluice] countWhen must be a function; got "4xx"', "countWhen"],
    ["onCallbackError not a function", { limiter, key: byApiKey, onCallbackError: null }, "[sluice] onCallbackError must be a function; got null", "onCallbackError"],
    ["neither limiter nor tiers", { key: byApiKey }, "[sluice] limiter must be a RateLimiter (or give tiers); got undefined", "limiter"],
    ["limiter not a RateLimiter", { limiter: { limit() {} }, key: byApiKey }, /^\[sluice\] limiter must be a RateLimiter \(or give tiers\); got an object$/, "limiter"],
    [
      "limiter and tiers",
      { limiter, tiers: { free }, tier: () => "free", key: byApiKey },
      "[sluice] tiers must be left out when limiter is given: give limiter or tiers, not both",
      "tiers",
    ],
  ];
  it.each(cases)("%s", (_name, options, message, option) => {
    expect(() => createGuard(options as GuardOptions)).toThrow(SluiceConfigError);
    expect(() => createGuard(options as GuardOptions)).toThrow(message);
    expect(() => createGuard(options as GuardOptions)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });
});

describe("tiers", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const planOf = (r: Request) => r.headers.get("x-plan") ?? "free";

  it("each tier counts in its own namespace: the same key in free and pro counts separately", async () => {
    const store = fixedClock();
    const same = fixedWindow({ limit: 2, window: "1m" });
    const guard = createGuard({
      store,
      tiers: { free: same, pro: [same] },
      tier: planOf,
      tierCacheTtlMs: 0,
      key: () => "user-1",
    });
    const free = () => guard(request("/", { "x-plan": "free" }));
    const pro = () => guard(request("/", { "x-plan": "pro" }));
    expect((await free()).decision?.remaining).toBe(1);
    expect((await free()).decision?.remaining).toBe(0);
    expect((await free()).response?.status).toBe(429);
    expect((await pro()).decision).toMatchObject({ allowed: true, remaining: 1 });
    // tier t lives in the namespace { prefix, tier: t } of the shared store, apart from a plain limiter's
    expect((await new RateLimiter({ store, tier: "pro", limits: same }).peek("user-1")).remaining).toBe(1);
    expect((await new RateLimiter({ store, tier: "free", limits: same }).peek("user-1")).remaining).toBe(0);
    expect((await new RateLimiter({ store, limits: same }).peek("user-1")).remaining).toBe(2);
    expect((await new RateLimiter({ store, prefix: "sluice:free", limits: same }).peek("user-1")).remaining).toBe(2);
  });

  it("writes the headers of the request's tier", async () => {
    const guard = createGuard({
      store: fixedClock(),
      prefix: "api",
      tiers: { free: slidingWindow({ limit: 30, window: "1m" }), pro: slidingWindow({ limit: 300, window: "1m", name: "pro" }) },
      tier: planOf,
      key: byApiKey,
    });
    const pro = await guard(request("/", { "x-plan": "pro", "x-api-key": "a" }));
    expect(pro.headers.get("ratelimit-policy")).toBe('"pro";q=300;w=60');
    expect(pro.headers.get("ratelimit")).toBe('"pro";r=299;t=78'); // sliding: gone at the start of window idx+2
    const free = await guard(request("/", { "x-api-key": "b" }));
    expect(free.headers.get("ratelimit-policy")).toBe('"30-per-1m";q=30;w=60');
  });

  it("calls the resolver once per key within tierCacheTtlMs, and again once it expires", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const tier = vi.fn((_r: Request, _key: string) => "pro");
    const guard = createGuard({
      tiers: { free: fixedWindow({ limit: 10, window: "1h" }), pro: fixedWindow({ limit: 100, window: "1h" }) },
      tier,
      tierCacheTtlMs: 1000,
      key: byApiKey,
    });
    const a = request("/", { "x-api-key": "a" });
    await guard(a);
    expect(tier).toHaveBeenCalledTimes(1);
    expect(tier).toHaveBeenLastCalledWith(a, "a");
    vi.setSystemTime(T0 + 999);
    const again = await guard(request("/", { "x-api-key": "a" }));
    expect(again.decision).toMatchObject({ limit: 100, remaining: 98 });
    expect(tier).toHaveBeenCalledTimes(1);
    await guard(request("/", { "x-api-key": "b" })); // another key: its own lookup
    expect(tier).toHaveBeenCalledTimes(2);
    expect(tier).toHaveBeenLastCalledWith(expect.any(Request), "b");
    vi.setSystemTime(T0 + 1000); // a's entry has expired
    await guard(request("/", { "x-api-key": "a" }));
    expect(tier).toHaveBeenCalledTimes(3);
    await guard(request("/", { "x-api-key": "a" }));
    expect(tier).toHaveBeenCalledTimes(3);
  });

  it("defaults tierCacheTtlMs to 300_000", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const tier = vi.fn(() => "free");
    const guard = createGuard({ tiers: { free: fixedWindow({ limit: 10, window: "1h" }) }, tier, key: () => "k" });
    await guard(request());
    vi.setSystemTime(T0 + 299_999);
    await guard(request());
    expect(tier).toHaveBeenCalledTimes(1);
    vi.setSystemTime(T0 + 300_000);
    await guard(request());
    expect(tier).toHaveBeenCalledTimes(2);
  });

  it("concurrent requests for one key share one resolver call", async () => {
    let answer: (tier: string) => void = () => {};
    const tier = vi.fn(() => new Promise<string>((resolve) => (answer = resolve)));
    const guard = createGuard({
      store: fixedClock(),
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) },
      tier,
      key: () => "k",
    });
    const inFlight = [guard(request()), guard(request()), guard(request())];
    await new Promise((resolve) => setImmediate(resolve)); // every microtask has run: all three wait on the resolver
    expect(tier).toHaveBeenCalledTimes(1);
    answer("pro");
    const results = await Promise.all(inFlight);
    expect(results.map((r) => r.decision?.remaining).sort()).toEqual([2, 3, 4]);
    expect(results.every((r) => r.decision?.limit === 5)).toBe(true);
    await guard(request());
    expect(tier).toHaveBeenCalledTimes(1);
  });

  it("a rejected resolver is not cached", async () => {
    const down = new Error("database down");
    const tier = vi.fn().mockRejectedValueOnce(down).mockResolvedValue("free");
    const guard = createGuard({ tiers: { free: fixedWindow({ limit: 10, window: "1h" }) }, tier, key: () => "k" });
    await expect(guard(request())).rejects.toBe(down);
    expect((await guard(request())).decision?.allowed).toBe(true);
    expect((await guard(request())).decision?.allowed).toBe(true);
    expect(tier).toHaveBeenCalledTimes(2);
  });

  it("a resolver that throws synchronously is not cached either", async () => {
    let calls = 0;
    const guard = createGuard({
      tiers: { free: fixedWindow({ limit: 10, window: "1h" }) },
      tier: () => {
        calls++;
        if (calls === 1) throw new Error("bad lookup");
        return "free";
      },
      key: () => "k",
    });
    await expect(guard(request())).rejects.toThrow("bad lookup");
    expect((await guard(request())).decision?.allowed).toBe(true);
    await guard(request());
    expect(calls).toBe(2);
  });

  it("tierCacheTtlMs: 0 calls the resolver on every request", async () => {
    const tier = vi.fn(async () => "free");
    const guard = createGuard({ tiers: { free: fixedWindow({ limit: 10, window: "1h" }) }, tier, tierCacheTtlMs: 0, key: () => "k" });
    for (let i = 0; i < 4; i++) await guard(request());
    expect(tier).toHaveBeenCalledTimes(4);
  });

  it("tierCacheMaxKeys bounds the cache: the oldest key is looked up again", async () => {
    const tier = vi.fn((_r: Request, _key: string) => "free");
    const guard = createGuard({
      tiers: { free: fixedWindow({ limit: 10, window: "1h" }) },
      tier,
      tierCacheMaxKeys: 2,
      key: byApiKey,
    });
    for (const k of ["a", "b", "c", "b", "c"]) await guard(request("/", { "x-api-key": k }));
    expect(tier.mock.calls.map((call) => call[1])).toEqual(["a", "b", "c"]);
    await guard(request("/", { "x-api-key": "a" }));
    expect(tier.mock.calls.map((call) => call[1])).toEqual(["a", "b", "c", "a"]);
  });

  it("an unknown tier name is a SluiceConfigError at the first request, naming it and the known tiers", async () => {
    const store = fixedClock();
    const tier = vi.fn().mockResolvedValueOnce("gold").mockReturnValueOnce("gold").mockReturnValue("pro");
    const guard = createGuard({
      store,
      tiers: { free: fixedWindow({ limit: 10, window: "1h" }), pro: fixedWindow({ limit: 100, window: "1h" }) },
      tier,
      key: () => "k",
    });
    const first = guard(request());
    await expect(first).rejects.toThrow(SluiceConfigError);
    await expect(first).rejects.toThrow('[sluice] tier must return a configured tier (free, pro); got "gold"');
    await expect(first).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "tier" }));
    await expect(guard(request())).rejects.toThrow('tier must return a configured tier (free, pro); got "gold"'); // not cached: asked again
    expect(store.size).toBe(0); // nothing consumed anywhere
    expect((await guard(request())).decision?.limit).toBe(100);
    expect(tier).toHaveBeenCalledTimes(3);
  });

  it.each([[undefined], [null], [42], [""]])("a resolver answering %j is a SluiceConfigError, not a crash", async (answer) => {
    const guard = createGuard({ tiers: { free: fixedWindow({ limit: 10, window: "1h" }) }, tier: () => answer as string, key: () => "k" });
    await expect(guard(request())).rejects.toThrow(SluiceConfigError);
    await expect(guard(request())).rejects.toThrow(/^\[sluice\] tier must return a configured tier \(free\); got .*$/);
  });

  const ok = fixedWindow({ limit: 10, window: "1h" });
  // [label, options over a valid tiered guard, message, option]
  const tierCases: [string, Record<string, unknown>, string | RegExp, string][] = [
    ["no tiers", { tiers: {} }, "[sluice] tiers must be an object of tier name → limits with at least one tier; got an object", "tiers"],
    ["tiers as an array", { tiers: [ok] }, /tiers must be an object .*; got an array$/, "tiers"],
    ["tiers as a string", { tiers: "free" }, /tiers must be an object .*; got "free"$/, "tiers"],
    ["an empty tier", { tiers: { free: [] } }, "[sluice] tiers.free must hold at least one policy; got an empty array", "tiers.free"],
    ["a tier that is not a policy", { tiers: { free: ok, pro: "x" } }, /^\[sluice\] tiers\.pro must be a policy from .* or a list of them; got "x"$/, "tiers.pro"],
    ["a list with a non-policy", { tiers: { free: [ok, { limit: 5 }] } }, /^\[sluice\] tiers\.free\[1\] must be a policy from .*; got an object$/, "tiers.free[1]"],
    ["the object form without limits", { tiers: { free: { mode: "dry-run" } } }, /^\[sluice\] tiers\.free\.limits must be a policy from .*; got undefined$/, "tiers.free.limits"],
    ["the object form with a non-policy", { tiers: { pro: { limits: [ok, 5] } } }, /^\[sluice\] tiers\.pro\.limits\[1\] must be a policy .*; got 5$/, "tiers.pro.limits[1]"],
    ["the object form's mode", { tiers: { pro: { limits: ok, mode: "off" } } }, '[sluice] tiers.pro.mode must be "enforce" or "dry-run"; got "off"', "tiers.pro.mode"],
    ["the object form's unknown option", { tiers: { pro: { limits: ok, dryRun: true } } }, "[sluice] tiers.pro.dryRun is not an option: a tier takes limits and mode", "tiers.pro.dryRun"],
    ["a bad tier name", { tiers: { "free plan": ok } }, '[sluice] tiers must be keyed by valid tier names (the rules of a policy name); got a tier named "free plan"', "tiers"],
    [
      "duplicate names in a tier",
      { tiers: { pro: [ok, fixedWindow({ limit: 10, window: "1h" })] } },
      "[sluice] tiers.pro[1].name must differ from the other policies' names (give one a distinct name option); got \"10-per-1h\" twice",
      "tiers.pro[1].name",
    ],
    ["no tier function", { tier: undefined }, "[sluice] tier must be a function; got undefined", "tier"],
    ["tier not a function", { tier: "free" }, '[sluice] tier must be a function; got "free"', "tier"],
    ["negative tierCacheTtlMs", { tierCacheTtlMs: -1 }, "[sluice] tierCacheTtlMs must be a non-negative integer of milliseconds; got -1", "tierCacheTtlMs"],
    ["fractional tierCacheTtlMs", { tierCacheTtlMs: 1.5 }, /tierCacheTtlMs must be .*; got 1\.5$/, "tierCacheTtlMs"],
    ["string tierCacheTtlMs", { tierCacheTtlMs: "5m" }, /tierCacheTtlMs must be .*; got "5m"$/, "tierCacheTtlMs"],
    ["zero tierCacheMaxKeys", { tierCacheMaxKeys: 0 }, "[sluice] tierCacheMaxKeys must be a positive integer; got 0", "tierCacheMaxKeys"],
    ["bad prefix", { prefix: "my api" }, /^\[sluice\] prefix must be 1-128 visible ASCII characters .*got "my api"$/, "prefix"],
    ["a store without bind", { store: {} }, "[sluice] store must be a Store (an object with bind(namespace)); got an object", "store"],
    ["bad mode", { mode: "shadow" }, '[sluice] mode must be "enforce" or "dry-run"; got "shadow"', "mode"],
    ["bad denyCache", { denyCache: { maxKeys: 0 } }, "[sluice] denyCache.maxKeys must be a positive integer; got 0", "denyCache.maxKeys"],
    ["bad onStoreError", { onStoreError: "maybe" }, /^\[sluice\] onStoreError must be "fallback", "allow" or "deny"; got "maybe"$/, "onStoreError"],
    ["bad onStoreFailure", { onStoreFailure: "log" }, '[sluice] onStoreFailure must be a function; got "log"', "onStoreFailure"],
    ["bad timeoutMs", { timeoutMs: 0 }, /^\[sluice\] timeoutMs must be a positive integer of milliseconds.*; got 0$/, "timeoutMs"],
  ];
  it.each(tierCases)("invalid tier configuration at creation: %s", (_name, override, message, option) => {
    const options = { tiers: { free: ok }, tier: () => "free", key: () => "k", ...override };
    expect(() => createGuard(options as unknown as GuardOptions)).toThrow(SluiceConfigError);
    expect(() => createGuard(options as unknown as GuardOptions)).toThrow(message);
    expect(() => createGuard(options as unknown as GuardOptions)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });
});
