/**
 * The RateLimiter's configuration: refused at construction with a SluiceConfigError naming the
 * option (a hand-made policy too), reported as given, bound to the store once; and limit, peek and
 * reset against a healthy store. Bad input to a call is in `limiter-input.test.ts`, a failing or
 * slow store in `limiter-store-failures.test.ts`.
 */
import { describe, expect, it } from "vitest";
import { NAME_HINT, expectConfigError } from "../test/helpers.js";
import { MAX_DURATION_MS } from "./duration.js";
import {
  DEFAULT_TIMEOUT_MS,
  MemoryStore,
  type Policy,
  RateLimiter,
  type RateLimiterOptions,
  type Store,
  fixedWindow,
  leakyBucket,
  slidingLog,
  tokenBucket,
} from "./index.js";
import type { StoreNamespace } from "./types.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

describe("RateLimiter validation", () => {
  const p = fixedWindow({ limit: 5, window: "1m" });
  const cases: [string, unknown, string | RegExp][] = [
    ["no options", undefined, "[sluice] options must be an object with limits; got undefined"],
    ["limits empty", { limits: [] }, "[sluice] limits must hold at least one policy; got an empty array"],
    ["limits missing", {}, /^\[sluice\] limits must be a policy from .* or a list of them; got undefined$/],
    ["limits not policies", { limits: [p, { limit: 5, window: "1m" }] }, /^\[sluice\] limits\[1\] must be a policy from fixedWindow\(\), slidingWindow\(\), slidingLog\(\), tokenBucket\(\), leakyBucket\(\) or concurrency\(\); got an object$/],
    ["limits a string", { limits: "100-per-1m" }, /^\[sluice\] limits must be a policy from .* or a list of them; got "100-per-1m"$/],
    ["limits a factory", { limits: [fixedWindow] }, /^\[sluice\] limits\[0\] must be a policy .*; got a function$/],
    ["duplicate names", { limits: [p, fixedWindow({ limit: 5, window: "1m" })] }, "[sluice] limits[1].name must differ from the other policies' names (give one a distinct name option); got \"5-per-1m\" twice"],
    ["duplicate custom names", { limits: [fixedWindow({ limit: 5, window: "1m", name: "x" }), tokenBucket({ capacity: 1, refillRate: 1, name: "x" })] }, /^\[sluice\] limits\[1\]\.name must differ .*; got "x" twice$/],
    ["prefix empty", { limits: p, prefix: "" }, `[sluice] prefix ${NAME_HINT}; got ""`],
    ["prefix with a space", { limits: p, prefix: "my app" }, `[sluice] prefix ${NAME_HINT}; got "my app"`],
    ["prefix not a string", { limits: p, prefix: 5 }, `[sluice] prefix ${NAME_HINT}; got 5`],
    ["prefix too long", { limits: p, prefix: "p".repeat(129) }, /^\[sluice\] prefix must be 1-128 /],
    ["onStoreError unknown", { limits: p, onStoreError: "fail-open" }, '[sluice] onStoreError must be "fallback", "allow" or "deny"; got "fail-open"'],
    ["onStoreError boolean", { limits: p, onStoreError: true }, /onStoreError must be .*; got true$/],
    ["timeoutMs 0", { limits: p, timeoutMs: 0 }, "[sluice] timeoutMs must be a positive integer of milliseconds, at most 2147483647, or false; got 0"],
    ["timeoutMs true", { limits: p, timeoutMs: true }, /timeoutMs must be .*or false; got true$/],
    ["timeoutMs -1", { limits: p, timeoutMs: -1 }, /timeoutMs must be .*; got -1$/],
    ["timeoutMs 1.5", { limits: p, timeoutMs: 1.5 }, /timeoutMs must be .*; got 1\.5$/],
    ["timeoutMs \"100\"", { limits: p, timeoutMs: "100" }, /timeoutMs must be .*; got "100"$/],
    ["timeoutMs NaN", { limits: p, timeoutMs: Number.NaN }, /timeoutMs must be .*; got NaN$/],
    ["timeoutMs Infinity", { limits: p, timeoutMs: Number.POSITIVE_INFINITY }, /timeoutMs must be .*; got Infinity$/],
    // setTimeout fires at once above 2^31-1 ms: every store call would time out
    ["timeoutMs 2^31", { limits: p, timeoutMs: 2 ** 31 }, /timeoutMs must be .*at most 2147483647, or false; got 2147483648$/],
    ["store without bind", { limits: p, store: {} }, "[sluice] store must be a Store (an object with bind(namespace)); got an object"],
    ["onStoreFailure not a function", { limits: p, onStoreFailure: "log" }, '[sluice] onStoreFailure must be a function; got "log"'],
  ];
  it.each(cases)("%s", (_name, options, message) => {
    expectConfigError(() => new RateLimiter(options as RateLimiterOptions), message);
  });

  it("accepts one policy or a list, and reports its settings", () => {
    const one = new RateLimiter({ limits: p });
    expect(one.policies).toEqual([p]);
    expect(Object.isFrozen(one.policies)).toBe(true);
    expect(one.prefix).toBe("sluice");
    expect(one.onStoreError).toBe("fallback");
    expect(one.timeoutMs).toBe(DEFAULT_TIMEOUT_MS);
    expect(DEFAULT_TIMEOUT_MS).toBe(1000);
    expect(one.store).toBeInstanceOf(MemoryStore);
    const two = new RateLimiter({ limits: [p, tokenBucket({ capacity: 3, refillRate: 1 })], prefix: "api", timeoutMs: MAX_DURATION_MS, onStoreError: "deny" });
    expect(two.policies.map((x) => x.name)).toEqual(["5-per-1m", "3-burst-1-per-1s"]);
    expect([two.prefix, two.timeoutMs, two.onStoreError]).toEqual(["api", 2 ** 31 - 1, "deny"]);
  });

  it("binds the store once, with the prefix and the policies", () => {
    const namespaces: StoreNamespace[] = [];
    const memory = new MemoryStore();
    const store: Store = {
      bind(namespace) {
        namespaces.push(namespace);
        return memory.bind(namespace);
      },
    };
    const limiter = new RateLimiter({ store, limits: p, prefix: "api" });
    expect(namespaces).toEqual([{ prefix: "api", policies: [p] }]);
    expect(Object.isFrozen(namespaces[0])).toBe(true);
    expect(limiter.store).toBe(store);
  });
});

