import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  DEFAULT_TIMEOUT_MS,
  MemoryStore,
  RateLimiter,
  SluiceTimeoutError,
  type Store,
  fixedWindow,
} from "./index.js";
import type { BoundStore, StoreResult } from "./types.js";

// The default timeout asks a store that can tell a busy server from a hung one
// (BoundStore.extendTimeout) whether to keep waiting; an explicit timeoutMs is a hard limit. Fake
// timers: every instant below is exact.

/** A store whose calls hang until `answer()`, and whose extendTimeout answers from `extensions` (ms), logging each question. */
class SlowStore implements Store {
  readonly asked: [waitedMs: number, timeoutMs: number][] = [];
  extensions: number[] = [];
  #pending: (() => void)[] = [];
  readonly #memory = new MemoryStore({ clock: () => 0 });

  constructor(readonly extendable = true) {}

  /** Answers every call waiting. */
  answer(): void {
    for (const resolve of this.#pending.splice(0)) resolve();
  }

  bind(namespace: Parameters<Store["bind"]>[0]): BoundStore {
    const inner = this.#memory.bind(namespace);
    const later = <T>(work: () => T) => new Promise<T>((resolve) => this.#pending.push(() => resolve(work())));
    const bound: BoundStore = {
      consume: (key, cost) => later(() => inner.consume(key, cost) as StoreResult),
      peek: (key) => later(() => inner.peek(key) as StoreResult),
      reset: (key) => later(() => inner.reset(key) as void),
      refund: (key, cost, charge) => later(() => inner.refund(key, cost, charge) as StoreResult),
      release: (key, lease) => later(() => inner.release(key, lease) as StoreResult),
    };
    if (this.extendable) {
      bound.extendTimeout = (waitedMs, timeoutMs) => {
        this.asked.push([waitedMs, timeoutMs]);
        return this.extensions.shift() ?? 0;
      };
    }
    return bound;
  }
}

/** Whether the promise has settled, after the microtasks that follow a timer have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe("the default timeout and BoundStore.extendTimeout", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const limits = fixedWindow({ limit: 5, window: "1m" });

  it("asks the store at each expiry and waits what it grants; the call is answered by the store", async () => {
    const store = new SlowStore();
    store.extensions = [400, 250];
    const limiter = new RateLimiter({ store, limits });
    const decision = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(DEFAULT_TIMEOUT_MS - 1);
    expect(store.asked).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(store.asked).toEqual([[1000, 1000]]);
    await vi.advanceTimersByTimeAsync(400);
    expect(store.asked).toEqual([
      [1000, 1000],
      [1400, 1000],
    ]);
    await vi.advanceTimersByTimeAsync(100);
    store.answer();
    expect(await decision).toMatchObject({ allowed: true, reason: "ok", remaining: 4 });
  });

  it("times out when the store grants nothing more, with the time it waited in the message", async () => {
    const store = new SlowStore();
    store.extensions = [400];
    const failures: unknown[] = [];
    const limiter = new RateLimiter({ store, limits, onStoreFailure: (e) => failures.push(e) });
    const decision = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(1399);
    expect(await settled(decision)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await decision).toMatchObject({ allowed: true, reason: "timeout", remaining: 4 });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
    expect((failures[0] as Error).message).toBe(
      "[sluice] store did not answer within timeoutMs (1000 ms; waited 1400 ms while the store answered other calls)",
    );
  });

  it("a store without extendTimeout: the default is a hard 1000 ms", async () => {
    const store = new SlowStore(false);
    const limiter = new RateLimiter({ store, limits });
    const decision = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(decision)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect((await decision).reason).toBe("timeout");
  });

  it("an explicit timeoutMs is a hard limit: the store is never asked", async () => {
    const store = new SlowStore();
    store.extensions = [5000];
    const limiter = new RateLimiter({ store, limits, timeoutMs: 300 });
    const decision = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(300);
    expect((await decision).reason).toBe("timeout");
    expect(store.asked).toEqual([]);
  });

  it("applies to peek, reset, refund and release as well", async () => {
    const store = new SlowStore();
    const limiter = new RateLimiter({ store, limits });
    store.extensions = [10];
    const peek = limiter.peek("k");
    await vi.advanceTimersByTimeAsync(1010);
    expect((await peek).reason).toBe("timeout");
    store.extensions = [10];
    const reset = limiter.reset("k");
    const failed = expect(reset).rejects.toBeInstanceOf(SluiceTimeoutError);
    await vi.advanceTimersByTimeAsync(1009);
    expect(await settled(reset)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await failed;
    expect(store.asked).toEqual([
      [1000, 1000],
      [1010, 1000],
      [1000, 1000],
      [1010, 1000],
    ]);
  });
});
