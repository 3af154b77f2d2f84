import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type Decision,
  type LimitOptions,
  MemoryStore,
  RateLimiter,
  SluiceConfigError,
  SluiceInputError,
  fixedWindow,
  leakyBucket,
} from "./index.js";
import { type PipelineOptions, type Platform, createPipeline } from "./adapter.js";
import type { RefundCharge } from "./types.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later. */
const T0 = 1_700_000_022_000;

/** A framework whose handlers get `(request, env, ctx)`, like a module Worker. */
interface Env {
  plan: string;
}
interface Ctx {
  waited: Promise<unknown>[];
}
type Args = [request: Request, env: Env, ctx: Ctx];

const platform: Platform<Args> = {
  where: "frame",
  tag: "frame",
  params: "request, env, ctx",
  request: (request) => request,
  waitUntil: (_request, _env, ctx) => (promise) => ctx.waited.push(promise),
};

function limiterOf(limit: number) {
  return new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit, window: "1m" }) });
}

function args(headers: Record<string, string> = {}): Args {
  return [new Request("https://api.test/items", { headers }), { plan: "pro" }, { waited: [] }];
}

/** A limiter whose decisions carry background work, as analytics would. */
class PendingLimiter extends RateLimiter {
  readonly pendings: Promise<void>[] = [];
  finished = 0;
  /** Lets every background work, made or to be made, finish (the test decides when). */
  finish: () => void = () => {};
  readonly #finishing = new Promise<void>((resolve) => (this.finish = resolve));
  override async limit(key: string, options?: LimitOptions): Promise<Decision> {
    const decision = await super.limit(key, options);
    const pending = this.#finishing.then(() => {
      this.finished++;
    });
    this.pendings.push(pending);
    return { ...decision, pending };
  }
}

afterEach(() => {
  vi.useRealTimers();
});

describe("the callback convention: the framework's arguments first, then key, then decision", () => {
  it("key, skip and cost get the framework's arguments; onLimited gets them and then the decision", async () => {
    const key = vi.fn((..._args: Args) => "k");
    const skip = vi.fn((..._args: Args) => false);
    const cost = vi.fn((..._args: Args) => 1);
    const onLimited = vi.fn((..._args: [...Args, Decision]) => new Response("no", { status: 429 }));
    const pipeline = createPipeline<Args>({ limiter: limiterOf(1), key, skip, cost, onLimited }, platform);
    const first = args();
    const second = args();
    await pipeline.check(...first);
    const { decision } = await pipeline.check(...second);
    expect([skip.mock.calls, key.mock.calls, cost.mock.calls]).toEqual([
      [first, second],
      [first, second],
      [first, second],
    ]);
    expect(onLimited.mock.calls).toEqual([[...second, decision]]);
    expect(onLimited.mock.calls[0]?.[3]).toBe(decision);
    // in this order: skip, key, cost, then onLimited
    const order = [skip, key, cost].map((fn) => fn.mock.invocationCallOrder[1] as number);
    expect([...order].sort((x, y) => x - y)).toEqual(order);
    expect(onLimited.mock.invocationCallOrder[0]).toBeGreaterThan(order[2] as number);
  });

  it("tier gets the framework's arguments, then the key", async () => {
    const tier = vi.fn((_request: Request, env: Env, _ctx: Ctx, _key: string) => env.plan);
    const pipeline = createPipeline<Args>(
      { tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 5, window: "1m" }) }, tier, key: () => "user-1" },
      platform,
    );
    const call = args();
    const outcome = await pipeline.check(...call);
    expect(tier).toHaveBeenCalledWith(...call, "user-1");
    expect(outcome.key).toBe("user-1");
    expect(outcome.limiter?.tier).toBe("pro");
    expect(outcome.decision?.limit).toBe(5);
  });
});

