import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { concurrency, fixedWindow, isPolicy, tokenBucket } from "../index.js";
import { concurrencyAlgorithm } from "./index.js";
import { SluiceConfigError, SluiceInputError, SluiceStoreError } from "../../errors.js";
import { compileRateLimitHeaders, ietfPolicyHeader, setRateLimitHeaders } from "../../headers.js";
import { RateLimiter } from "../../limiter/index.js";
import { MemoryStore } from "../../memory-store.js";
import { type StoredState, decideState, peekState, refundState, releaseState } from "../../store.js";
import type { BoundStore, Store, StoreNamespace } from "../../types.js";

const T0 = Date.UTC(2026, 0, 1);

testAlgorithm(concurrencyAlgorithm);

describe("concurrency, request by request", () => {
  it("one slot per request whatever its cost, held for the lease; a denial waits for the earliest lease to end", () => {
    const policy = concurrency({ limit: 2, lease: "1s" });
    expect(decideSequence(concurrencyAlgorithm, policy, [[0, 1], [0, 5], [0, 1], [999, 1], [1000, 1]])).toEqual([
      "allow r=1 reset=1000 refill=1000",
      "allow r=0 reset=1000 refill=1000",
      "deny r=0 retry=1000 reset=1000",
      "deny r=0 retry=1 reset=1000",
      "allow r=1 reset=2000 refill=2000",
    ]);
  });
});

describe("concurrency()", () => {
  it("validates its options like every factory; default name and a 30 s lease", () => {
    const p = concurrency({ limit: 3 });
    expect(p).toEqual({ kind: "concurrency", name: "3-in-flight", limit: 3, leaseMs: 30_000, windowSeconds: 30 });
    expect(Object.isFrozen(p)).toBe(true);
    expect(isPolicy(p)).toBe(true);
    expect(concurrency({ limit: 2, lease: "1500ms", name: "exports" })).toMatchObject({ name: "exports", leaseMs: 1500, windowSeconds: 2 });
    expect(() => concurrency({ limit: 0 })).toThrow("[sluice] limit must be a positive safe integer; got 0");
    expect(() => concurrency({ limit: 1.5 })).toThrow(SluiceConfigError);
    expect(() => concurrency({ limit: 2, lease: "soon" as never })).toThrow(/^\[sluice\] lease must be/);
    expect(() => concurrency({ limit: 2, lease: 0 })).toThrow(/^\[sluice\] lease must be/);
    expect(() => concurrency({ limit: 2, name: "has space" })).toThrow(/^\[sluice\] name must be/);
    expect(() => concurrency(undefined as never)).toThrow("[sluice] options must be an object (the options of concurrency()); got undefined");
    // a concurrency denial ends when a request finishes: no penalty box
    expect(() => concurrency({ limit: 2, block: "15m" } as never)).toThrow(/^\[sluice\] block must be left out of concurrency\(\)/);
    expect(isPolicy({ ...p, block: { baseMs: 1000, factor: 1, maxMs: 1000 } })).toBe(false);
    expect(isPolicy({ ...p, leaseMs: 0 })).toBe(false);
  });

  it("writes RateLimit-Policy with qu=\"concurrent-requests\" and no w; r is the free slots", async () => {
    const policies = [concurrency({ limit: 2, name: "exports" }), fixedWindow({ limit: 100, window: "1h", name: "hourly" })];
    expect(ietfPolicyHeader(policies)).toBe('"exports";q=2;qu="concurrent-requests", "hourly";q=100;w=3600');
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: policies });
    const first = await limiter.limit("k");
    const headers = new Headers();
    setRateLimitHeaders(headers, first, ["ietf", "legacy"], policies);
    expect(Object.fromEntries(headers)).toEqual({
      "ratelimit-policy": '"exports";q=2;qu="concurrent-requests", "hourly";q=100;w=3600',
      ratelimit: '"exports";r=1;t=1, "hourly";r=99;t=3600',
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "1",
      "x-ratelimit-reset": String(Math.ceil((T0 + 30_000) / 1000)),
    });
    await limiter.limit("k");
    const denied = await limiter.limit("k");
    const draft7 = new Headers();
    compileRateLimitHeaders(["draft-7"], policies)(draft7, denied, undefined);
    expect(Object.fromEntries(draft7)).toEqual({ ratelimit: "limit=2, remaining=0, reset=30", "ratelimit-policy": "2", "retry-after": "1" });
  });
});

