import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "./algorithms/index.js";
import { compileRateLimitHeaders } from "./headers.js";
import { RateLimiter } from "./limiter/index.js";
import { MemoryStore } from "./memory-store.js";
import { effectivePolicies, overrideFromText, overrideText } from "./overrides.js";
import { type StoredState, controlState, decideState, peekState } from "./store.js";
import type { Decision, Store, StoreResult } from "./types.js";

const T0 = 1_700_000_000_000;

function setup(limits: ConstructorParameters<typeof RateLimiter>[0]["limits"], store?: Store) {
  const clock = { now: T0 };
  const s = store ?? new MemoryStore({ clock: () => clock.now });
  const limiter = new RateLimiter({ store: s, prefix: "ov", limits });
  return { clock, store: s, limiter };
}

async function run(limiter: RateLimiter, key: string, n: number): Promise<Decision[]> {
  const out: Decision[] = [];
  for (let i = 0; i < n; i++) out.push(await limiter.limit(key));
  return out;
}

const allowedOf = (ds: Decision[]) => ds.map((d) => d.allowed);

describe("overrides on MemoryStore", () => {
  it("{ scale } multiplies a window's limit; other keys keep the base quota; decision.override says which applied", async () => {
    const { limiter } = setup(fixedWindow({ limit: 3, window: "1m", name: "m" }));
    await limiter.setOverride("vip", { scale: 10 });
    const vip = await run(limiter, "vip", 31);
    expect(allowedOf(vip).filter(Boolean)).toHaveLength(30);
    expect(vip[0]).toMatchObject({ limit: 30, remaining: 29, override: { scale: 10 } });
    expect(vip[30]).toMatchObject({ allowed: false, limit: 30, reason: "limit", override: { scale: 10 } });
    const other = await run(limiter, "other", 4);
    expect(allowedOf(other)).toEqual([true, true, true, false]);
    expect(other[0]?.override).toBeUndefined();
    expect("override" in (other[0] as object)).toBe(false);
  });

  it("a second limiter on the same store and prefix sees the override at its next decision", async () => {
    const { limiter, store, clock } = setup(fixedWindow({ limit: 2, window: "1m", name: "m" }));
    const other = new RateLimiter({ store, prefix: "ov", limits: fixedWindow({ limit: 2, window: "1m", name: "m" }) });
    expect((await other.limit("k")).limit).toBe(2);
    await limiter.setOverride("k", { quotas: { m: 5 } });
    expect(await other.getOverride("k")).toEqual({ quotas: { m: 5 } });
    const d = await other.limit("k");
    expect(d).toMatchObject({ allowed: true, limit: 5, remaining: 3, override: { quotas: { m: 5 } } });
    clock.now += 1;
  });

  it("a bucket's burst and rate scale alike: 10 at once then one per 100 ms instead of 5 then one per 200 ms", async () => {
    const { limiter, clock } = setup(tokenBucket({ capacity: 5, refillRate: 5, interval: "1s", name: "b" }));
    await limiter.setOverride("k", { scale: 2 });
    const first = await run(limiter, "k", 11);
    expect(allowedOf(first).filter(Boolean)).toHaveLength(10);
    expect(first[10]).toMatchObject({ allowed: false, retryAfterMs: 100, limit: 10 });
    clock.now += 100;
    expect(allowedOf(await run(limiter, "k", 2))).toEqual([true, false]);
    const [p] = effectivePolicies(limiter.policies, "s,2");
    expect(p).toMatchObject({ burst: 10, capacity: 10, limit: 10, emissionIntervalUs: 100_000, queue: 0, windowSeconds: 1 });
  });

  it("a leaky bucket's queue scales with its burst", () => {
    const [p] = effectivePolicies([leakyBucket({ rate: 10, period: "1s", burst: 4, queue: 6, name: "lb" })], "s,1.5");
    expect(p).toMatchObject({ burst: 6, limit: 6, queue: 9, emissionIntervalUs: 66_667 });
  });

  it("{ quotas } changes only the named policies; { unlimited } counts nothing and a cleared override leaves the base quota whole", async () => {
    const { limiter } = setup([fixedWindow({ limit: 2, window: "1m", name: "a" }), slidingWindow({ limit: 4, window: "1m", name: "b" })]);
    await limiter.setOverride("k", { quotas: { a: 3 } });
    const d = await limiter.limit("k");
    expect(d.policies.map((p) => p.limit)).toEqual([3, 4]);
    await limiter.setOverride("k", { unlimited: true });
    const free = await run(limiter, "k", 50);
    expect(free.every((x) => x.allowed && x.reason === "ok")).toBe(true);
    expect(free[49]).toMatchObject({ remaining: 2, override: { unlimited: true } });
    await limiter.clearOverride("k");
    expect(await limiter.getOverride("k")).toBeUndefined();
    // one charge was made under { quotas }: a has 1 left of 2
    expect(allowedOf(await run(limiter, "k", 2))).toEqual([true, false]);
  });

  it("ttl: applied until the millisecond before its end, not at it", async () => {
    const { limiter, clock } = setup(slidingLog({ limit: 1, window: "1h", name: "l" }));
    await limiter.setOverride("k", { scale: 3 }, { ttl: 1500 });
    clock.now = T0 + 1499;
    expect(await limiter.getOverride("k")).toEqual({ scale: 3 });
    expect((await limiter.peek("k")).limit).toBe(3);
    clock.now = T0 + 1500;
    expect(await limiter.getOverride("k")).toBeUndefined();
    expect((await limiter.peek("k")).limit).toBe(1);
  });

  it("when a larger quota ends, what it admitted still counts: never more than the larger quota in the window", async () => {
    const { limiter, clock } = setup(fixedWindow({ limit: 2, window: "1m", name: "m" }));
    await limiter.setOverride("k", { scale: 3 }, { ttl: "10s" });
    expect(allowedOf(await run(limiter, "k", 7)).filter(Boolean)).toHaveLength(6);
    clock.now = T0 + 10_000;
    expect(allowedOf(await run(limiter, "k", 3))).toEqual([false, false, false]);
    clock.now = T0 + 60_000;
    expect(allowedOf(await run(limiter, "k", 3))).toEqual([true, true, false]);
  });

  it("block: every request denied with reason blocked and retryAfterMs to its end; unblock lifts it and the penalty boxes", async () => {
    const { limiter, clock } = setup([fixedWindow({ limit: 1, window: "1s", name: "m", block: "1m" })]);
    await limiter.block("k", "30s");
    clock.now = T0 + 10_000;
    const d = await limiter.limit("k");
    expect(d).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 20_000 });
    expect(d.policies[0]).toMatchObject({ blocked: true, blockedUntil: T0 + 30_000, remaining: 0 });
    await limiter.unblock("k");
    expect(allowedOf(await run(limiter, "k", 2))).toEqual([true, false]);
    // the second request started the policy's penalty box (1 min): unblock lifts that too
    expect((await limiter.limit("k")).reason).toBe("blocked");
    await limiter.unblock("k");
    clock.now = T0 + 11_000;
    expect((await limiter.limit("k")).reason).toBe("ok");
  });

  it("a manual block beats unlimited; retryAfterMs is never before the key's own retry time", async () => {
    const { limiter, clock } = setup(fixedWindow({ limit: 1, window: "1m", name: "m" }));
    await limiter.limit("k");
    await limiter.block("k", "5s");
    await limiter.setOverride("k", { unlimited: true });
    clock.now = T0 + 1000;
    let d = await limiter.limit("k");
    expect(d).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 4000, override: { unlimited: true } });
    await limiter.clearOverride("k");
    d = await limiter.limit("k");
    // the window (ends at T0 + 40 s) is still full: the retry time is its end, not the block's
    expect(d).toMatchObject({ reason: "blocked", retryAfterMs: 39_000 });
  });

  it("reset forgets the override and the manual block", async () => {
    const { limiter } = setup(fixedWindow({ limit: 1, window: "1m", name: "m" }));
    await limiter.setOverride("k", { scale: 5 });
    await limiter.block("k", "1h");
    await limiter.reset("k");
    expect(await limiter.getOverride("k")).toBeUndefined();
    expect((await limiter.limit("k")).reason).toBe("ok");
  });

  it("a concurrency cap's slots scale; leases taken before the override are still released", async () => {
    const { limiter } = setup(concurrency({ limit: 1, lease: "1m", name: "c" }));
    const first = await limiter.limit("k");
    await limiter.setOverride("k", { scale: 2 });
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect((await limiter.limit("k")).allowed).toBe(false);
    await limiter.release("k", first);
    expect((await limiter.limit("k")).allowed).toBe(true);
  });

  it("under unlimited a decision holds no lease and charges nothing to refund", async () => {
    const { limiter } = setup([concurrency({ limit: 1, lease: "1m", name: "c" }), fixedWindow({ limit: 1, window: "1m", name: "m" })]);
    await limiter.setOverride("k", { unlimited: true });
    const d = await limiter.limit("k");
    expect(d).toMatchObject({ allowed: true, override: { unlimited: true } });
    expect(d.lease).toBeUndefined();
    await limiter.clearOverride("k");
    await limiter.refund("k", { decision: d });
    expect(allowedOf(await run(limiter, "k", 2))).toEqual([true, false]);
  });

  it("a bucket charge made under an override is refunded in parts by the effective rate", async () => {
    const { limiter, clock } = setup(tokenBucket({ capacity: 4, refillRate: 4, interval: "1s", name: "b" }));
    await limiter.setOverride("k", { scale: 2 }); // 8 tokens, one per 125 ms
    await run(limiter, "k", 4);
    const d = await limiter.limit("k", { cost: 4 });
    expect(d).toMatchObject({ allowed: true, remaining: 0 });
    clock.now += 600; // TAT is 400 ms ahead: the charge of 4 (500 ms) still weighs 400 ms
    await limiter.refund("k", { decision: d, cost: 2 }); // 250 ms back
    await limiter.refund("k", { decision: d, cost: 2 }); // the remaining 150 ms (by the effective 125 ms per unit)
    // as if the request had never been made: the bucket is full (by the base 250 ms per unit, the second refund gave nothing: 6)
    expect(allowedOf(await run(limiter, "k", 9))).toEqual([true, true, true, true, true, true, true, true, false]);
  });

  it("headers carry the effective quotas: q in RateLimit-Policy, r in RateLimit", async () => {
    const { limiter } = setup(fixedWindow({ limit: 3, window: "1m", name: "m" }));
    const write = compileRateLimitHeaders(["ietf"], limiter.policies);
    await limiter.setOverride("k", { scale: 10 });
    const h = new Headers();
    write(h, await limiter.limit("k"), undefined);
    expect(h.get("RateLimit-Policy")).toBe('"m";q=30;w=60');
    expect(h.get("RateLimit")).toBe('"m";r=29;t=40');
    const plain = new Headers();
    write(plain, await limiter.limit("other"), undefined);
    expect(plain.get("RateLimit-Policy")).toBe('"m";q=3;w=60');
  });

  it("the deny cache forgets a key its own limiter raises or unblocks", async () => {
    const clock = { now: T0 };
    const inner = new MemoryStore({ clock: () => clock.now });
    let calls = 0;
    // an asynchronous store (so the deny cache is on by default) over the memory store
    const store: Store = {
      bind(ns) {
        const b = inner.bind(ns);
        return {
          consume: async (k, c, l) => (calls++, b.consume(k, c, l)),
          peek: async (k) => b.peek(k),
          reset: async (k) => b.reset(k),
          refund: async (k, c, ch) => b.refund(k, c, ch),
          release: async (k, l) => b.release(k, l),
          control: async (k, cmd) => (b.control as NonNullable<typeof b.control>)(k, cmd),
        };
      },
    };
    const limiter = new RateLimiter({ store, prefix: "dc", limits: fixedWindow({ limit: 1, window: "1m" }) });
    await run(limiter, "k", 3);
    expect(calls).toBe(2); // the third came from the cache
    await limiter.setOverride("k", { scale: 2 });
    expect((await limiter.limit("k")).allowed).toBe(true);
    await limiter.block("k", "1m");
    expect((await limiter.limit("k")).reason).toBe("blocked");
    await limiter.unblock("k");
    expect((await limiter.limit("k")).reason).toBe("limit");
  });

  it("bad input is a SluiceInputError naming the field, and nothing stored changes", async () => {
    const { limiter } = setup([fixedWindow({ limit: 3, window: "1m", name: "m" }), tokenBucket({ capacity: 4, refillRate: 1, name: "b" })]);
    await limiter.setOverride("k", { scale: 2 });
    const cases: [unknown, unknown, string][] = [
      [{ scale: -1 }, undefined, "override.scale"],
      [{ scale: 0 }, undefined, "override.scale"],
      [{ scale: Number.NaN }, undefined, "override.scale"],
      [{ scale: Number.POSITIVE_INFINITY }, undefined, "override.scale"],
      [{ scale: 0.2 }, undefined, "override.scale"],
      [{ scale: 2 ** 45 }, undefined, "override.scale"],
      [{ quotas: { nope: 3 } }, undefined, "override.quotas.nope"],
      [{ quotas: { m: 0 } }, undefined, "override.quotas.m"],
      [{ quotas: { m: 1.5 } }, undefined, "override.quotas.m"],
      [{ quotas: { b: 2 ** 41 } }, undefined, "override.quotas.b"],
      [{ quotas: {} }, undefined, "override.quotas"],
      [{ unlimited: false }, undefined, "override.unlimited"],
      [{ scale: 2, unlimited: true }, undefined, "override"],
      [{ limit: 3 }, undefined, "override.limit"],
      [null, undefined, "override"],
      [{ scale: 3 }, { ttl: "soon" }, "ttl"],
      [{ scale: 3 }, { ttl: -5 }, "ttl"],
      [{ scale: 3 }, { tll: "1h" }, "options.tll"],
    ];
    for (const [override, options, option] of cases) {
      await expect(limiter.setOverride("k", override as never, options as never), JSON.stringify(override)).rejects.toMatchObject({ code: "SLUICE_INPUT", option });
    }
    await expect(limiter.block("k", "forever" as never)).rejects.toMatchObject({ code: "SLUICE_INPUT", option: "duration" });
    await expect(limiter.block("k", 0)).rejects.toMatchObject({ code: "SLUICE_INPUT", option: "duration" });
    await expect(limiter.setOverride("", { scale: 2 })).rejects.toMatchObject({ code: "SLUICE_INPUT", option: "key" });
    expect(await limiter.getOverride("k")).toEqual({ scale: 2 });
    expect((await limiter.limit("k")).reason).toBe("ok");
  });

  it("a store without control() cannot hold overrides: SluiceConfigError naming the store", async () => {
    const inner = new MemoryStore();
    const store: Store = {
      bind(ns) {
        const b = inner.bind(ns);
        return { consume: (k, c, l) => b.consume(k, c, l), peek: (k) => b.peek(k), reset: (k) => b.reset(k), refund: (k, c, ch) => b.refund(k, c, ch), release: (k, l) => b.release(k, l) };
      },
    };
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    await expect(limiter.setOverride("k", { scale: 2 })).rejects.toMatchObject({ code: "SLUICE_CONFIG", option: "store" });
  });
});

