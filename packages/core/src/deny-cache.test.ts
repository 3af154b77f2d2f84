import { describe, expect, it } from "vitest";
import {
  type Decision,
  MemoryStore,
  type Policy,
  RateLimiter,
  type RateLimiterOptions,
  SluiceConfigError,
  type Store,
  createGuard,
  fixedWindow,
  setRateLimitHeaders,
  slidingWindow,
  tokenBucket,
} from "./index.js";
import { denyCacheMarginMs } from "./deny-cache.js";
import type { BoundStore, StoreNamespace } from "./types.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

/**
 * A store that answers over a "network": MemoryStore's decisions, each behind a resolved promise,
 * with a count of the calls that reached it. `fail` makes the next calls throw.
 */
class RemoteStore implements Store {
  readonly calls = { consume: 0, peek: 0, reset: 0, refund: 0, release: 0, control: 0 };
  fail = false;
  readonly memory: MemoryStore;
  constructor(clock: () => number) {
    this.memory = new MemoryStore({ clock });
  }
  bind(namespace: StoreNamespace): BoundStore {
    const inner = this.memory.bind(namespace);
    const calls = this.calls;
    const answer = async <T>(op: keyof typeof calls, fn: () => T | Promise<T>): Promise<T> => {
      calls[op]++;
      await Promise.resolve();
      if (this.fail) throw new Error("connection refused");
      return fn();
    };
    return {
      consume: (key, cost) => answer("consume", () => inner.consume(key, cost)),
      peek: (key) => answer("peek", () => inner.peek(key)),
      reset: (key) => answer("reset", () => inner.reset(key)),
      refund: (key, cost, charge) => answer("refund", () => inner.refund(key, cost, charge)),
      release: (key, lease) => answer("release", () => inner.release(key, lease)),
      control: (key, command) => answer("control", () => (inner.control as NonNullable<typeof inner.control>)(key, command)),
    };
  }
}

/**
 * The store's clock (epoch ms) and the limiter's local monotonic clock, moved together by
 * `advance` (as real time moves both); `skewLocal` moves only the local one.
 */
function world(limits: Policy | Policy[], options: Partial<RateLimiterOptions> = {}) {
  const time = { store: T0, local: 1_000 };
  const store = new RemoteStore(() => time.store);
  const limiter = new RateLimiter({ store, limits, denyCache: { clock: () => time.local }, ...options });
  /** The same state with no deny cache: what the store itself answers. */
  const direct = new RateLimiter({ store, limits, denyCache: false });
  return {
    time,
    store,
    limiter,
    direct,
    advance(ms: number) {
      time.store += ms;
      time.local += ms;
    },
  };
}

/** The fields a client sees, with `pending` left out. */
function seen(d: Decision) {
  const { pending: _pending, ...rest } = d;
  return rest;
}

function headersOf(d: Decision, limiter: RateLimiter): Record<string, string> {
  const headers = new Headers();
  setRateLimitHeaders(headers, d, ["ietf", "draft-6", "legacy"], limiter.policies);
  return Object.fromEntries(headers);
}

describe("deny cache: when it is on", () => {
  it("off by default over MemoryStore: every denial comes from the store", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    await limiter.limit("k");
    expect((await limiter.limit("k")).reason).toBe("limit");
    expect((await limiter.limit("k")).reason).toBe("limit");
  });

  it("on by default over an asynchronous store: after one denial, no store call for the key", async () => {
    const time = { now: T0 };
    const store = new RemoteStore(() => time.now);
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    expect((await limiter.limit("k")).reason).toBe("ok");
    expect((await limiter.limit("k")).reason).toBe("limit");
    for (let i = 0; i < 1000; i++) expect((await limiter.limit("k")).reason).toBe("cached-deny");
    expect(store.calls.consume).toBe(2);
    // another key still asks the store
    expect((await limiter.limit("other")).reason).toBe("ok");
    expect(store.calls.consume).toBe(3);
  });

  it("denyCache: false asks the store every time; denyCache: true is the default", async () => {
    const off = world(fixedWindow({ limit: 1, window: "1m" }), { denyCache: false });
    for (let i = 0; i < 5; i++) await off.limiter.limit("k");
    expect(off.store.calls.consume).toBe(5);
    const store = new RemoteStore(() => T0);
    const on = new RateLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }), denyCache: true });
    for (let i = 0; i < 5; i++) await on.limit("k");
    expect(store.calls.consume).toBe(2);
  });

  it("a synchronous store's answers are never cached, even with denyCache: true (they cost no round trip)", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }), denyCache: true });
    await limiter.limit("k");
    expect((await limiter.limit("k")).reason).toBe("limit");
    expect((await limiter.limit("k")).reason).toBe("limit");
  });
});

