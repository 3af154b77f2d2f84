/**
 * Bad input to a RateLimiter's calls is refused before any store call, with a SluiceInputError,
 * and leaves the state untouched: a cost that is not a positive safe integer, options that are not
 * an object, a key that is not a non-empty well-formed string of at most MAX_KEY_LENGTH
 * characters; and more policies than MAX_POLICIES are refused at construction, whatever the store.
 */
import { describe, expect, it } from "vitest";
import { countingStore, expectConfigError } from "../test/helpers.js";
import { MAX_KEY_LENGTH, MAX_POLICIES, MemoryStore, RateLimiter, SluiceInputError, type Store, fixedWindow, slidingLog, tokenBucket } from "./index.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

describe("input errors", () => {
  const limits = [fixedWindow({ limit: 10, window: "1m" }), slidingLog({ limit: 5, window: "10s" }), tokenBucket({ capacity: 4, refillRate: 1 })];

  async function primed() {
    const memory = new MemoryStore({ clock: () => T0 });
    const { store, calls } = countingStore(memory);
    const limiter = new RateLimiter({ store, limits });
    await limiter.limit("k", { cost: 2 });
    await limiter.limit("k");
    calls.consume = 0;
    return { limiter, memory, calls };
  }

  it.each([
    [0, "0"],
    [-1, "-1"],
    [1.5, "1.5"],
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [2 ** 53, "9007199254740992"],
    ["1", '"1"'],
    [null, "null"],
    [true, "true"],
  ])("cost %j rejects with SluiceInputError and leaves the state untouched", async (cost, shown) => {
    const { limiter, memory, calls } = await primed();
    const before = await limiter.peek("k");
    expect(before.remaining).toBe(1); // the token bucket: 4 - 3
    const call = limiter.limit("k", { cost: cost as number });
    await expect(call).rejects.toThrow(SluiceInputError);
    await expect(call).rejects.toThrow(`[sluice] cost must be a positive safe integer; got ${shown}`);
    expect(calls.consume).toBe(0);
    expect(await limiter.peek("k")).toEqual(before);
    expect(memory.size).toBe(1);
  });

  it.each([[null], [5], ["cost"]])("options %j rejects with SluiceInputError", async (options) => {
    const { limiter, calls } = await primed();
    const before = await limiter.peek("k");
    await expect(limiter.limit("k", options as never)).rejects.toThrow(SluiceInputError);
    await expect(limiter.limit("k", options as never)).rejects.toThrow(/^\[sluice\] options must be an object like \{ cost: 1 \}; got /);
    expect(calls.consume).toBe(0);
    expect(await limiter.peek("k")).toEqual(before);
  });

  it("no options, {} and { cost: undefined } mean cost 1", async () => {
    const { limiter } = await primed();
    // a fresh key: each call takes exactly one unit from every policy (10, 5 and 4 to start)
    const remainingAfter = async (options?: { cost?: number }) => {
      const d = await limiter.limit("other", options);
      return d.policies.map((r) => r.remaining);
    };
    expect(await remainingAfter()).toEqual([9, 4, 3]);
    expect(await remainingAfter({})).toEqual([8, 3, 2]);
    expect(await remainingAfter({ cost: undefined })).toEqual([7, 2, 1]);
  });

  it.each([[""], [5], [undefined], [null], [{}], [["k"]]])(
    "key %j rejects with SluiceInputError in limit, peek and reset, and touches nothing",
    async (key) => {
      const { limiter, memory, calls } = await primed();
      const before = await limiter.peek("k");
      calls.peek = 0;
      for (const call of [() => limiter.limit(key as string), () => limiter.peek(key as string), () => limiter.reset(key as string)]) {
        await expect(call()).rejects.toThrow(SluiceInputError);
        await expect(call()).rejects.toThrow(/^\[sluice\] key must be a non-empty string; got /);
      }
      expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
      expect(await limiter.peek("k")).toEqual(before);
      expect(memory.size).toBe(1);
    },
  );
});

describe("policy count and key shape, checked before any store call", () => {
  const policies = (n: number) => Array.from({ length: n }, (_, i) => fixedWindow({ limit: 5, window: "1m", name: `p${i}` }));

  it(`takes at most MAX_POLICIES (${MAX_POLICIES}) policies, refused at construction whatever the store`, () => {
    expect(MAX_POLICIES).toBe(12);
    const memory = new MemoryStore();
    const { store, calls } = countingStore(memory);
    let bound = 0;
    const spy: Store = {
      bind(namespace) {
        bound++;
        return store.bind(namespace);
      },
    };
    expect(new RateLimiter({ store: spy, limits: policies(12) }).policies).toHaveLength(12);
    for (const n of [13, 33]) {
      expectConfigError(
        () => new RateLimiter({ store: spy, limits: policies(n) }),
        `[sluice] limits must hold at most 12 policies (the same on every store); got ${n}`,
      );
    }
    expect(bound).toBe(1); // only the 12-policy limiter reached the store
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
  });

  it.each([
    ["a lone high surrogate", "\ud800"],
    ["a lone low surrogate", "\udc00"],
    ["a high surrogate before a letter", "a\ud800b"],
    ["a reversed pair", "\udc00\ud800"],
    ["a pair cut at the end", "user:\ud83d"],
  ])("a key with %s is a SluiceInputError in limit, peek and reset; the store sees no call", async (_label, key) => {
    const { store, calls } = countingStore(new MemoryStore({ clock: () => T0 }));
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m" }) });
    for (const call of [() => limiter.limit(key), () => limiter.peek(key), () => limiter.reset(key)]) {
      await expect(call()).rejects.toThrow(SluiceInputError);
      await expect(call()).rejects.toThrow("[sluice] key must be a well-formed string without lone surrogates (stores carry UTF-8, which cannot encode them); got ");
    }
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
  });

  it('well-formed keys "\ufffd" and a surrogate pair are accepted, each with its own quota', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    expect((await limiter.limit("\ufffd")).allowed).toBe(true);
    expect((await limiter.limit("\ud83d\ude00")).allowed).toBe(true);
    expect((await limiter.limit("\ufffd")).allowed).toBe(false);
    expect((await limiter.limit("?")).allowed).toBe(true);
  });

  it(`a key longer than MAX_KEY_LENGTH (${MAX_KEY_LENGTH}) is a SluiceInputError before any store call; ${MAX_KEY_LENGTH} is fine`, async () => {
    expect(MAX_KEY_LENGTH).toBe(4096);
    const { store, calls } = countingStore(new MemoryStore({ clock: () => T0 }));
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m" }), onStoreError: "allow" });
    const long = "k".repeat(5000);
    for (const call of [() => limiter.limit(long), () => limiter.peek(long), () => limiter.reset(long)]) {
      await expect(call()).rejects.toThrow(SluiceInputError);
      await expect(call()).rejects.toThrow("[sluice] key must be at most 4096 characters; got 5000");
    }
    await expect(limiter.limit("k".repeat(4097))).rejects.toThrow(SluiceInputError);
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
    expect(await limiter.limit("k".repeat(4096))).toMatchObject({ allowed: true, reason: "ok" });
  });
});