describe("check", () => {
  it("hands decision.pending to the platform's waitUntil without waiting for it, allowed or denied", async () => {
    const limiter = new PendingLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    const pipeline = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const allowed = args();
    const denied = args();
    const outcomes = [await pipeline.check(...allowed), await pipeline.check(...denied)];
    expect(outcomes.map((o) => o.decision?.allowed)).toEqual([true, false]);
    expect(allowed[2].waited).toEqual([limiter.pendings[0]]);
    expect(denied[2].waited).toEqual([limiter.pendings[1]]);
    expect(limiter.finished).toBe(0); // handed off, not awaited
    limiter.finish();
    await Promise.all(limiter.pendings);
    expect(limiter.finished).toBe(2);
  });

  it("a decision without background work (the limiter's shared resolved pending) asks the platform nothing", async () => {
    const waitUntil = vi.fn(() => () => {});
    const pipeline = createPipeline<Args>({ limiter: limiterOf(1), key: () => "k" }, { ...platform, waitUntil });
    await pipeline.check(...args());
    await pipeline.check(...args());
    expect(waitUntil).not.toHaveBeenCalled();
  });

  it("without a waitUntil for the request, decision.pending is awaited before check resolves", async () => {
    const limiter = new PendingLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    const pipeline = createPipeline<Args>({ limiter, key: () => "k" }, { ...platform, waitUntil: () => undefined });
    let checked = false;
    const checking = pipeline.check(...args()).then(() => (checked = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect([checked, limiter.finished]).toEqual([false, 0]); // waiting for the background work
    limiter.finish();
    await checking;
    expect(limiter.finished).toBe(1);
    const noHook = createPipeline<Args>({ limiter, key: () => "k2" }, { where: "frame", request: (request) => request });
    await noHook.check(...args());
    expect(limiter.finished).toBe(2);
  });

  it("trust reads the address from the platform's request; without one the key is \"unknown\"", async () => {
    const limiter = limiterOf(5);
    const pipeline = createPipeline<Args>({ limiter, trust: "cloudflare" }, platform);
    expect((await pipeline.check(...args({ "cf-connecting-ip": "2001:db8::1" }))).key).toBe("2001:db8::/64");
    expect((await pipeline.check(...args({ "x-forwarded-for": "203.0.113.9" }))).key).toBe("unknown");
  });

  it("headers as [name, value] pairs; the 429 carries them; skip gives none", async () => {
    const pipeline = createPipeline<Args>(
      { limiter: limiterOf(1), key: () => "k", headers: "draft-6", skip: (request) => request.headers.has("x-skip") },
      platform,
    );
    expect((await pipeline.check(...args())).headers).toEqual([
      ["RateLimit-Limit", "1"],
      ["RateLimit-Remaining", "0"],
      ["RateLimit-Reset", "18"],
    ]);
    const denied = await pipeline.check(...args());
    expect(denied.headers).toEqual([
      ["RateLimit-Limit", "1"],
      ["RateLimit-Remaining", "0"],
      ["RateLimit-Reset", "18"],
      ["Retry-After", "18"],
    ]);
    expect(denied.response?.status).toBe(429);
    expect(denied.response?.headers.get("retry-after")).toBe("18");
    expect(await pipeline.check(...args({ "x-skip": "1" }))).toEqual({
      decision: undefined,
      key: undefined,
      limiter: undefined,
      headers: [],
      response: undefined,
    });
  });
});

describe("handle", () => {
  it("calls next with the decision and merges the headers: the handler's own win; denied: the 429, next not called", async () => {
    const pipeline = createPipeline<Args>({ limiter: limiterOf(2), key: () => "k", headers: "legacy" }, platform);
    const next = vi.fn(async (decision: Decision | undefined) =>
      new Response(`left ${decision?.remaining}`, { headers: { "X-RateLimit-Limit": "mine" } }),
    );
    const ok = await pipeline.handle(args(), next);
    expect(await ok.text()).toBe("left 1");
    expect(Object.fromEntries(ok.headers)).toEqual({
      "content-type": "text/plain;charset=UTF-8",
      "x-ratelimit-limit": "mine",
      "x-ratelimit-remaining": "1",
      "x-ratelimit-reset": "1700000040",
    });
    await pipeline.handle(args(), next);
    const denied = await pipeline.handle(args(), next);
    expect(denied.status).toBe(429);
    expect(next).toHaveBeenCalledTimes(2);
  });

  it("waits delayMs before calling next", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "Date"], now: 0 });
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 2 }) });
    const pipeline = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const calledAt: number[] = [];
    const next = async (decision: Decision | undefined) => {
      calledAt.push(Date.now());
      return new Response(`waited ${decision?.delayMs}`);
    };
    const answers = Promise.all([0, 1, 2].map(() => pipeline.handle(args(), next)));
    await vi.runAllTimersAsync();
    expect(await Promise.all((await answers).map((r) => r.text()))).toEqual(["waited 0", "waited 100", "waited 200"]);
    expect(calledAt).toEqual([0, 100, 200]);
  });

  it("finish copies a response with immutable headers, leaves Response.error() alone and refuses a non-response", async () => {
    const pipeline = createPipeline<Args>({ limiter: limiterOf(5), key: () => "k", headers: "draft-6" }, platform);
    const redirect = Response.redirect("https://api.test/elsewhere", 302);
    const copied = await pipeline.handle(args(), () => redirect);
    expect(copied).not.toBe(redirect);
    expect([copied.status, copied.headers.get("location"), copied.headers.get("ratelimit-remaining")]).toEqual([302, "https://api.test/elsewhere", "4"]);
    const error = Response.error();
    expect(await pipeline.handle(args(), () => error)).toBe(error);
    const notAResponse = pipeline.handle(args(), () => "ok" as unknown as Response);
    await expect(notAResponse).rejects.toThrow(SluiceInputError);
    await expect(notAResponse).rejects.toThrow('[sluice] [frame] response must be a Response (what the handler returns); got "ok"');
    await expect(notAResponse).rejects.toThrow(expect.objectContaining({ code: "SLUICE_INPUT", option: "response" }));
  });
});