describe("deny cache: what it answers", () => {
  it("the store's denial moved on by the time elapsed: now, retryAfterMs and the headers read as the store's own", async () => {
    const w = world([fixedWindow({ limit: 2, window: "1m" }), slidingWindow({ limit: 10, window: "1h" })]);
    await w.limiter.limit("k");
    await w.limiter.limit("k");
    const denial = await w.limiter.limit("k");
    expect(denial).toMatchObject({ allowed: false, reason: "limit", now: T0, retryAfterMs: 18_000, remaining: 0, resetAt: T0 + 18_000 });

    w.advance(10_250);
    const cached = await w.limiter.limit("k");
    const store = await w.direct.limit("k");
    expect(store.reason).toBe("limit");
    expect(cached.reason).toBe("cached-deny");
    expect(cached).toMatchObject({ allowed: false, now: T0 + 10_250, retryAfterMs: 7_750, remaining: 0, resetAt: T0 + 18_000, delayMs: 0, policy: "2-per-1m" });
    expect(seen(cached)).toEqual({ ...seen(store), reason: "cached-deny" });
    expect(headersOf(cached, w.limiter)).toEqual(headersOf(store, w.limiter));
    expect(headersOf(cached, w.limiter)).toMatchObject({ "retry-after": "8", "ratelimit-remaining": "0", "ratelimit-reset": "8", "x-ratelimit-reset": "1700000040" });
    expect(w.store.calls.consume).toBe(3 + 1); // the direct limiter's call only
  });

  it("lasts the denial's retryAfterMs from when the call was sent, less the skew margin (5 ms + 1 ms per second)", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }));
    await w.limiter.limit("k");
    await w.limiter.limit("k"); // denied: retryAfterMs 18_000, margin 23
    expect(denyCacheMarginMs(18_000)).toBe(23);
    w.advance(18_000 - 23 - 1);
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    expect(w.store.calls.consume).toBe(2);
    w.advance(1);
    const asked = await w.limiter.limit("k");
    expect(asked).toMatchObject({ allowed: false, reason: "limit", retryAfterMs: 23 });
    expect(w.store.calls.consume).toBe(3);
    // a denial no longer than its margin (23 ms, margin 6) is cached for what is left: 17 ms
    w.advance(16);
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    w.advance(1);
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    w.advance(6);
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
  });

  it("a denial at most as long as its margin is not cached", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }));
    w.advance(18_000 - 6); // 6 ms before the window ends
    await w.limiter.limit("k");
    expect(await w.limiter.limit("k")).toMatchObject({ reason: "limit", retryAfterMs: 6 });
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    expect(w.store.calls.consume).toBe(3);
  });

  it("the local clock decides: a store clock that jumps ahead does not end a cached denial early", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }));
    await w.limiter.limit("k");
    await w.limiter.limit("k");
    w.time.store += 60_000; // the store's window has passed, but no local time has
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    w.time.local += 18_000;
    expect((await w.limiter.limit("k")).reason).toBe("ok");
  });

  it("answers the denied cost only: another cost asks the store, whose denial replaces the entry and whose admission ends it", async () => {
    const w = world(fixedWindow({ limit: 3, window: "1m" }));
    expect((await w.limiter.limit("k", { cost: 2 })).remaining).toBe(1);
    expect(await w.limiter.limit("k", { cost: 2 })).toMatchObject({ allowed: false, reason: "limit", remaining: 1 });
    expect(await w.limiter.limit("k", { cost: 2 })).toMatchObject({ allowed: false, reason: "cached-deny", remaining: 1 });
    expect(w.store.calls.consume).toBe(2);
    // a larger cost: the store's own answer (the same here, but it need not be), which replaces the entry
    expect(await w.limiter.limit("k", { cost: 3 })).toMatchObject({ allowed: false, reason: "limit", remaining: 1 });
    expect((await w.limiter.limit("k", { cost: 3 })).reason).toBe("cached-deny");
    expect((await w.limiter.limit("k", { cost: 2 })).reason).toBe("limit");
    expect(w.store.calls.consume).toBe(4);
    // cost 1 fits: the store allows it, and the key's state has changed: the cached denial goes
    expect((await w.limiter.limit("k", { cost: 2 })).reason).toBe("cached-deny");
    expect(await w.limiter.limit("k", { cost: 1 })).toMatchObject({ allowed: true, reason: "ok", remaining: 0 });
    expect(await w.limiter.limit("k", { cost: 2 })).toMatchObject({ allowed: false, reason: "limit", remaining: 0 });
    expect(w.store.calls.consume).toBe(6);
  });

  it("lasts only while every policy reads as the store would: until the first policy's quota grows", async () => {
    const w = world([tokenBucket({ capacity: 1, refillRate: 1, interval: "10s", name: "burst" }), fixedWindow({ limit: 1, window: "1m", name: "minute" })]);
    await w.limiter.limit("k");
    const denial = await w.limiter.limit("k");
    expect(denial.policies.map((p) => [p.policy, p.allowed, p.retryAfterMs, p.refillAt - T0])).toEqual([
      ["burst", false, 10_000, 10_000],
      ["minute", false, 18_000, 18_000],
    ]);
    expect(denial.policy).toBe("minute");
    // the bucket's next token comes at 10 s (margin 15 ms): until then, the store's own answer
    w.advance(9_984);
    const cached = await w.limiter.limit("k");
    expect(cached.reason).toBe("cached-deny");
    expect(seen(cached)).toEqual({ ...seen(await w.direct.limit("k")), reason: "cached-deny" });
    expect(cached.policies.map((p) => [p.policy, p.allowed, p.retryAfterMs])).toEqual([
      ["burst", false, 16],
      ["minute", false, 8_016],
    ]);
    w.advance(1);
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    // at 12 s the bucket has its token (allowed, 1 left) while the minute still denies: that denial
    // is cached until the minute ends, and reads as the store's
    w.advance(12_000 - 9_985);
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    w.advance(1_000);
    const later = await w.limiter.limit("k");
    expect(later.reason).toBe("cached-deny");
    expect(later.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs])).toEqual([
      ["burst", true, 1, 0],
      ["minute", false, 0, 5_000],
    ]);
    expect(seen(later)).toEqual({ ...seen(await w.direct.limit("k")), reason: "cached-deny" });
    expect(headersOf(later, w.limiter)).toEqual(headersOf(await w.direct.limit("k"), w.limiter));
  });

  it("carries the override the store applied, as the store's own denial does", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m", name: "m" }));
    await w.limiter.setOverride("k", { quotas: { m: 2 } });
    await w.limiter.limit("k");
    await w.limiter.limit("k");
    expect(await w.limiter.limit("k")).toMatchObject({ reason: "limit", limit: 2, override: { quotas: { m: 2 } } });
    w.advance(1_000);
    const cached = await w.limiter.limit("k");
    expect(cached).toMatchObject({ reason: "cached-deny", limit: 2, retryAfterMs: 17_000, override: { quotas: { m: 2 } } });
    expect(seen(cached)).toEqual({ ...seen(await w.direct.limit("k")), reason: "cached-deny" });
    expect(headersOf(cached, w.limiter)).toMatchObject({ "ratelimit-policy": '"m";q=2;w=60', ratelimit: '"m";r=0;t=17', "retry-after": "17" });
  });

  it("peek always asks the store and never fills the cache", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }));
    await w.limiter.limit("k");
    expect((await w.limiter.peek("k")).allowed).toBe(false);
    expect((await w.limiter.peek("k")).reason).toBe("limit");
    expect(w.store.calls.peek).toBe(2);
    expect((await w.limiter.limit("k")).reason).toBe("limit");
  });
});

