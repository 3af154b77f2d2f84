import { twoPerMinute } from "@sluice/testing/headers";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type Decision,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  SluiceConfigError,
  createGuard,
  fixedWindow,
  leakyBucket,
} from "./index.js";
import { type Platform, createPipeline } from "./adapter.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

function limiterOf(limit: number, options: Partial<RateLimiterOptions> = {}) {
  return new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit, window: "1m" }), ...options });
}

function request(headers: Record<string, string> = {}): Request {
  return new Request("https://api.test/items", { headers });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("dry run on the limiter", () => {
  it("decisions and state exactly as when enforcing; every decision says dryRun: true", async () => {
    const enforcing = limiterOf(2);
    const shadow = limiterOf(2, { mode: "dry-run" });
    for (let i = 0; i < 4; i++) {
      const e = await enforcing.limit("k");
      const s = await shadow.limit("k");
      expect(e.dryRun).toBe(false);
      expect(s.dryRun).toBe(true);
      const { pending: _p1, dryRun: _d1, ...enforced } = e;
      const { pending: _p2, dryRun: _d2, ...measured } = s;
      expect(measured).toEqual(enforced);
    }
    expect(await shadow.peek("k")).toMatchObject({ allowed: false, remaining: 0, dryRun: true });
    expect((await shadow.peek("k")).remaining).toBe((await enforcing.peek("k")).remaining);
  });
});

describe("dry run in the pipeline (createGuard)", () => {
  it("denied requests pass: no response, no headers, the decision marked; onLimited reports them and its return value is ignored", async () => {
    const onLimited = vi.fn((_request: Request, _decision: Decision) => "not a response" as unknown as Response);
    const guard = createGuard({ limiter: limiterOf(2, { mode: "dry-run" }), key: () => "k", onLimited });
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await guard(request()));
    expect(results.map((r) => [r.decision?.allowed, r.decision?.dryRun, r.decision?.reason, r.response])).toEqual([
      [true, true, "ok", undefined],
      [true, true, "ok", undefined],
      [false, true, "limit", undefined],
      [false, true, "limit", undefined],
    ]);
    for (const r of results) expect([...r.headers]).toEqual([]);
    expect(onLimited).toHaveBeenCalledTimes(2);
    expect(onLimited.mock.calls[0]?.[1]).toBe(results[2]?.decision);
    expect(onLimited.mock.calls[0]?.[1]).toMatchObject({ allowed: false, dryRun: true, retryAfterMs: 18_000, remaining: 0 });
  });

  it("dryRunHeaders: true writes the headers enforcing would, but never Retry-After", async () => {
    const guard = createGuard({ limiter: limiterOf(2, { mode: "dry-run" }), key: () => "k", dryRunHeaders: true });
    expect(Object.fromEntries((await guard(request())).headers)).toEqual(twoPerMinute(1));
    expect(Object.fromEntries((await guard(request())).headers)).toEqual(twoPerMinute(0));
    const denied = await guard(request());
    expect(denied.response).toBeUndefined();
    expect(Object.fromEntries(denied.headers)).toEqual(twoPerMinute(0));
    // the same limiter enforcing: the same headers, and Retry-After on its 429
    const enforcing = createGuard({ limiter: limiterOf(2), key: () => "k" });
    await enforcing(request());
    await enforcing(request());
    const limited = await enforcing(request());
    expect(limited.response?.status).toBe(429);
    expect(Object.fromEntries(limited.headers)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
  });

  it("dryRunHeaders has no effect on an enforcing limiter", async () => {
    const guard = createGuard({ limiter: limiterOf(1), key: () => "k", dryRunHeaders: false });
    expect(Object.fromEntries((await guard(request())).headers)).toMatchObject({ "x-ratelimit-remaining": "0" });
    expect((await guard(request())).response?.status).toBe(429);
  });

  it("onLimited is awaited, and its errors reach the caller as in enforcement", async () => {
    const log: string[] = [];
    const guard = createGuard({
      limiter: limiterOf(1, { mode: "dry-run" }),
      key: () => "k",
      onLimited: async (_request, decision) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        log.push(`would deny, retry in ${decision.retryAfterMs} ms`);
        return new Response(null, { status: 429 });
      },
    });
    await guard(request());
    const { response } = await guard(request());
    expect(response).toBeUndefined();
    expect(log).toEqual(["would deny, retry in 18000 ms"]);
    const failing = createGuard({
      limiter: limiterOf(1, { mode: "dry-run" }),
      key: () => "k",
      onLimited: () => {
        throw new Error("metrics down");
      },
    });
    await failing(request());
    await expect(failing(request())).rejects.toThrow("metrics down");
  });

  it("handle(): the handler runs for a denied request, gets the decision, and a shaping delay is not waited", async () => {
    vi.useFakeTimers({ now: T0 });
    const platform: Platform<[request: Request]> = { where: "frame", request: (r) => r };
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 1 }), mode: "dry-run" });
    const pipeline = createPipeline<[request: Request]>({ limiter, key: () => "k", dryRunHeaders: true, headers: "draft-6" }, platform);
    const seen: (Decision | undefined)[] = [];
    const next = (decision: Decision | undefined) => {
      seen.push(decision);
      return new Response("served");
    };
    const responses: Response[] = [];
    // without fake-timer advances: a wait of delayMs would hang here
    for (let i = 0; i < 3; i++) responses.push(await pipeline.handle([request()], next));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(seen.map((d) => [d?.allowed, d?.delayMs, d?.dryRun])).toEqual([
      [true, 0, true],
      [true, 100, true],
      [false, 0, true],
    ]);
    expect(responses.map((r) => [r.headers.get("ratelimit-remaining"), r.headers.get("retry-after")])).toEqual([
      ["0", null],
      ["0", null],
      ["0", null],
    ]);
  });
});