describe("limit, peek and reset against a healthy store", () => {
  it("reset forgets every policy's state for the key only", async () => {
    const limits: Policy[] = [fixedWindow({ limit: 3, window: "1m" }), slidingLog({ limit: 5, window: "1h" })];
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits });
    await limiter.limit("a", { cost: 3 });
    await limiter.limit("b", { cost: 2 });
    expect((await limiter.limit("a")).allowed).toBe(false);
    await limiter.reset("a");
    expect((await limiter.peek("a")).policies.map((r) => r.remaining)).toEqual([3, 5]);
    expect((await limiter.peek("b")).policies.map((r) => r.remaining)).toEqual([1, 3]);
    await limiter.reset("never-seen"); // no error
  });

  it("limiters with different prefixes never share state", async () => {
    const store = new MemoryStore({ clock: () => T0 });
    const limits = fixedWindow({ limit: 2, window: "1m" });
    const a = new RateLimiter({ store, limits, prefix: "a" });
    const b = new RateLimiter({ store, limits, prefix: "b" });
    await a.limit("k", { cost: 2 });
    expect((await b.limit("k")).remaining).toBe(1);
    expect((await a.peek("k")).remaining).toBe(0);
  });
});

describe("hand-made policies", () => {
  it("RateLimiter accepts only policies whose parameters the algorithms can compute with", () => {
    const good = fixedWindow({ limit: 3, window: "1m" });
    expect(() => new RateLimiter({ limits: good })).not.toThrow();
    const bad: unknown[] = [
      { kind: "fixedWindow", name: "x" },
      { ...good, windowMs: 1.5 },
      { ...good, limit: -1 },
      { ...good, kind: "slidingWindow", limit: 2 ** 40, windowMs: 2 ** 31 - 1 },
      { ...tokenBucket({ capacity: 3, refillRate: 1 }), emissionIntervalUs: 0 },
      { ...leakyBucket({ rate: 1, period: "1s", burst: 2 }), queue: -1 },
      { ...leakyBucket({ rate: 1, period: "1s", burst: 2 }), limit: 3 },
      { ...good, name: "has space" },
      { ...good, kind: "mystery" },
    ];
    for (const policy of bad) {
      expect(() => new RateLimiter({ limits: policy as never }), JSON.stringify(policy)).toThrow(/^\[sluice\] limits must be a policy from fixedWindow\(\), .* or a list of them; got an object$/);
    }
  });
});