describe("deny cache: what it never caches", () => {
  it("cost-exceeds-limit (retryAfterMs: Infinity) asks the store every time", async () => {
    const w = world(fixedWindow({ limit: 3, window: "1m" }));
    for (let i = 0; i < 3; i++) expect(await w.limiter.limit("k", { cost: 4 })).toMatchObject({ reason: "cost-exceeds-limit", retryAfterMs: Infinity });
    expect(w.store.calls.consume).toBe(3);
  });

  it('store failures with onStoreError "deny", and the fallback store\'s denials', async () => {
    const denying = world(fixedWindow({ limit: 1, window: "1m" }), { onStoreError: "deny" });
    denying.store.fail = true;
    for (let i = 0; i < 3; i++) expect(await denying.limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
    expect(denying.store.calls.consume).toBe(3);

    const falling = world(fixedWindow({ limit: 1, window: "1m" }));
    falling.store.fail = true;
    expect(await falling.limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
    for (let i = 0; i < 3; i++) expect(await falling.limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
    expect(falling.store.calls.consume).toBe(4);
    // the store is back: the next call asks it (nothing cached from the outage)
    falling.store.fail = false;
    expect(await falling.limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
  });

  it("timeouts", async () => {
    const time = { local: 0 };
    const hanging: Store = {
      bind: () => ({
        consume: () => new Promise(() => {}),
        peek: () => new Promise(() => {}),
        reset: () => undefined,
        refund: () => new Promise(() => {}),
        release: () => new Promise(() => {}),
      }),
    };
    const limiter = new RateLimiter({ store: hanging, limits: fixedWindow({ limit: 1, window: "1m" }), timeoutMs: 5, onStoreError: "deny", denyCache: { clock: () => time.local } });
    expect((await limiter.limit("k")).reason).toBe("timeout");
    expect((await limiter.limit("k")).reason).toBe("timeout");
  });
});

describe("deny cache: forgetting", () => {
  it("reset(key) forgets the key's denial: the next call asks the store", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }));
    await w.limiter.limit("k");
    await w.limiter.limit("k");
    await w.limiter.limit("other");
    await w.limiter.limit("other");
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    await w.limiter.reset("k");
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
    expect((await w.limiter.limit("other")).reason).toBe("cached-deny");
  });

  it("an entry lives at most maxAgeMs: another instance's unblock or raised quota is seen within it", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1h" }));
    await w.limiter.limit("k");
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    await w.direct.setOverride("k", { scale: 2 }); // another instance: this limiter's cache does not know
    w.advance(59_999);
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    w.advance(1);
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok", override: { scale: 2 } });
    await w.direct.block("k", "1h");
    expect((await w.limiter.limit("k")).reason).toBe("blocked");
    await w.direct.unblock("k");
    w.advance(10_000);
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    w.advance(50_000);
    expect((await w.limiter.limit("k")).reason).toBe("limit");
  });

  it("the limiter's own setOverride, clearOverride, block and unblock forget the key's cached denial", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1h" }));
    await w.limiter.limit("k");
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    await w.limiter.setOverride("k", { scale: 2 });
    expect((await w.limiter.limit("k")).reason).toBe("ok");
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    await w.limiter.clearOverride("k");
    expect((await w.limiter.limit("k")).reason).toBe("limit");
    await w.limiter.block("k", "1m");
    expect((await w.limiter.limit("k")).reason).toBe("blocked");
    expect((await w.limiter.limit("k")).reason).toBe("cached-deny");
    await w.limiter.unblock("k");
    expect((await w.limiter.limit("k")).reason).toBe("limit");
  });

  it("maxKeys bounds it: the least recently used key is forgotten first", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }), { denyCache: { maxKeys: 2, clock: () => w.time.local } });
    const deny = async (key: string) => {
      await w.limiter.limit(key);
      expect((await w.limiter.limit(key)).reason).toBe("limit");
    };
    await deny("a");
    await deny("b");
    expect((await w.limiter.limit("a")).reason).toBe("cached-deny"); // a is now the most recently used
    await deny("c"); // b goes
    expect((await w.limiter.limit("a")).reason).toBe("cached-deny");
    expect((await w.limiter.limit("c")).reason).toBe("cached-deny");
    expect((await w.limiter.limit("b")).reason).toBe("limit");
  });

  it("each limiter has its own cache", async () => {
    const time = { now: T0 };
    const store = new RemoteStore(() => time.now);
    const limits = fixedWindow({ limit: 1, window: "1m" });
    const one = new RateLimiter({ store, limits });
    const two = new RateLimiter({ store, limits });
    await one.limit("k");
    await one.limit("k");
    expect((await one.limit("k")).reason).toBe("cached-deny");
    expect((await two.limit("k")).reason).toBe("limit");
  });
});

