/**
 * A store that fails, hangs or answers late: `onStoreError` (`"fallback"`, `"allow"`, `"deny"`)
 * decides with reason `"store-error"` or `"timeout"`, `timeoutMs` bounds the wait (never a timer
 * for a synchronous store, none left behind), a late answer is ignored, and input and configuration
 * errors from the store are never swallowed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { STORE_FAILURE_RETRY_MS } from "./decision.js";
import {
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  SluiceConfigError,
  SluiceError,
  SluiceInputError,
  SluiceStoreError,
  SluiceTimeoutError,
  type Store,
  fixedWindow,
  tokenBucket,
} from "./index.js";
import type { BoundStore, StoreNamespace, StoreResult } from "./types.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

type Mode = "ok" | "reject" | "throw" | "hang" | "late-reject" | "late-resolve";

/** A real store that can break: delegates to a MemoryStore when "ok", else fails the chosen way. */
class BreakableStore implements Store {
  mode: Mode = "ok";
  error: unknown = new Error("ECONNREFUSED");
  calls = 0;
  readonly inner = new MemoryStore(); // the (faked) Date.now clock

  bind(namespace: StoreNamespace): BoundStore {
    const bound = this.inner.bind(namespace);
    const run = <T>(work: () => T): Promise<T> => {
      this.calls++;
      switch (this.mode) {
        case "ok":
          return Promise.resolve(work());
        case "reject":
          return Promise.reject(this.error);
        case "throw":
          throw this.error;
        case "hang":
          return new Promise<T>(() => {});
        case "late-reject":
          return new Promise<T>((_, reject) => setTimeout(() => reject(this.error), 100));
        case "late-resolve":
          return new Promise<T>((resolve) => setTimeout(() => resolve(work()), 100));
      }
    };
    return {
      // the memory store answers synchronously
      consume: (key, cost) => run(() => bound.consume(key, cost) as StoreResult),
      peek: (key) => run(() => bound.peek(key) as StoreResult),
      reset: (key) => run(() => bound.reset(key) as void),
      refund: (key, cost, charge) => run(() => bound.refund(key, cost, charge) as StoreResult),
      release: (key, lease) => run(() => bound.release(key, lease) as StoreResult),
    };
  }
}