describe("configuration errors name the option, tagged with the adapter's package", () => {
  const limiter = limiterOf(1);
  const cases: [string, unknown, string | RegExp, string][] = [
    ["key", { limiter }, /^\[sluice\] \[frame\] key must be a function \(request, env, ctx\) => string, or give trust/, "key"],
    ["headers", { limiter, key: () => "k", headers: "draft-8" }, /^\[sluice\] \[frame\] headers must be "ietf", "draft-7", "draft-6", "legacy"/, "headers"],
    ["limiter", { limiter: {}, key: () => "k" }, "[sluice] [frame] limiter must be a RateLimiter (or give tiers); got an object", "limiter"],
    ["trust", { limiter, trust: "aws" }, /^\[sluice\] \[frame\] trust must be "cloudflare", "vercel" or a positive integer/, "trust"],
    ["tier prefix", { tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, tier: () => "free", key: () => "k", prefix: "" }, /^\[sluice\] \[frame\] prefix must be/, "prefix"],
    [
      "tier timeoutMs",
      { tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, tier: () => "free", key: () => "k", timeoutMs: -5 },
      /^\[sluice\] \[frame\] timeoutMs must be/,
      "timeoutMs",
    ],
    ["a tier's limits", { tiers: { free: [fixedWindow({ limit: 1, window: "1m" }), 5] }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[frame\] tiers\.free\[1\] must be a policy/, "tiers.free[1]"],
  ];
  it.each(cases)("%s", (_name, options, message, option) => {
    const make = () => createPipeline<Args>(options as PipelineOptions<Args>, platform);
    expect(make).toThrow(SluiceConfigError);
    expect(make).toThrow(message);
    expect(make).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("without a tag the messages are core's", () => {
    const make = () => createPipeline<Args>({ limiter } as never, { where: "frame", request: (request) => request });
    expect(make).toThrow(/^\[sluice\] key must be a function \(request\) => string/);
  });

  it("a tier the resolver names that is not configured: tagged, at the request", async () => {
    const pipeline = createPipeline<Args>({ tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, tier: () => "gold", key: () => "k" }, platform);
    const checking = pipeline.check(...args());
    await expect(checking).rejects.toThrow('[sluice] [frame] tier must return a configured tier (free); got "gold"');
    await expect(checking).rejects.toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "tier" }));
  });
});