describe("deny cache and dry run", () => {
  it("a dry-run limiter caches denials too, and marks them", async () => {
    const w = world(fixedWindow({ limit: 1, window: "1m" }), { mode: "dry-run" });
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: true, dryRun: true, reason: "ok" });
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: false, dryRun: true, reason: "limit" });
    expect(await w.limiter.limit("k")).toMatchObject({ allowed: false, dryRun: true, reason: "cached-deny" });
    expect(w.store.calls.consume).toBe(2);
  });
});

describe("configuration errors name the option", () => {
  const limits = fixedWindow({ limit: 1, window: "1m" });
  it.each([
    [5, /^\[sluice\] denyCache must be true, false or \{ maxKeys\?, maxAgeMs\?, clock\? \}; got 5$/, "denyCache"],
    ["yes", /^\[sluice\] denyCache must be true, false/, "denyCache"],
    [null, /^\[sluice\] denyCache must be true, false/, "denyCache"],
    [{ maxKeys: 0 }, /^\[sluice\] denyCache\.maxKeys must be a positive integer; got 0$/, "denyCache.maxKeys"],
    [{ maxKeys: 1.5 }, /denyCache\.maxKeys must be a positive integer; got 1\.5/, "denyCache.maxKeys"],
    [{ maxKeys: "10" }, /denyCache\.maxKeys must be a positive integer; got "10"/, "denyCache.maxKeys"],
    [{ clock: 1 }, /^\[sluice\] denyCache\.clock must be a function/, "denyCache.clock"],
    [{ maxkeys: 10 }, /^\[sluice\] denyCache\.maxkeys is not an option: denyCache takes maxKeys, maxAgeMs and clock$/, "denyCache.maxkeys"],
    [{ maxAgeMs: 0 }, /^\[sluice\] denyCache\.maxAgeMs must be a positive integer of ms; got 0$/, "denyCache.maxAgeMs"],
  ])("denyCache: %o", (denyCache, message, option) => {
    expect(() => new RateLimiter({ limits, denyCache: denyCache as never })).toThrow(SluiceConfigError);
    expect(() => new RateLimiter({ limits, denyCache: denyCache as never })).toThrow(message);
    expect(() => new RateLimiter({ limits, denyCache: denyCache as never })).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("mode", () => {
    expect(() => new RateLimiter({ limits, mode: "shadow" as never })).toThrow(/^\[sluice\] mode must be "enforce" or "dry-run"; got "shadow"$/);
    expect(new RateLimiter({ limits }).mode).toBe("enforce");
    expect(new RateLimiter({ limits, mode: "dry-run" }).mode).toBe("dry-run");
  });

  it("a tiered guard's denyCache", () => {
    const options = { tiers: { free: limits }, tier: () => "free", key: () => "k" };
    expect(() => createGuard({ ...options, denyCache: { maxKeys: -1 } })).toThrow(/^\[sluice\] denyCache\.maxKeys must be a positive integer; got -1$/);
    expect(() => createGuard({ ...options, denyCache: { maxKeys: 5 } })).not.toThrow();
  });
});