describe("the stored form", () => {
  it("bodies round-trip: scale as JavaScript writes it, quotas sorted by name", () => {
    const policies = [fixedWindow({ limit: 10, window: "1m", name: "z" }), fixedWindow({ limit: 10, window: "1h", name: "a:b|c" })];
    expect(overrideText({ scale: 1.5 }, policies)).toBe("s,1.5");
    expect(overrideText({ scale: 0.1 }, policies)).toBe("s,0.1");
    expect(overrideText({ unlimited: true }, policies)).toBe("u");
    expect(overrideText({ quotas: { z: 5, "a:b|c": 7 } }, policies)).toBe("q,a:b|c=7,z=5");
    expect(overrideFromText("q,a:b|c=7,z=5")).toEqual({ quotas: { "a:b|c": 7, z: 5 } });
    expect(overrideFromText("s,1e-7")).toEqual({ scale: 1e-7 });
    expect(overrideFromText("x")).toBeUndefined();
  });

  it("controlState writes |override and |block next to the policies' fields; an override without ttl keeps the record forever", () => {
    const policies = [fixedWindow({ limit: 2, window: "1m", name: "m" })];
    const nowUs = T0 * 1000;
    const d = decideState(policies, undefined, nowUs, 1);
    const set = controlState(policies, d.state, nowUs, { op: "setOverride", override: "s,2", ttlMs: 0 });
    expect(set.state).toEqual({ "m|fw": d.state?.["m|fw"], "|override": "0,s,2" });
    expect(set.expiresAtUs).toBe(Number.MAX_SAFE_INTEGER);
    const blocked = controlState(policies, set.state, nowUs, { op: "block", durationMs: 1000 });
    expect(blocked.state?.["|block"]).toEqual([nowUs + 1_000_000]);
    expect(peekState(policies, blocked.state, nowUs).policies[0]).toMatchObject({ allowed: false, blocked: true, limit: 4 });
    const timed = controlState(policies, undefined, nowUs, { op: "setOverride", override: "u", ttlMs: 5 });
    expect(timed).toEqual({ state: { "|override": `${nowUs + 5000},u` }, expiresAtUs: nowUs + 5000, override: "u" });
    expect(() => controlState(policies, undefined, nowUs, { op: "setOverride", override: "s,-1", ttlMs: 0 })).toThrow(/override/);
  });

  it("MemoryStore and the JSON-state functions decide identically under random overrides, blocks and clock moves", async () => {
    const policies = [
      fixedWindow({ limit: 3, window: "2s", name: "fw" }),
      slidingWindow({ limit: 4, window: "3s", name: "sw" }),
      slidingLog({ limit: 3, window: "2s", name: "sl" }),
      tokenBucket({ capacity: 3, refillRate: 2, interval: "1s", name: "tb" }),
      leakyBucket({ rate: 2, period: "1s", burst: 2, queue: 2, name: "lb" }),
    ];
    const op = fc.oneof(
      fc.record({ t: fc.constant("limit" as const), cost: fc.integer({ min: 1, max: 3 }), dt: fc.integer({ min: 0, max: 900 }) }),
      fc.record({ t: fc.constant("set" as const), body: fc.constantFrom("s,2", "s,0.5", "s,1.7", "u", "q,fw=1", "q,tb=9,sl=5"), ttlMs: fc.constantFrom(0, 1, 700, 2500), dt: fc.integer({ min: 0, max: 900 }) }),
      fc.record({ t: fc.constantFrom("clear" as const, "unblock" as const, "peek" as const), dt: fc.integer({ min: 0, max: 900 }) }),
      fc.record({ t: fc.constant("block" as const), durationMs: fc.integer({ min: 1, max: 1500 }), dt: fc.integer({ min: 0, max: 900 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 4 }), fc.array(op, { minLength: 1, maxLength: 40 }), async (which, ops) => {
        const list = [policies[which] as (typeof policies)[number], policies[(which + 2) % 5] as (typeof policies)[number]];
        let now = T0;
        const bound = new MemoryStore({ clock: () => now }).bind({ prefix: "p", policies: list });
        let state: StoredState | undefined;
        for (const o of ops) {
          now += o.dt;
          const nowUs = now * 1000;
          if (o.t === "limit") {
            const a = bound.consume("k", o.cost) as StoreResult;
            const b = decideState(list, state, nowUs, o.cost);
            if (b.state !== undefined) state = b.state;
            expect(a.policies).toEqual(b.policies);
            expect(a.override).toEqual(b.override);
          } else if (o.t === "peek") {
            expect((bound.peek("k") as StoreResult).policies).toEqual(peekState(list, state, nowUs).policies);
          } else {
            const command =
              o.t === "set"
                ? { op: "setOverride" as const, override: o.body, ttlMs: o.ttlMs }
                : o.t === "block"
                  ? { op: "block" as const, durationMs: o.durationMs }
                  : { op: o.t === "clear" ? ("clearOverride" as const) : ("unblock" as const) };
            const a = (bound.control as NonNullable<typeof bound.control>)("k", command) as { override?: string };
            const b = controlState(list, state, nowUs, command);
            if (b.state !== undefined) state = b.state;
            expect(a.override).toBe(b.override);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