describe("onStoreError", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const limit2 = fixedWindow({ limit: 2, window: "1m" });

  function setup(options: Partial<RateLimiterOptions> = {}) {
    const store = new BreakableStore();
    const failures: unknown[] = [];
    const limiter = new RateLimiter({ store, limits: limit2, onStoreFailure: (e) => failures.push(e), ...options });
    return { store, limiter, failures };
  }

  it.each(["reject", "throw"] as const)(
    '"fallback" (default), store that %ss: same limits in a per-instance memory store, reason "store-error"',
    async (mode) => {
      const { store, limiter, failures } = setup();
      expect(limiter.onStoreError).toBe("fallback");
      store.mode = mode;
      const decisions = [await limiter.limit("k"), await limiter.limit("k"), await limiter.limit("k")];
      expect(decisions.map((d) => [d.allowed, d.remaining, d.reason])).toEqual([
        [true, 1, "store-error"],
        [true, 0, "store-error"],
        [false, 0, "store-error"],
      ]);
      expect(decisions[2]).toMatchObject({ retryAfterMs: 18_000, resetAt: T0 + 18_000, now: T0, policy: "2-per-1m" });
      expect(failures).toEqual([store.error, store.error, store.error]);
      expect(store.inner.size).toBe(0); // nothing reached the real store
      // another key has its own fallback counts
      expect((await limiter.limit("other")).remaining).toBe(1);
    },
  );

  it("when the store recovers, decisions come from it again; the fallback keeps its counts for the next outage", async () => {
    const { store, limiter } = setup();
    store.mode = "reject";
    await limiter.limit("k");
    await limiter.limit("k");
    store.mode = "ok";
    const back = await limiter.limit("k");
    expect(back).toMatchObject({ allowed: true, remaining: 1, reason: "ok" }); // the store's own (fresh) count
    expect(await limiter.peek("k")).toMatchObject({ remaining: 1, reason: "ok" });
    expect(store.inner.size).toBe(1);
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
  });

  it("each limiter has its own fallback", async () => {
    const store = new BreakableStore();
    const a = new RateLimiter({ store, limits: limit2 });
    const b = new RateLimiter({ store, limits: limit2 });
    store.mode = "reject";
    await a.limit("k");
    await a.limit("k");
    expect((await a.limit("k")).allowed).toBe(false);
    expect(await b.limit("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
  });

  it("peek falls back too, consuming nothing", async () => {
    const { store, limiter } = setup();
    store.mode = "reject";
    await limiter.limit("k");
    expect(await limiter.peek("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
    expect(await limiter.peek("k")).toMatchObject({ remaining: 1 });
  });

  it('"allow": fails open with reason "store-error"', async () => {
    const { store, limiter, failures } = setup({ onStoreError: "allow" });
    store.mode = "reject";
    for (let i = 0; i < 5; i++) {
      const d = await limiter.limit("k");
      expect(d).toMatchObject({ allowed: true, reason: "store-error", limit: 2, remaining: 2, retryAfterMs: 0, delayMs: 0, resetAt: T0, now: T0 });
      expect(d.policies).toEqual([{ policy: "2-per-1m", allowed: true, limit: 2, remaining: 2, resetAt: T0, retryAfterMs: 0, delayMs: 0, refillAt: T0 }]);
    }
    expect(failures).toHaveLength(5);
  });

  it('"deny": fails closed with reason "store-error"', async () => {
    const { store, limiter } = setup({ onStoreError: "deny", limits: [limit2, tokenBucket({ capacity: 5, refillRate: 1 })] });
    store.mode = "throw";
    const d = await limiter.limit("k");
    expect(STORE_FAILURE_RETRY_MS).toBe(1000);
    expect(d).toMatchObject({
      allowed: false,
      reason: "store-error",
      policy: "2-per-1m",
      limit: 2,
      remaining: 0,
      retryAfterMs: 1000,
      resetAt: T0 + 1000,
      now: T0,
    });
    expect(d.policies.map((r) => [r.policy, r.allowed, r.remaining, r.retryAfterMs])).toEqual([
      ["2-per-1m", false, 0, 1000],
      ["5-burst-1-per-1s", false, 0, 1000],
    ]);
    store.mode = "ok";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
  });

  it.each([
    ["fallback", { allowed: true, remaining: 1 }],
    ["allow", { allowed: true, remaining: 2 }],
    ["deny", { allowed: false, remaining: 0 }],
  ] as const)('timeoutMs with a hanging store is a failure with reason "timeout" (%s)', async (onStoreError, expected) => {
    const { store, limiter, failures } = setup({ onStoreError, timeoutMs: 50 });
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(49);
    expect(decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(decision).toMatchObject({ ...expected, reason: "timeout" });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
    expect(failures[0]).toBeInstanceOf(SluiceError);
    expect(failures[0]).toMatchObject({ name: "SluiceTimeoutError", message: "[sluice] store did not answer within timeoutMs (50 ms)" });
  });

  it("the default timeoutMs is 1000 ms for an asynchronous store: a hung call becomes a SluiceTimeoutError", async () => {
    const { store, limiter, failures } = setup();
    expect(limiter.timeoutMs).toBe(1000);
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(999);
    expect(decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(decision).toMatchObject({ allowed: true, remaining: 1, reason: "timeout" }); // the fallback
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
    expect((failures[0] as Error).message).toBe("[sluice] store did not answer within timeoutMs (1000 ms)");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("with the real clock: timeoutMs 50 over a hung store gives reason \"timeout\" and a SluiceTimeoutError", async () => {
    vi.useRealTimers();
    const { store, limiter, failures } = setup({ timeoutMs: 50, onStoreError: "deny" });
    store.mode = "hang";
    const started = Date.now();
    const d = await limiter.limit("k");
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(d).toMatchObject({ allowed: false, reason: "timeout" });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
  });

  it("timeoutMs: false never times out and sets no timer", async () => {
    const { store, limiter, failures } = setup({ timeoutMs: false });
    expect(limiter.timeoutMs).toBe(false);
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(decision).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    expect(failures).toEqual([]);
    // a slow answer is used whenever it comes
    store.mode = "late-resolve";
    const late = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(100);
    expect(await late).toMatchObject({ allowed: true, reason: "ok", remaining: 1 });
  });

  it("a synchronous store is never wrapped in a timer", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: limit2 });
    expect(limiter.timeoutMs).toBe(1000);
    const pending = limiter.limit("k");
    expect(vi.getTimerCount()).toBe(0);
    expect(await pending).toMatchObject({ reason: "ok" });
  });

  it("a SluiceStoreError from the store is a store failure, not an exception", async () => {
    const { store, limiter, failures } = setup();
    store.mode = "reject";
    store.error = new SluiceStoreError("[sluice] [test] malformed reply");
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
    expect(failures).toEqual([store.error]);
  });

  it("a store that answers within timeoutMs is used, and no timer is left behind", async () => {
    const { store, limiter } = setup({ timeoutMs: 50 });
    expect(await limiter.limit("k")).toMatchObject({ reason: "ok", remaining: 1 });
    expect(vi.getTimerCount()).toBe(0);
    store.mode = "reject";
    expect((await limiter.limit("k")).reason).toBe("store-error");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an answer or a failure that arrives after the timeout is ignored (and never unhandled)", async () => {
    const { store, limiter, failures } = setup({ timeoutMs: 10 });
    store.mode = "late-reject";
    const first = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(10);
    expect((await first).reason).toBe("timeout");
    store.mode = "late-resolve";
    const second = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(10);
    expect((await second).reason).toBe("timeout");
    await vi.advanceTimersByTimeAsync(200); // the late rejection and the late answer land here
    expect(failures).toHaveLength(2);
    expect(store.inner.size).toBe(1); // the late consume did run in the store
  });

  it("a throwing onStoreFailure does not turn a decision into an exception", async () => {
    const store = new BreakableStore();
    const limiter = new RateLimiter({
      store,
      limits: limit2,
      onStoreFailure: () => {
        throw new Error("logger down");
      },
    });
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
  });

  it.each(["fallback", "allow", "deny"] as const)("SluiceInputError and SluiceConfigError from the store are never swallowed (%s)", async (onStoreError) => {
    const { store, limiter, failures } = setup({ onStoreError });
    store.mode = "reject";
    store.error = new SluiceInputError("[sluice] [redis] key must be shorter", { option: "key" });
    await expect(limiter.limit("k")).rejects.toBe(store.error);
    store.mode = "throw";
    await expect(limiter.peek("k")).rejects.toBe(store.error);
    store.error = new SluiceConfigError("[sluice] [redis] policies must be …", { option: "policies" });
    await expect(limiter.limit("k")).rejects.toBe(store.error);
    expect(failures).toEqual([]);
  });

  it("bad input is rejected before the store is asked, even when the store is down and fails open", async () => {
    const { store, limiter } = setup({ onStoreError: "allow" });
    store.mode = "reject";
    await expect(limiter.limit("k", { cost: 0 })).rejects.toThrow(SluiceInputError);
    await expect(limiter.limit("", { cost: 1 })).rejects.toThrow(SluiceInputError);
    expect(store.calls).toBe(0);
  });

  it("reset rejects when the store fails, and clears the fallback too", async () => {
    const { store, limiter } = setup({ timeoutMs: 50 });
    store.mode = "reject";
    await expect(limiter.reset("k")).rejects.toBe(store.error);
    store.mode = "throw";
    await expect(limiter.reset("k")).rejects.toBe(store.error);
    store.mode = "hang";
    const pending = limiter.reset("k");
    const settled = expect(pending).rejects.toThrow("[sluice] store did not answer within timeoutMs (50 ms)");
    await vi.advanceTimersByTimeAsync(50);
    await settled;

    // consume through the fallback, then reset while the store is up: both forget the key
    store.mode = "reject";
    await limiter.limit("k");
    await limiter.limit("k");
    store.mode = "ok";
    await limiter.limit("k");
    await limiter.reset("k");
    expect((await limiter.peek("k")).remaining).toBe(2);
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
  });
});
