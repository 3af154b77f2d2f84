import { afterEach, describe, expect, it, vi } from "vitest";
import { fixedWindow, slidingLog, slidingWindow, tokenBucket } from "./algorithms.js";
import { SluiceConfigError } from "./errors.js";
import { RateLimiter } from "./limiter.js";
import { MemoryStore } from "./memory-store.js";

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
});
