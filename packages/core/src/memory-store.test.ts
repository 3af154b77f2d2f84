import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type Policy, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "./algorithms/index.js";
import { SluiceConfigError } from "./errors.js";
import { RateLimiter } from "./limiter/index.js";
import { MemoryStore } from "./memory-store.js";
import type { RefundCharge, StoreResult } from "./types.js";

const T0 = 1_767_225_600_000;

function setup(maxKeys: number) {
  const clock = { now: T0 };
  const store = new MemoryStore({ maxKeys, clock: () => clock.now });
  return { clock, store };
}

describe("MemoryStore", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("never holds more than maxKeys keys", async () => {
    const { store } = setup(100);
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1h" }) });
    for (let i = 0; i < 1000; i++) await limiter.limit(`k${i}`);
    expect(store.size).toBe(100);
    // the newest 100 keys are the ones kept
    expect((await limiter.peek("k999")).remaining).toBe(4);
    expect((await limiter.peek("k900")).remaining).toBe(4);
    expect((await limiter.peek("k899")).remaining).toBe(5);
  });

  it("evicts the least recently used key when nothing has expired", async () => {
    const { store } = setup(3);
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1h" }) });
    for (const key of ["a", "b", "c"]) await limiter.limit(key);
    await limiter.limit("a"); // a is now the most recently used; b the least
    await limiter.limit("d");
    expect(store.size).toBe(3);
    expect((await limiter.peek("a")).remaining).toBe(3);
    expect((await limiter.peek("b")).remaining).toBe(5); // evicted: back to empty
    expect((await limiter.peek("c")).remaining).toBe(4);
    expect((await limiter.peek("d")).remaining).toBe(4);
  });

  it("evicts an expired key before the least recently used one", async () => {
    const { clock, store } = setup(2);
    const daily = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1d" }), prefix: "daily" });
    const short = new RateLimiter({ store, limits: tokenBucket({ capacity: 5, refillRate: 5 }), prefix: "short" });
    await daily.limit("b"); // least recently used, but its window lasts all day
    clock.now += 1;
    await short.limit("a"); // used later, but refilled (expired) one second later
    clock.now += 2000;
    await daily.limit("c");
    expect(store.size).toBe(2);
    expect((await daily.peek("b")).remaining).toBe(4); // kept
    expect((await daily.peek("c")).remaining).toBe(4);
  });

  it("does not take a slot for a request that is denied on a new key", async () => {
    const { store } = setup(10);
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1h" }) });
    const d = await limiter.limit("new", { cost: 6 });
    expect(d.reason).toBe("cost-exceeds-limit");
    expect(store.size).toBe(0);
    await limiter.peek("other");
    expect(store.size).toBe(0);
  });

  it("reset frees the slot and a reused slot starts empty", async () => {
    const { store } = setup(2);
    const log = new RateLimiter({ store, limits: slidingLog({ limit: 3, window: "1h" }) });
    await log.limit("a", { cost: 3 });
    await log.limit("b", { cost: 2 });
    await log.reset("a");
    expect(store.size).toBe(1);
    await log.limit("c"); // takes a's old slot
    expect((await log.peek("c")).remaining).toBe(2);
    expect((await log.peek("a")).remaining).toBe(3);
    await log.limit("d"); // evicts b (least recently used): its log entries go with it
    expect((await log.peek("b")).remaining).toBe(3);
    expect((await log.peek("d")).remaining).toBe(2);
  });

  it("a key moved inside its namespace's arrays (when another leaves) keeps its log, and shrunk arrays keep the rest", async () => {
    const { clock, store } = setup(1000);
    const log = new RateLimiter({ store, limits: slidingLog({ limit: 5, window: "1s" }), prefix: "log" });
    for (let i = 0; i < 100; i++) await log.limit(`k${i}`, { cost: 1 + (i % 5) });
    clock.now += 500;
    for (let i = 0; i < 100; i += 10) await log.limit(`k${i}`); // one more entry, half a window later
    // most keys leave: the last ones move into the freed slots, and the arrays shrink
    for (let i = 0; i < 100; i++) if (i % 10 !== 0) await log.reset(`k${i}`);
    expect(store.size).toBe(10);
    for (let i = 0; i < 100; i += 10) expect((await log.peek(`k${i}`)).remaining).toBe(5 - 1 - (i % 5) - 1);
    clock.now += 500; // the first entries have left the window: only the later one counts
    for (let i = 0; i < 100; i += 10) expect((await log.peek(`k${i}`)).remaining).toBe(4);
    clock.now += 500;
    for (let i = 0; i < 100; i += 10) expect((await log.peek(`k${i}`)).remaining).toBe(5);
  });

  it("grows past its initial capacity and keeps every key's state", async () => {
    const { store } = setup(5000);
    const limiter = new RateLimiter({
      store,
      limits: [slidingWindow({ limit: 9, window: "1m", name: "a" }), tokenBucket({ capacity: 4, refillRate: 1, name: "b" })],
    });
    for (let i = 0; i < 5000; i++) await limiter.limit(`k${i}`, { cost: 1 + (i % 3) });
    expect(store.size).toBe(5000);
    for (let i = 0; i < 5000; i += 499) {
      const d = await limiter.peek(`k${i}`);
      expect(d.policies.map((p) => p.remaining)).toEqual([9 - 1 - (i % 3), 4 - 1 - (i % 3)]);
    }
  });

  it("shares state between limiters with the same prefix and policy names, across namespaces only by prefix", async () => {
    const { store } = setup(10);
    const a = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m", name: "x" }), prefix: "p" });
    const b = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m", name: "x" }), prefix: "p" });
    const c = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m", name: "x" }), prefix: "q" });
    await a.limit("k");
    expect((await b.limit("k")).remaining).toBe(0);
    expect((await c.limit("k")).remaining).toBe(1);
    store.clear();
    expect(store.size).toBe(0);
    expect((await a.peek("k")).remaining).toBe(2);
  });

  it("uses no timers and answers synchronously underneath", async () => {
    vi.useFakeTimers();
    const store = new MemoryStore();
    const bound = store.bind({ prefix: "s", policies: [tokenBucket({ capacity: 3, refillRate: 1 })] });
    const result = bound.consume("k", 1);
    expect(result).not.toBeInstanceOf(Promise);
    const limiter = new RateLimiter({ store, limits: slidingLog({ limit: 3, window: "1s" }) });
    for (let i = 0; i < 100; i++) await limiter.limit(`k${i % 7}`);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("reads its clock in whole milliseconds by default and accepts an injected one", async () => {
    const store = new MemoryStore({ clock: () => T0 + 0.7 });
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1s" }) });
    const d = await limiter.limit("k");
    expect(d.now).toBe(T0);
    const real = new RateLimiter({ limits: fixedWindow({ limit: 1, window: "1s" }) });
    const before = Date.now();
    const r = await real.limit("k");
    expect(r.now).toBeGreaterThanOrEqual(before);
    expect(r.now).toBeLessThanOrEqual(Date.now());
  });

  it("rejects bad options with errors naming them", () => {
    expect(() => new MemoryStore({ maxKeys: 0 })).toThrow(SluiceConfigError);
    expect(() => new MemoryStore({ maxKeys: 0 })).toThrow(/maxKeys/);
    expect(() => new MemoryStore({ maxKeys: 1.5 })).toThrow(/maxKeys.*1\.5/);
    expect(() => new MemoryStore({ clock: 5 as unknown as () => number })).toThrow(/clock/);
  });

  it("keeps tiers of one prefix apart, even with identical policies", async () => {
    const { store } = setup(10);
    const limits = fixedWindow({ limit: 2, window: "1m" });
    const free = new RateLimiter({ store, limits, prefix: "p", tier: "free" });
    const pro = new RateLimiter({ store, limits, prefix: "p", tier: "pro" });
    const plain = new RateLimiter({ store, limits, prefix: "p" });
    await free.limit("bob", { cost: 2 });
    expect((await pro.limit("bob")).remaining).toBe(1);
    expect((await plain.limit("bob")).remaining).toBe(1);
    expect((await plain.limit("free:bob")).remaining).toBe(1);
    expect((await free.peek("bob")).remaining).toBe(0);
  });

  it("keeps maxKeys across namespaces, evicting the least recently used key of any namespace", async () => {
    const { store } = setup(4);
    const a = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1h" }), prefix: "a" });
    const b = new RateLimiter({ store, limits: [slidingLog({ limit: 5, window: "1h" }), tokenBucket({ capacity: 5, refillRate: 1, interval: "1h" })], prefix: "b" });
    await a.limit("1");
    await b.limit("1");
    await a.limit("2");
    await b.limit("2", { cost: 2 });
    await a.limit("1"); // a:1 most recent; b:1 now the least recently used
    await a.limit("3");
    expect(store.size).toBe(4);
    expect((await b.peek("1")).policies.map((r) => r.remaining)).toEqual([5, 5]); // evicted
    expect((await b.peek("2")).policies.map((r) => r.remaining)).toEqual([3, 3]);
    expect((await a.peek("1")).remaining).toBe(3);
    // every key of b evicted and taken again: its state moves around inside b's arrays and stays right
    for (let i = 0; i < 20; i++) await b.limit(`x${i}`, { cost: 1 + (i % 4) });
    expect(store.size).toBe(4);
    for (let i = 16; i < 20; i++) expect((await b.peek(`x${i}`)).policies.map((r) => r.remaining)).toEqual([4 - (i % 4), 4 - (i % 4)]);
  });
});

describe("MemoryStore against a model (LRU over every namespace, packed tables)", () => {
  /** Namespaces of different widths, each with limit L in every policy; nothing expires within the test. */
  const namespaces: { prefix: string; tier?: string; limit: number; policies: Policy[] }[] = [
    { prefix: "a", limit: 4, policies: [fixedWindow({ limit: 4, window: "1d" })] },
    { prefix: "a", tier: "log", limit: 5, policies: [slidingLog({ limit: 5, window: "1d" })] },
    {
      prefix: "b",
      limit: 6,
      policies: [
        slidingWindow({ limit: 6, window: "1d" }),
        tokenBucket({ capacity: 6, refillRate: 1, interval: "1d" }),
        slidingLog({ limit: 6, window: "1d", name: "log" }),
        leakyBucket({ rate: 1, period: "1d", burst: 6, name: "leaky" }),
      ],
    },
  ];

  it("decides, evicts and resets exactly like the model", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(
          fc.record({
            ns: fc.integer({ min: 0, max: namespaces.length - 1 }),
            key: fc.integer({ min: 0, max: 9 }),
            cost: fc.integer({ min: 1, max: 7 }),
            op: fc.constantFrom("consume", "consume", "consume", "peek", "reset"),
          }),
          { maxLength: 200 },
        ),
        (maxKeys, steps) => {
          const store = new MemoryStore({ maxKeys, clock: () => T0 });
          const bound = namespaces.map((n) => store.bind({ prefix: n.prefix, tier: n.tier, policies: n.policies }));
          const model = new Map<string, number>(); // "ns|key" → units used, in recency order (oldest first)
          for (const { ns, key, cost, op } of steps) {
            const id = `${ns}|${key}`;
            const limit = namespaces[ns]!.limit;
            const used = model.get(id) ?? 0;
            if (op === "reset") {
              bound[ns]!.reset(`k${key}`);
              model.delete(id);
            } else if (op === "peek") {
              const result = bound[ns]!.peek(`k${key}`) as StoreResult;
              for (const r of result.policies) expect(r.remaining).toBe(limit - used);
            } else {
              const result = bound[ns]!.consume(`k${key}`, cost) as StoreResult;
              const allowed = used + cost <= limit;
              for (const r of result.policies) expect([r.allowed, r.remaining]).toEqual([allowed, limit - used - (allowed ? cost : 0)]);
              const known = model.has(id);
              if (known || cost <= limit) {
                // a new key takes a slot unless the cost can never pass; a known key becomes the most recent
                model.delete(id);
                if (!known && model.size >= maxKeys) model.delete(model.keys().next().value as string);
                model.set(id, used + (allowed ? cost : 0));
              }
            }
            expect(store.size).toBe(model.size);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Memory in proportion to keys, not to namespaces × keys
// ---------------------------------------------------------------------------------------------

/** A full garbage collection: V8's `gc()`, exposed at run time (the test process was not started with --expose-gc). */
async function exposeGc(): Promise<() => void> {
  const load = (name: string): Promise<Record<string, (...args: never[]) => unknown>> => import(/* @vite-ignore */ `node:${name}`);
  const v8 = await load("v8");
  const vm = await load("vm");
  (v8.setFlagsFromString as (flags: string) => void)("--expose-gc");
  return (vm.runInNewContext as (code: string) => () => void)("gc");
}

/** Live bytes: the JS heap plus ArrayBuffer backing stores (where typed arrays keep their data). */
function liveBytes(): number {
  const usage = (globalThis as unknown as { process: { memoryUsage(): { heapUsed: number; arrayBuffers: number } } }).process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

describe("MemoryStore memory", () => {
  const BIG = 190_000;
  /** A three-limit tier: six numbers of state per key. */
  const tier = (limit: number): Policy[] => [
    slidingWindow({ limit, window: "1m" }),
    fixedWindow({ limit: limit * 100, window: "1d" }),
    tokenBucket({ capacity: limit, refillRate: 1 }),
  ];

  /** Bytes still held once `fill` has filled a fresh store and the garbage is collected. */
  async function retained(fill: (store: MemoryStore) => void): Promise<number> {
    const gc = await exposeGc();
    const settle = () => {
      for (let i = 0; i < 3; i++) gc();
    };
    settle();
    const before = liveBytes();
    let store: MemoryStore | undefined = new MemoryStore({ maxKeys: 250_000, clock: () => T0 });
    fill(store);
    settle();
    const after = liveBytes();
    expect(store.size).toBeGreaterThanOrEqual(BIG); // keeps the store alive until here
    store = undefined;
    return after - before;
  }

  const fillBig = (store: MemoryStore) => {
    const bound = store.bind({ prefix: "api", tier: "t0", policies: tier(10) });
    for (let i = 0; i < BIG; i++) bound.consume(`user:${i}`, 1);
  };

  it("8 namespaces (190k keys in one, 1 in each of seven others) stay within 1.5× of the single namespace", { timeout: 60_000 }, async () => {
    const single = await retained(fillBig);
    const eight = await retained((store) => {
      fillBig(store);
      // the seven small tiers come last: their keys get the highest slot numbers
      for (let t = 1; t < 8; t++) store.bind({ prefix: "api", tier: `t${t}`, policies: tier(10 + t) }).consume("user:0", 1);
    });
    expect(single).toBeGreaterThan(BIG * 6 * 8); // at least the numbers themselves: the measurement sees the store
    expect(eight / single).toBeLessThan(1.5);
  });

  it("a namespace whose keys were all evicted gives its arrays back", { timeout: 60_000 }, async () => {
    const fill = (store: MemoryStore) => {
      const bound = store.bind({ prefix: "api", tier: "t0", policies: tier(10) });
      for (let i = 0; i < 250_000; i++) bound.consume(`user:${i}`, 1);
    };
    const alone = await retained(fill);
    const churned = await retained((store) => {
      const old = store.bind({ prefix: "api", tier: "old", policies: tier(99) });
      for (let i = 0; i < 200_000; i++) old.consume(`old:${i}`, 1);
      fill(store); // 250k keys at most: every key of the old tier is pushed out
    });
    // the old tier's 200k keys held ~10 MB of state: what is left of it is noise
    expect(churned - alone).toBeLessThan(4 * 2 ** 20);
  });
});


// ---------------------------------------------------------------------------------------------
// The limiter's way in: MemoryStore's own namespace decides without the StoreResult wrapper
// ---------------------------------------------------------------------------------------------

describe("RateLimiter over MemoryStore's own namespace", () => {
  /** A store of another class whose bind() returns MemoryStore's own namespace: still recognised. */
  const forwarding = (inner: MemoryStore) => ({ bind: (namespace: Parameters<MemoryStore["bind"]>[0]) => inner.bind(namespace) });
  /** A bound namespace of another class, forwarding to MemoryStore's: the limiter cannot recognise it. */
  const wrapped = (inner: MemoryStore) => ({ bind: (namespace: Parameters<MemoryStore["bind"]>[0]) => bindMethods(inner.bind(namespace)) });
  const bindMethods = (b: ReturnType<MemoryStore["bind"]>) => ({
    consume: (key: string, cost: number, lease?: number) => b.consume(key, cost, lease),
    peek: (key: string) => b.peek(key),
    reset: (key: string) => b.reset(key),
    refund: (key: string, cost: number, charge?: RefundCharge) => b.refund(key, cost, charge),
    release: (key: string, lease: number) => b.release(key, lease),
  });

  it("decides exactly as through consume() and its StoreResult, for every algorithm, tier and cost", async () => {
    const limitSets: Policy[][] = [
      [fixedWindow({ limit: 3, window: "10s" })],
      [slidingWindow({ limit: 4, window: "10s" })],
      [slidingLog({ limit: 3, window: "10s" })],
      [tokenBucket({ capacity: 3, refillRate: 1, interval: "2s" })],
      [leakyBucket({ rate: 1, period: "2s", burst: 3 })],
      [tokenBucket({ capacity: 5, refillRate: 1, interval: "1s", name: "burst" }), fixedWindow({ limit: 8, window: "1m", name: "minute" }), slidingLog({ limit: 6, window: "30s", name: "log" })],
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: limitSets.length - 1 }),
        fc.array(
          fc.record({
            key: fc.integer({ min: 0, max: 3 }),
            cost: fc.integer({ min: 1, max: 9 }),
            advanceMs: fc.integer({ min: 0, max: 3000 }),
            op: fc.constantFrom("limit", "limit", "limit", "refund", "peek"),
          }),
          { maxLength: 60 },
        ),
        async (set, steps) => {
          let now = T0;
          const clock = () => now;
          const direct = new RateLimiter({ store: new MemoryStore({ clock }), limits: limitSets[set]! });
          const viaResult = new RateLimiter({ store: wrapped(new MemoryStore({ clock })), limits: limitSets[set]! });
          const sameStore = new RateLimiter({ store: forwarding(new MemoryStore({ clock })), limits: limitSets[set]! });
          for (const { key, cost, advanceMs, op } of steps) {
            now += advanceMs;
            const k = `k${key}`;
            const decide = (l: RateLimiter) => (op === "limit" ? l.limit(k, { cost }) : op === "refund" ? l.refund(k, { cost }) : l.peek(k));
            const [a, b, c] = await Promise.all([decide(direct), decide(viaResult), decide(sameStore)]);
            expect(a).toEqual(b);
            expect(c).toEqual(b);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