describe("countWhen: only the requests that should count", () => {
  const login = (status: number) => () => new Response(status === 200 ? "welcome" : "wrong password", { status });

  it("refunds a served request that does not count; an exhausted key is still refused up front", async () => {
    const limiter = limiterOf(3);
    const seen: [number, unknown][] = [];
    const pipeline = createPipeline<Args>(
      { limiter, key: () => "ip:1", countWhen: (_request, _env, _ctx, response, decision) => (seen.push([response.status, decision.remaining]), response.status >= 400) },
      platform,
    );
    const statuses: number[] = [];
    // successes do not count: any number of them
    for (let i = 0; i < 5; i++) statuses.push((await pipeline.handle(args(), login(200))).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect((await limiter.peek("ip:1")).remaining).toBe(3);
    // failures count: 3 of them, then the 429 before the handler runs
    let ran = 0;
    const failing = () => (ran++, new Response("no", { status: 401 }));
    const after = [];
    for (let i = 0; i < 4; i++) after.push((await pipeline.handle(args(), failing)).status);
    expect(after).toEqual([401, 401, 401, 429]);
    expect(ran).toBe(3);
    expect((await limiter.peek("ip:1")).remaining).toBe(0);
    // countWhen saw every served response with its decision (remaining before any refund)
    expect(seen.slice(0, 2)).toEqual([
      [200, 2],
      [200, 2],
    ]);
    expect(seen).toHaveLength(8);
  });

  it("a denied, skipped or dry-run request is never refunded; a failing refund still sends the response", async () => {
    const failures: unknown[] = [];
    let mode: "ok" | "reject" = "ok";
    const inner = new MemoryStore({ clock: () => T0 });
    const store = {
      bind(namespace: Parameters<MemoryStore["bind"]>[0]) {
        const bound = inner.bind(namespace);
        return {
          consume: async (key: string, cost: number) => bound.consume(key, cost),
          peek: async (key: string) => bound.peek(key),
          reset: async (key: string) => bound.reset(key),
          refund: async (key: string, cost: number, at: RefundCharge | undefined) => {
            if (mode === "reject") throw new Error("store down");
            return bound.refund(key, cost, at);
          },
          release: async (key: string, lease: number) => bound.release(key, lease),
        };
      },
    };
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m" }), onStoreFailure: (e) => failures.push(e), denyCache: false });
    const pipeline = createPipeline<Args>({ limiter, key: () => "k", countWhen: () => false, skip: (r) => r.headers.has("x-skip") }, platform);
    mode = "reject";
    const res = await pipeline.handle(args(), login(200));
    expect(res.status).toBe(200);
    expect(failures.map((e) => (e as Error).message)).toEqual(["store down"]);
    expect((await limiter.peek("k")).remaining).toBe(1); // the refund did not happen
    mode = "ok";
    expect((await pipeline.handle(args({ "x-skip": "1" }), login(200))).status).toBe(200);
    await limiter.limit("k");
    expect((await pipeline.handle(args(), login(200))).status).toBe(429); // denied: nothing to give back
    expect((await limiter.peek("k")).remaining).toBe(0);
  });

  it("countWhen must be a function", () => {
    expect(() => createPipeline<Args>({ limiter: limiterOf(1), key: () => "k", countWhen: "4xx" as never }, platform)).toThrow(
      "[sluice] [frame] countWhen must be a function; got \"4xx\"",
    );
  });
});

describe("checkNow: the outcome in place when every step answers in place", () => {
  const key = (request: Request) => request.headers.get("x-key") ?? "anonymous";
  const plain = (outcome: Awaited<ReturnType<ReturnType<typeof createPipeline<Args>>["check"]>>) => ({
    allowed: outcome.decision?.allowed,
    remaining: outcome.decision?.remaining,
    reason: outcome.decision?.reason,
    headers: outcome.headers,
    status: outcome.response?.status,
  });

  it("an in-memory limiter with a synchronous key: an Outcome, not a promise, deciding exactly as check() does", async () => {
    const now = createPipeline<Args>({ limiter: limiterOf(3), key }, platform);
    const later = createPipeline<Args>({ limiter: limiterOf(3), key }, platform);
    const seen: unknown[] = [];
    const expected: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      const outcome = now.checkNow(...args({ "x-key": "alice" }));
      expect(outcome).not.toBeInstanceOf(Promise);
      expect("then" in outcome).toBe(false);
      seen.push(plain(outcome as Awaited<typeof outcome>));
      expected.push(plain(await later.check(...args({ "x-key": "alice" }))));
    }
    expect(seen).toEqual(expected);
    expect(seen.map((o) => (o as { status?: number }).status)).toEqual([undefined, undefined, undefined, 429, 429]);
    expect((seen[2] as { headers: unknown }).headers).toEqual([
      ["RateLimit-Policy", '"3-per-1m";q=3;w=60'],
      ["RateLimit", '"3-per-1m";r=0;t=18'],
      ["X-RateLimit-Limit", "3"],
      ["X-RateLimit-Remaining", "0"],
      ["X-RateLimit-Reset", "1700000040"],
    ]);
  });

  it("an asynchronous key, skip, cost or onLimited, or a store that answers over the network: a promise of the same outcome", async () => {
    const memory = new MemoryStore({ clock: () => T0 });
    const remote = {
      bind(namespace: Parameters<MemoryStore["bind"]>[0]) {
        const bound = memory.bind(namespace);
        return {
          consume: async (k: string, c: number) => bound.consume(k, c),
          peek: async (k: string) => bound.peek(k),
          reset: async (k: string) => bound.reset(k),
          refund: async (k: string, c: number, charge: RefundCharge | undefined) => bound.refund(k, c, charge),
          release: async (k: string, lease: number) => bound.release(k, lease),
        };
      },
    };
    const variants: PipelineOptions<Args>[] = [
      { limiter: limiterOf(1), key: async (request) => key(request) },
      { limiter: limiterOf(1), key, skip: async () => false },
      { limiter: limiterOf(1), key, cost: async () => 1 },
      { limiter: new RateLimiter({ store: remote, limits: fixedWindow({ limit: 1, window: "1m" }) }), key },
    ];
    for (const options of variants) {
      const pipeline = createPipeline<Args>(options, platform);
      const first = pipeline.checkNow(...args({ "x-key": "bob" }));
      expect(first).toBeInstanceOf(Promise);
      expect((await first).decision?.allowed).toBe(true);
      const second = await pipeline.checkNow(...args({ "x-key": "bob" }));
      expect([second.decision?.allowed, second.response?.status]).toEqual([false, 429]);
    }
    const reported: string[] = [];
    const limited = createPipeline<Args>(
      { limiter: limiterOf(1), key, onLimited: async (request, _env, _ctx, decision) => (reported.push(decision.reason), new Response("no", { status: 503 })) },
      platform,
    );
    expect("then" in limited.checkNow(...args())).toBe(false); // allowed: onLimited is not called
    const denied = limited.checkNow(...args());
    expect(denied).toBeInstanceOf(Promise);
    expect([(await denied).response?.status, reported]).toEqual([503, ["limit"]]);
  });

  it("bad input: checkNow throws SluiceInputError at once, check() rejects with it, and nothing is consumed", async () => {
    const limiter = limiterOf(3);
    const pipeline = createPipeline<Args>({ limiter, key: () => "" }, platform);
    expect(() => pipeline.checkNow(...args())).toThrow(/key must be a non-empty string/);
    await expect(pipeline.check(...args())).rejects.toThrow(/key must be a non-empty string/);
    const costly = createPipeline<Args>({ limiter, key: () => "k", cost: () => undefined as unknown as number }, platform);
    expect(() => costly.checkNow(...args())).toThrow("cost must be a positive safe integer; got undefined");
    expect((await limiter.peek("k")).remaining).toBe(3);
  });

  it("a RateLimiter subclass that overrides limit() is called through it", async () => {
    const limiter = new PendingLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 2, window: "1m" }) });
    const pipeline = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const call = args();
    const outcome = await pipeline.checkNow(...call);
    expect([outcome.decision?.remaining, limiter.pendings.length, call[2].waited.length]).toEqual([1, 1, 1]);
  });
});