describe("RateLimiter with a concurrency policy", () => {
  const limits = [concurrency({ limit: 1, name: "one" })];

  it("draws a fresh random lease per limit() call, only when allowed and only with a concurrency policy", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: concurrency({ limit: 100 }) });
    const leases = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const d = await limiter.limit("k");
      expect(d.lease).toMatch(/^[1-9][0-9]{0,15}$/);
      expect(Number.isSafeInteger(Number(d.lease))).toBe(true);
      leases.add(d.lease as string);
    }
    expect(leases.size).toBe(100);
    expect((await limiter.limit("k")).lease).toBeUndefined();
    const plain = new RateLimiter({ limits: fixedWindow({ limit: 5, window: "1m" }) });
    expect("lease" in (await plain.limit("k"))).toBe(false);
  });

  it("release() takes the decision or its lease string; refuses anything else; a decision without a lease releases nothing", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits });
    const held = await limiter.limit("k");
    const denied = await limiter.limit("k");
    expect(denied.allowed).toBe(false);
    expect((await limiter.release("k", denied)).remaining).toBe(0);
    for (const bad of ["", "0", "-1", "1.5", "01", "9007199254740993", "abc", 7, null, undefined, {}]) {
      await expect(limiter.release("k", bad as never), String(bad)).rejects.toThrow(SluiceInputError);
    }
    await expect(limiter.release("", held)).rejects.toThrow(SluiceInputError);
    expect((await limiter.release("k", held.lease as string)).remaining).toBe(1);
    // without a concurrency policy there is nothing to release: the state comes back
    const plain = new RateLimiter({ limits: fixedWindow({ limit: 5, window: "1m" }) });
    expect((await plain.release("k", "123")).remaining).toBe(5);
  });

  it("a dry-run limiter holds leases exactly as an enforcing one", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits, mode: "dry-run" });
    const held = await limiter.limit("k");
    expect([held.allowed, held.dryRun, typeof held.lease]).toEqual([true, true, "string"]);
    const second = await limiter.limit("k");
    expect([second.allowed, second.dryRun, second.lease]).toEqual([false, true, undefined]);
    await limiter.release("k", held);
    expect((await limiter.limit("k")).allowed).toBe(true);
  });

  it("a store without release() or refund() is a SluiceConfigError (option store) at construction, whatever the limits", () => {
    const inner = new MemoryStore();
    const without = (method: "refund" | "release"): Store => ({
      bind(namespace) {
        const bound = inner.bind(namespace);
        const all: Record<string, unknown> = {
          consume: (k: string, c: number, lease?: number) => bound.consume(k, c, lease),
          peek: (k: string) => bound.peek(k),
          reset: (k: string) => bound.reset(k),
          refund: (k: string, c: number, charge: undefined) => bound.refund(k, c, charge),
          release: (k: string, lease: number) => bound.release(k, lease),
        };
        delete all[method];
        return all as unknown as BoundStore;
      },
    });
    for (const method of ["refund", "release"] as const) {
      for (const limits of [concurrency({ limit: 1 }), fixedWindow({ limit: 1, window: "1m" })]) {
        let thrown: unknown;
        try {
          new RateLimiter({ store: without(method), limits });
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(SluiceConfigError);
        expect(thrown).toMatchObject({
          code: "SLUICE_CONFIG",
          option: "store",
          message: `[sluice] store must be a Store whose bind(namespace) returns the methods consume, peek, reset, refund, release; got a bound namespace without ${method}()`,
        });
      }
    }
    expect(() => new RateLimiter({ store: inner, limits })).not.toThrow();
  });

  it("passes the lease to the store; the fallback store holds it while the store is down, and release frees it there (and resolves)", async () => {
    let down = false;
    const calls: string[] = [];
    const inner = new MemoryStore();
    const flaky: Store = {
      bind(namespace: StoreNamespace): BoundStore {
        const bound = inner.bind(namespace);
        return {
          consume: async (k, c, lease) => {
            calls.push(`consume ${lease === undefined ? "-" : "lease"}`);
            if (down) throw new SluiceStoreError("down");
            return bound.consume(k, c, lease);
          },
          peek: async (k) => bound.peek(k),
          reset: async (k) => bound.reset(k),
          release: async (k, lease) => {
            calls.push("release");
            if (down) throw new SluiceStoreError("down");
            return bound.release(k, lease);
          },
          refund: async (k, c, charge) => bound.refund(k, c, charge),
        };
      },
    };
    const failures: unknown[] = [];
    const limiter = new RateLimiter({ store: flaky, limits, onStoreFailure: (e) => failures.push(e), denyCache: false });
    const a = await limiter.limit("k");
    expect(a.lease).toBeDefined();
    await limiter.release("k", a);
    down = true;
    const b = await limiter.limit("k");
    expect([b.allowed, b.reason, typeof b.lease]).toEqual([true, "store-error", "string"]);
    expect((await limiter.limit("k")).allowed).toBe(false); // the fallback holds b's slot
    // the store is still down, but b's lease lives in the fallback: freed there, and the release resolves
    const released = await limiter.release("k", b);
    expect([released.reason, released.remaining]).toEqual(["store-error", 1]);
    expect(failures.at(-1)).toBeInstanceOf(SluiceStoreError); // the store's failure is reported all the same
    expect((await limiter.limit("k")).allowed).toBe(true); // the fallback's slot was freed
    // a lease the fallback never held: the store's failure is the answer
    await expect(limiter.release("k", "12345")).rejects.toThrow(SluiceStoreError);
    expect(calls.slice(0, 3)).toEqual(["consume lease", "release", "consume lease"]);
    const allow = new RateLimiter({ store: flaky, limits, onStoreError: "allow", denyCache: false });
    const c = await allow.limit("k");
    expect([c.allowed, c.reason, c.lease]).toEqual([true, "store-error", undefined]); // no store held anything
  });

  it("the deny cache never holds a denial the concurrency cap binds (a slot may free in any process); a rate denial it does, until a release clears it", async () => {
    const inner = new MemoryStore();
    let consumed = 0;
    const remote: Store = {
      bind(namespace) {
        const bound = inner.bind(namespace);
        return {
          consume: async (k, c, lease) => (consumed++, bound.consume(k, c, lease)),
          peek: async (k) => bound.peek(k),
          reset: async (k) => bound.reset(k),
          release: async (k, lease) => bound.release(k, lease),
          refund: async (k, c, charge) => bound.refund(k, c, charge),
        };
      },
    };
    // asynchronous: the deny cache is on
    const limiter = new RateLimiter({ store: remote, limits: [concurrency({ limit: 1, name: "one" }), fixedWindow({ limit: 3, window: "1h", name: "hourly" })] });
    const held = await limiter.limit("k");
    expect([(await limiter.limit("k")).reason, (await limiter.limit("k")).reason, consumed]).toEqual(["limit", "limit", 3]);
    // another process frees the slot (straight to the store): this one sees it at once
    await inner.bind({ prefix: "sluice", policies: limiter.policies }).release("k", Number(held.lease));
    const second = await limiter.limit("k");
    expect(second.allowed).toBe(true);
    await limiter.release("k", second);
    await limiter.release("k", await limiter.limit("k"));
    // the hourly window is spent: that denial (60 min) is cached...
    expect([(await limiter.limit("k")).policy, (await limiter.limit("k")).reason]).toEqual(["hourly", "cached-deny"]);
    // ...and a release clears it
    await limiter.release("k", "123");
    const count = consumed;
    await limiter.limit("k");
    expect(consumed).toBe(count + 1);
  });
});