describe("dry run per tier", () => {
  const tiers = {
    free: fixedWindow({ limit: 1, window: "1m", name: "free" }),
    pro: { limits: [fixedWindow({ limit: 2, window: "1m", name: "pro" })], mode: "dry-run" as const },
  };

  it("{ limits, mode: 'dry-run' } measures one tier while the others enforce", async () => {
    const onLimited = vi.fn((_request: Request, _decision: Decision) => new Response("limited", { status: 429 }));
    const guard = createGuard({
      tiers,
      store: new MemoryStore({ clock: () => T0 }),
      tier: (r) => r.headers.get("x-plan") ?? "free",
      key: (r) => r.headers.get("x-plan") ?? "free",
      onLimited,
    });
    const free = [await guard(request()), await guard(request())];
    expect(free.map((r) => r.response?.status)).toEqual([undefined, 429]);
    expect(free[1]?.decision).toMatchObject({ allowed: false, dryRun: false });
    const pro = [];
    for (let i = 0; i < 3; i++) pro.push(await guard(request({ "x-plan": "pro" })));
    expect(pro.map((r) => [r.response?.status, r.decision?.allowed, r.decision?.dryRun, [...r.headers].length])).toEqual([
      [undefined, true, true, 0],
      [undefined, true, true, 0],
      [undefined, false, true, 0],
    ]);
    expect(onLimited.mock.calls.map(([, d]) => [d.policy, d.dryRun])).toEqual([
      ["free", false],
      ["pro", true],
    ]);
  });

  it("mode on the tiered options applies to every tier without its own", async () => {
    const guard = createGuard({
      tiers: { ...tiers, pro: { limits: tiers.pro.limits, mode: "enforce" } },
      mode: "dry-run",
      store: new MemoryStore({ clock: () => T0 }),
      tier: (r) => r.headers.get("x-plan") ?? "free",
      key: (r) => r.headers.get("x-plan") ?? "free",
    });
    const free = [await guard(request()), await guard(request())];
    expect(free.map((r) => [r.response?.status, r.decision?.allowed, r.decision?.dryRun])).toEqual([
      [undefined, true, true],
      [undefined, false, true],
    ]);
    const pro = [];
    for (let i = 0; i < 3; i++) pro.push(await guard(request({ "x-plan": "pro" })));
    expect(pro.map((r) => r.response?.status)).toEqual([undefined, undefined, 429]);
  });

  it("the array form and a single policy keep working beside the object form", async () => {
    const guard = createGuard({
      tiers: { a: fixedWindow({ limit: 1, window: "1m" }), b: [fixedWindow({ limit: 1, window: "1m" })], c: { limits: fixedWindow({ limit: 1, window: "1m" }) } },
      store: new MemoryStore({ clock: () => T0 }),
      tier: (r) => r.headers.get("x-plan") ?? "a",
      key: (r) => r.headers.get("x-plan") ?? "a", // the tier is cached per key
    });
    for (const plan of ["a", "b", "c"]) {
      expect((await guard(request({ "x-plan": plan }))).response).toBeUndefined();
      expect((await guard(request({ "x-plan": plan }))).response?.status).toBe(429);
    }
  });
});

describe("configuration errors name the option", () => {
  const base = { tier: () => "free", key: () => "k" };
  it.each([
    [{ tiers: { free: { limits: fixedWindow({ limit: 1, window: "1m" }), mode: "shadow" } } }, /^\[sluice\] tiers\.free\.mode must be "enforce" or "dry-run"; got "shadow"$/],
    [{ tiers: { free: { limits: [] } } }, /^\[sluice\] tiers\.free\.limits must hold at least one policy; got an empty array$/],
    [{ tiers: { free: { limits: fixedWindow({ limit: 1, window: "1m" }), dryRun: true } } }, /^\[sluice\] tiers\.free\.dryRun is not an option: a tier takes limits and mode$/],
    [{ tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, mode: "off" }, /^\[sluice\] mode must be "enforce" or "dry-run"; got "off"$/],
  ])("%o", (options, message) => {
    expect(() => createGuard({ ...base, ...options } as never)).toThrow(SluiceConfigError);
    expect(() => createGuard({ ...base, ...options } as never)).toThrow(message);
  });

  it("dryRunHeaders must be a boolean", () => {
    expect(() => createGuard({ limiter: limiterOf(1), key: () => "k", dryRunHeaders: "yes" as never })).toThrow(
      /^\[sluice\] dryRunHeaders must be true or false; got "yes"$/,
    );
  });
});