describe("@sluice/core/store: leases in a JSON state", () => {
  const policies = [concurrency({ limit: 2, lease: "10s", name: "c" }), tokenBucket({ capacity: 5, refillRate: 1, name: "b" })];
  const now = T0 * 1000;

  it("decideState stores the live leases as [expires, expires, id, ...]; releaseState frees one; refundState frees none", () => {
    const a = decideState(policies, undefined, now, 1, 11);
    expect(a.state?.["c|cc"]).toEqual([now + 10_000_000, now + 10_000_000, 11]);
    const b = decideState(policies, a.state, now + 1000, 1, 22);
    expect(b.state?.["c|cc"]).toEqual([now + 10_001_000, now + 10_000_000, 11, now + 10_001_000, 22]);
    const c = decideState(policies, b.state, now + 2000, 1, 33);
    expect([c.policies[0]?.allowed, c.state]).toEqual([false, undefined]);
    expect(refundState(policies, b.state, now + 2000, 1, undefined).state?.["c|cc"]).toEqual(b.state?.["c|cc"]);
    const released = releaseState(policies, b.state, now + 3000, 11);
    expect(released.state?.["c|cc"]).toEqual([now + 10_001_000, now + 10_001_000, 22]);
    expect(released.policies[0]).toMatchObject({ allowed: true, remaining: 1 });
    expect(releaseState(policies, released.state, now + 3000, 11).state).toBeUndefined(); // idempotent
    expect(releaseState(policies, released.state, now + 3000, 22).state?.["c|cc"]).toBeUndefined(); // none left: the field goes
    expect(() => releaseState(policies, b.state, now, 0)).toThrow(SluiceInputError);
    expect(() => decideState(policies, undefined, now, 1, -1)).toThrow(SluiceInputError);
  });

  it("expired or malformed leases read as free slots", () => {
    const state: StoredState = { "c|cc": [now + 5, now + 5, 1, now - 1, 2] };
    expect(peekState(policies, state, now).policies[0]).toMatchObject({ remaining: 1 });
    expect(peekState(policies, { "c|cc": [now + 5, now + 5] }, now).policies[0]).toMatchObject({ remaining: 2 });
    expect(peekState(policies, { "c|cc": [now + 5, now + 5, -3] }, now).policies[0]).toMatchObject({ remaining: 2 });
    // a write drops the expired lease
    expect(decideState(policies, state, now, 1, 9).state?.["c|cc"]).toEqual([now + 10_000_000, now + 5, 1, now + 10_000_000, 9]);
  });
});
