/**
 * The conformance suite's section on per-key overrides and manual blocks (`limiter.setOverride`,
 * `getOverride`, `clearOverride`, `block`, `unblock`), run on every store by `testStore`: exact
 * decision sequences on the store's test clock for `{ scale }` on every kind, `{ quotas }`,
 * `{ unlimited: true }`, a `ttl` ending at its exact millisecond, the state an override leaves
 * behind, bad input (refused before the store is asked, nothing stored changes), manual blocks
 * (`reason: "blocked"`, `retryAfterMs` to the block's end, `unblock` lifting penalty boxes too, a
 * block beating `unlimited`, `reset` forgetting both), a second limiter on the same store and
 * prefix, the headers, and the calls each operation makes to the store's bound namespace (one).
 *
 * The numbers are the contract's: a quota `Q` scaled to `Q' = min(max, max(1, floor(Q × scale)))`;
 * a window keeps its length; a bucket's queue becomes `floor(queue × Q'/Q)` and its emission
 * interval `T' = max(1, ceil(T × Q/Q'))` µs.
 *
 * @module
 */
import {
  type Decision,
  type Override,
  RateLimiter,
  SluiceInputError,
  type Store,
  concurrency,
  fixedWindow,
  leakyBucket,
  setRateLimitHeaders,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import { type BoundStore, type StoreNamespace, maxQuota } from "@sluice/core/store";
import { describe, expect, it } from "vitest";
import type { InvariantHooks } from "./invariants.js";

/**
 * A store whose bound namespaces are Proxies over the store's own, recording the name of every
 * method called on them (`consume`, `peek`, `control`, … — `consumePolicies` for a `MemoryStore`,
 * which the limiter calls directly): one call is one round trip of a store that crosses a network.
 */
export function countingStore(inner: Store): { store: Store; calls: string[] } {
  const calls: string[] = [];
  const store: Store = {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      return new Proxy(bound, {
        get(target, property) {
          const value: unknown = Reflect.get(target, property, target);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            calls.push(String(property));
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
    },
  };
  return { store, calls };
}

/** The parts of a decision the sequences compare (times relative to the suite's T0). */
interface Brief {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetAt: number;
  retryAfterMs: number;
  delayMs: number;
  reason: string;
}

/** Registers the overrides and manual blocks section (call inside a store's `describe`). */
export function testOverrides(hooks: InvariantHooks): void {
  const at = (ms: number) => hooks.setNow(hooks.t0 + ms);
  const brief = (d: Decision): Brief => ({
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetAt: d.resetAt - hooks.t0,
    retryAfterMs: d.retryAfterMs,
    delayMs: d.delayMs,
    reason: d.reason,
  });
  const burst = async (l: RateLimiter, key: string, n: number, cost = 1) => {
    const out: Decision[] = [];
    for (let i = 0; i < n; i++) out.push(await l.limit(key, { cost }));
    return out;
  };
  /** The error a call rejects with (or throws), or `undefined` when it succeeds. */
  const failure = async (call: () => Promise<unknown>): Promise<unknown> => {
    try {
      await call();
    } catch (error) {
      return error;
    }
    return undefined;
  };

  describe("{ scale } on each kind", () => {
    it("fixedWindow: limit × scale per window, the window unchanged", async () => {
      const l = hooks.limiter([fixedWindow({ limit: 3, window: "1s", name: "fixed" })]);
      at(500);
      await l.setOverride("k", { scale: 2 });
      const seen = await burst(l, "k", 7);
      expect(seen.map(brief)).toEqual([
        ...[5, 4, 3, 2, 1, 0].map((remaining) => ({ allowed: true, limit: 6, remaining, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" })),
        { allowed: false, limit: 6, remaining: 0, resetAt: 1000, retryAfterMs: 500, delayMs: 0, reason: "limit" },
      ]);
      expect(seen.map((d) => d.override)).toEqual(Array(7).fill({ scale: 2 }));
      expect(seen[6]!.policies).toEqual([{ policy: "fixed", allowed: false, limit: 6, remaining: 0, resetAt: hooks.t0 + 1000, retryAfterMs: 500, delayMs: 0, refillAt: hooks.t0 + 1000 }]);
      at(1000);
      expect(brief(await l.limit("k"))).toEqual({ allowed: true, limit: 6, remaining: 5, resetAt: 2000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      expect(brief(await l.limit("k", { cost: 6 }))).toMatchObject({ allowed: false, retryAfterMs: 1000, reason: "limit" });
      expect(brief(await l.limit("k", { cost: 7 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
      // another key keeps the base quota
      expect(brief(await l.limit("other", { cost: 4 }))).toMatchObject({ allowed: false, limit: 3, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
      expect((await l.limit("other")).override).toBeUndefined();
    });

    it("slidingWindow: limit × scale (4 × 2.5 = 10), weighted as ever", async () => {
      const l = hooks.limiter([slidingWindow({ limit: 4, window: "1s", name: "sliding" })]);
      at(0);
      await l.setOverride("k", { scale: 2.5 });
      const first = await burst(l, "k", 10);
      expect(first.map((d) => [d.allowed, d.limit, d.remaining, d.resetAt - hooks.t0])).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map((r) => [true, 10, r, 2000]));
      // 11th: 10 × (1000 − r) + 1 × 1000 <= 10 × 1000 once r >= 100 in the next window
      expect(brief(await l.limit("k"))).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 2000, retryAfterMs: 1100, delayMs: 0, reason: "limit" });
      at(1099);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
      at(1100);
      expect(brief(await l.limit("k"))).toEqual({ allowed: true, limit: 10, remaining: 0, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    });

    it("slidingLog: limit × scale, rounded down (2 × 1.5 = 3); an entry leaves one window after it", async () => {
      const l = hooks.limiter([slidingLog({ limit: 2, window: "1s", name: "log" })]);
      await l.setOverride("k", { scale: 1.5 });
      const seen: Brief[] = [];
      for (const t of [100, 200, 300, 400]) {
        at(t);
        seen.push(brief(await l.limit("k")));
      }
      expect(seen).toEqual([
        { allowed: true, limit: 3, remaining: 2, resetAt: 1100, retryAfterMs: 0, delayMs: 0, reason: "ok" },
        { allowed: true, limit: 3, remaining: 1, resetAt: 1200, retryAfterMs: 0, delayMs: 0, reason: "ok" },
        { allowed: true, limit: 3, remaining: 0, resetAt: 1300, retryAfterMs: 0, delayMs: 0, reason: "ok" },
        { allowed: false, limit: 3, remaining: 0, resetAt: 1300, retryAfterMs: 700, delayMs: 0, reason: "limit" },
      ]);
      at(1099);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
      at(1100);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, remaining: 0, resetAt: 2100 });
    });

    it("slidingLog holding more than its quota once an override ends: the quota grows when the surplus has left, not at the oldest entry", async () => {
      // limit 2 × 3 = 6 until 200; at 300 the log holds 6 units against a quota of 2, so a unit is
      // free again only once the entries holding 5 of them have left: the last one, at 1180
      const l = hooks.limiter([slidingLog({ limit: 2, window: "1s", name: "log" })]);
      at(0);
      await l.setOverride("k", { scale: 3 }, { ttl: 200 });
      for (const t of [100, 150, 180]) {
        at(t);
        expect((await l.limit("k", { cost: 2 })).allowed).toBe(true);
      }
      at(300);
      const denied = await l.limit("k");
      expect(brief(denied)).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 1180, retryAfterMs: 880, delayMs: 0, reason: "limit" });
      expect(denied.policies[0]!.refillAt - hooks.t0).toBe(1180);
      expect((await l.peek("k")).policies[0]!.refillAt - hooks.t0).toBe(1180);
      at(1179);
      expect((await l.limit("k")).allowed).toBe(false);
      at(1180);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
    });

    it("tokenBucket: capacity and rate × scale (4 per 2/s × 2.5: 10 tokens, one per 200 ms)", async () => {
      // T = 500,000 µs; T' = ceil(500,000 × 4 / 10) = 200,000 µs
      const l = hooks.limiter([tokenBucket({ capacity: 4, refillRate: 2, name: "burst" })]);
      at(0);
      await l.setOverride("k", { scale: 2.5 });
      const full = await burst(l, "k", 10);
      expect(full.map((d) => [d.limit, d.remaining, d.resetAt - hooks.t0])).toEqual(Array.from({ length: 10 }, (_, i) => [10, 9 - i, (i + 1) * 200]));
      const denied = await l.limit("k");
      expect(brief(denied)).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 2000, retryAfterMs: 200, delayMs: 0, reason: "limit" });
      expect(denied.policies[0]!.refillAt - denied.now).toBe(200);
      at(199);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
      at(200);
      expect(brief(await l.limit("k"))).toEqual({ allowed: true, limit: 10, remaining: 0, resetAt: 2200, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      at(1300);
      // 2200 − 1300 = 900 ms behind full: 10 − ceil(900 / 200) = 5 whole tokens
      expect(brief(await l.peek("k"))).toEqual({ allowed: true, limit: 10, remaining: 5, resetAt: 2200, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      expect(brief(await l.limit("k", { cost: 11 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
    });

    it("leakyBucket: burst, queue and rate × scale (10/s, burst 5, queue 3 × 2: burst 10, queue 6, a drop per 50 ms)", async () => {
      const l = hooks.limiter([leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3, name: "shaper" })]);
      at(0);
      await l.setOverride("k", { scale: 2 });
      const seen = (await burst(l, "k", 17)).map(brief);
      expect(seen.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => ({ allowed: true, limit: 10, remaining: 9 - i, resetAt: (i + 1) * 50, retryAfterMs: 0, delayMs: 0, reason: "ok" })));
      expect(seen.slice(10, 16)).toEqual(Array.from({ length: 6 }, (_, i) => ({ allowed: true, limit: 10, remaining: 0, resetAt: 550 + i * 50, retryAfterMs: 0, delayMs: (i + 1) * 50, reason: "ok" })));
      expect(seen[16]).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 800, retryAfterMs: 50, delayMs: 0, reason: "limit" });
      expect(brief(await l.limit("k", { cost: 17 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
      at(49);
      expect((await l.limit("k")).allowed).toBe(false);
      at(50);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, delayMs: 300 });
    });

    it("a bucket deeper than its lowered burst and queue gains its first unit when the depth is back within them, not at the next drip", async () => {
      // burst 3 + queue 1, a drop per 100 ms, filled at 0 (TAT 400 ms); { scale: 0.5 }: burst 1,
      // no queue (floor(1 × 1 / 3)), a drop per 300 ms: 100 ms too deep, so the first unit is back
      // at 400 (a credit of T), not at 100 (the next multiple of T)
      const l = hooks.limiter([leakyBucket({ rate: 10, period: "1s", burst: 3, queue: 1, name: "shaper" })]);
      at(0);
      expect((await burst(l, "k", 4)).map((d) => [d.allowed, d.delayMs])).toEqual([
        [true, 0],
        [true, 0],
        [true, 0],
        [true, 100],
      ]);
      await l.setOverride("k", { scale: 0.5 });
      const denied = await l.limit("k");
      expect(brief(denied)).toEqual({ allowed: false, limit: 1, remaining: 0, resetAt: 400, retryAfterMs: 400, delayMs: 0, reason: "limit" });
      expect(denied.policies[0]!.refillAt - hooks.t0).toBe(400);
      at(399);
      expect((await l.limit("k")).allowed).toBe(false);
      at(400);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 1, remaining: 0, delayMs: 0 });
    });

    it("concurrency: slots × scale (2 × 1.5 = 3); a release frees one", async () => {
      const l = hooks.limiter([concurrency({ limit: 2, name: "exports" })]);
      at(0);
      await l.setOverride("k", { scale: 1.5 });
      const held = await burst(l, "k", 4);
      expect(held.map((d) => [d.allowed, d.limit, d.remaining, d.lease !== undefined])).toEqual([
        [true, 3, 2, true],
        [true, 3, 1, true],
        [true, 3, 0, true],
        [false, 3, 0, false],
      ]);
      await l.release("k", held[0]!);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, remaining: 0 });
    });

    it("concurrency holding more leases than its quota once an override is cleared: a slot is back when the surplus and one more have expired", async () => {
      // 2 × 2 = 4 leases of 1 s taken at 0, 10, 20, 30; cleared at 40: 4 held against 2, so the
      // third expiry (1020) frees a slot under the quota, not the first (1000)
      const l = hooks.limiter([concurrency({ limit: 2, lease: "1s", name: "exports" })]);
      await l.setOverride("k", { scale: 2 });
      for (const t of [0, 10, 20, 30]) {
        at(t);
        expect((await l.limit("k")).allowed).toBe(true);
      }
      at(40);
      await l.clearOverride("k");
      const denied = await l.limit("k");
      expect(brief(denied)).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 1030, retryAfterMs: 980, delayMs: 0, reason: "limit" });
      expect(denied.policies[0]!.refillAt - hooks.t0).toBe(1020);
      at(1019);
      expect((await l.limit("k")).allowed).toBe(false);
      at(1020);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
    });
  });

  it("{ quotas } sets the named policies' quotas (a bucket's rate with it); the others keep theirs", async () => {
    const l = hooks.limiter([
      tokenBucket({ capacity: 3, refillRate: 1, name: "burst" }),
      fixedWindow({ limit: 10, window: "1m", name: "per-minute" }),
      slidingLog({ limit: 100, window: "1h", name: "hourly" }),
    ]);
    at(0);
    await l.setOverride("k", { quotas: { burst: 7 } });
    expect(await l.getOverride("k")).toEqual({ quotas: { burst: 7 } });
    const seen = await burst(l, "k", 8);
    expect(seen.slice(0, 7).every((d) => d.allowed)).toBe(true);
    // T' = ceil(1,000,000 × 3 / 7) = 428,572 µs: the next token in 429 ms
    expect(seen[7]!.policies.map((p) => [p.policy, p.allowed, p.limit, p.remaining, p.retryAfterMs])).toEqual([
      ["burst", false, 7, 0, 429],
      ["per-minute", true, 10, 3, 0],
      ["hourly", true, 100, 93, 0],
    ]);
    expect(seen[7]).toMatchObject({ allowed: false, policy: "burst", limit: 7, retryAfterMs: 429, reason: "limit", override: { quotas: { burst: 7 } } });
    at(428);
    expect((await l.limit("k")).allowed).toBe(false);
    at(429);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, reason: "ok" });
    // another key: the base quotas
    expect((await l.limit("other")).policies.map((p) => p.limit)).toEqual([3, 10, 100]);
  });

  it("{ unlimited: true } allows without counting (no slot held, no penalty box, no refund); once cleared, the base quota is whole", async () => {
    const l = hooks.limiter([
      fixedWindow({ limit: 2, window: "1m", name: "per-minute", block: "10m" }),
      tokenBucket({ capacity: 3, refillRate: 1, interval: "10s", name: "burst" }),
      concurrency({ limit: 1, name: "one" }),
    ]);
    at(0);
    await l.setOverride("k", { unlimited: true });
    for (const d of await burst(l, "k", 6, 2)) {
      // every policy allows with its own whole quota; the binding one has the least: the cap's 1
      expect(brief(d)).toEqual({ allowed: true, limit: 1, remaining: 1, resetAt: 0, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      expect([d.policy, d.override]).toEqual(["one", { unlimited: true }]);
      expect(d.policies).toEqual([
        { policy: "per-minute", allowed: true, limit: 2, remaining: 2, resetAt: hooks.t0, retryAfterMs: 0, delayMs: 0, refillAt: hooks.t0 },
        { policy: "burst", allowed: true, limit: 3, remaining: 3, resetAt: hooks.t0, retryAfterMs: 0, delayMs: 0, refillAt: hooks.t0 },
        { policy: "one", allowed: true, limit: 1, remaining: 1, resetAt: hooks.t0, retryAfterMs: 0, delayMs: 0, refillAt: hooks.t0 },
      ]);
    }
    // a refund gives nothing back (nothing was counted); peek answers the same
    expect((await l.refund("k", { cost: 1 })).policies.map((p) => p.remaining)).toEqual([2, 3, 1]);
    expect((await l.peek("k")).override).toEqual({ unlimited: true });
    await l.clearOverride("k");
    expect((await l.peek("k")).policies.map((p) => [p.allowed, p.remaining])).toEqual([
      [true, 2],
      [true, 3],
      [true, 1],
    ]);
    const d = await l.limit("k");
    expect([d.allowed, d.override, d.policies.map((p) => p.remaining), d.lease !== undefined]).toEqual([true, undefined, [1, 2, 0], true]);

    // a key in its penalty box passes while unlimited, and is in it again once the override ends
    const p = hooks.limiter([fixedWindow({ limit: 1, window: "1m", name: "login", block: "10m" })]);
    await p.limit("p");
    expect(brief(await p.limit("p"))).toMatchObject({ allowed: false, retryAfterMs: 600_000, reason: "blocked" });
    await p.setOverride("p", { unlimited: true }, { ttl: "1m" });
    expect(brief(await p.limit("p"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
    at(60_000);
    expect(brief(await p.limit("p"))).toMatchObject({ allowed: false, retryAfterMs: 540_000, reason: "blocked" });
  });

  it("a ttl ends at its exact millisecond (applied at end − 1, not at end); the counts it leaves are judged by the base quota", async () => {
    const l = hooks.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" })]);
    at(0);
    await l.setOverride("k", { scale: 2 }, { ttl: "30s" });
    expect((await burst(l, "k", 6)).every((d) => d.allowed)).toBe(true);
    at(29_999);
    expect(await l.getOverride("k")).toEqual({ scale: 2 });
    const before = await l.limit("k");
    expect([brief(before), before.override]).toEqual([{ allowed: false, limit: 6, remaining: 0, resetAt: 60_000, retryAfterMs: 30_001, delayMs: 0, reason: "limit" }, { scale: 2 }]);
    at(30_000);
    expect(await l.getOverride("k")).toBeUndefined();
    // 6 counted in this window, against a quota of 3 again: nothing more until the window ends
    const after = await l.limit("k");
    expect([brief(after), after.override]).toEqual([{ allowed: false, limit: 3, remaining: 0, resetAt: 60_000, retryAfterMs: 30_000, delayMs: 0, reason: "limit" }, undefined]);
    at(60_000);
    expect(brief(await l.limit("k"))).toEqual({ allowed: true, limit: 3, remaining: 2, resetAt: 120_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    // raised again mid-window: the count carries over (1 + 5 = 6, no more)
    await l.setOverride("k", { scale: 2 }, { ttl: 1000 });
    expect((await burst(l, "k", 6)).map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
  });

  it("a bucket deeper than its own quota when an override ends refills from there (capacity 2, 1/s, { scale: 3 } for 1 s)", async () => {
    // under the override: 6 tokens, T' = ceil(1,000,000 × 2 / 6) = 333,334 µs; 6 taken at 0 leave the
    // bucket full again at 2,000,004 µs. Back to 2 tokens of 1 s: full at the same time, so one
    // token is back 1,000,004 µs from 0, a whole millisecond later than 1 s
    const l = hooks.limiter([tokenBucket({ capacity: 2, refillRate: 1, name: "burst" })]);
    at(0);
    await l.setOverride("k", { scale: 3 }, { ttl: "1s" });
    expect((await burst(l, "k", 7)).map((d) => d.allowed)).toEqual([true, true, true, true, true, true, false]);
    at(999);
    // under the override: (999,000 − 4) µs refilled, 2 whole tokens of 333,334 µs
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, limit: 6, remaining: 2, resetAt: 2001, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    at(1000);
    expect(brief(await l.limit("k"))).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 2001, retryAfterMs: 1, delayMs: 0, reason: "limit" });
    at(1001);
    expect(brief(await l.limit("k"))).toEqual({ allowed: true, limit: 2, remaining: 0, resetAt: 3001, retryAfterMs: 0, delayMs: 0, reason: "ok" });
  });

  it("getOverride reads what was set; a new override replaces the old; clearOverride removes it (twice is fine)", async () => {
    const l = hooks.limiter([fixedWindow({ limit: 4, window: "1m", name: "a" }), slidingLog({ limit: 6, window: "1m", name: "b" })]);
    at(0);
    expect(await l.getOverride("k")).toBeUndefined();
    const values: Override[] = [{ scale: 1.5 }, { quotas: { b: 5, a: 3 } }, { quotas: { a: 9 } }, { unlimited: true }, { scale: 0.5 }];
    for (const value of values) {
      await l.setOverride("k", value);
      expect(await l.getOverride("k")).toEqual(value);
    }
    expect((await l.limit("k")).policies.map((p) => p.limit)).toEqual([2, 3]);
    expect(await l.getOverride("other")).toBeUndefined();
    await l.clearOverride("k");
    expect(await l.getOverride("k")).toBeUndefined();
    await l.clearOverride("k");
    await l.clearOverride("never-seen");
    const d = await l.limit("k");
    expect([d.override, d.policies.map((p) => [p.limit, p.remaining])]).toEqual([
      undefined,
      [
        [4, 2],
        [6, 4],
      ],
    ]);
  });

  it("bad input is a SluiceInputError naming the field, thrown before the store is asked: nothing stored changes", async () => {
    const policies = [
      fixedWindow({ limit: 3, window: "1m", name: "fixed" }),
      tokenBucket({ capacity: 4, refillRate: 1, name: "burst" }),
      slidingWindow({ limit: 5, window: "1s", name: "sliding" }),
    ];
    const counted = countingStore(hooks.store());
    const l = new RateLimiter({ store: counted.store, limits: policies, prefix: hooks.prefix(), denyCache: false, timeoutMs: hooks.storeTimeoutMs });
    at(0);
    await l.setOverride("k", { scale: 2 }, { ttl: "1h" });
    await burst(l, "k", 2);
    await l.block("b", "1m");
    const state = async () => [await l.peek("k"), await l.getOverride("k"), await l.peek("b")].map((x) => JSON.parse(JSON.stringify(x)) as unknown);
    const before = await state();
    const bad: [string, () => Promise<unknown>][] = [
      ["override.scale", () => l.setOverride("k", { scale: -1 })],
      ["override.scale", () => l.setOverride("k", { scale: 0 })],
      ["override.scale", () => l.setOverride("k", { scale: Number.NaN })],
      ["override.scale", () => l.setOverride("k", { scale: Infinity })],
      ["override.scale", () => l.setOverride("k", { scale: "2" } as never)],
      // 3 × 0.3 rounds down to 0
      ["override.scale", () => l.setOverride("k", { scale: 0.3 })],
      // above the buckets' largest quota (2^40)
      ["override.scale", () => l.setOverride("k", { scale: 2 ** 40 })],
      ["override.quotas.nope", () => l.setOverride("k", { quotas: { nope: 5 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: 0 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: 2.5 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: -3 } })],
      ["override.quotas.burst", () => l.setOverride("k", { quotas: { burst: maxQuota(policies[1]!) + 1 } })],
      ["override.quotas.sliding", () => l.setOverride("k", { quotas: { sliding: maxQuota(policies[2]!) + 1 } })],
      ["override.quotas", () => l.setOverride("k", { quotas: {} })],
      ["override.unlimited", () => l.setOverride("k", { unlimited: false } as never)],
      ["override", () => l.setOverride("k", {} as never)],
      ["override", () => l.setOverride("k", { scale: 2, unlimited: true } as never)],
      ["override", () => l.setOverride("k", null as never)],
      ["override.ratio", () => l.setOverride("k", { ratio: 2 } as never)],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 0 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: -1000 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 1.5 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: "soon" as never })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 2 ** 31 })],
      ["options.expires", () => l.setOverride("k", { scale: 3 }, { expires: "1h" } as never)],
      ["key", () => l.setOverride("", { scale: 3 })],
      ["duration", () => l.block("k", 0)],
      ["duration", () => l.block("k", -5)],
      ["duration", () => l.block("k", "forever" as never)],
      ["duration", () => l.block("k", 2 ** 31)],
      ["key", () => l.block("", "1m")],
      ["key", () => l.unblock("")],
      ["key", () => l.clearOverride("")],
      ["key", () => l.getOverride("")],
    ];
    counted.calls.length = 0;
    for (const [option, call] of bad) {
      const error = await failure(call);
      expect([option, error instanceof SluiceInputError, (error as SluiceInputError | undefined)?.option]).toEqual([option, true, option]);
    }
    expect(counted.calls).toEqual([]);
    expect(await state()).toEqual(before);
    // the largest quota itself is fine
    await l.setOverride("max", { quotas: { sliding: maxQuota(policies[2]!), burst: maxQuota(policies[1]!) } });
    expect((await l.limit("max")).policies.map((p) => p.limit)).toEqual([3, 2 ** 40, Math.floor(Number.MAX_SAFE_INTEGER / 1000)]);
  });

  describe("manual blocks", () => {
    it('block: every request denied with reason "blocked" and retryAfterMs to its end (or the later own retry), nothing counted; served at its end', async () => {
      const l = hooks.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" }), tokenBucket({ capacity: 2, refillRate: 1, interval: "1h", name: "hourly" })]);
      at(0);
      expect((await l.limit("k")).allowed).toBe(true);
      at(1000);
      await l.block("k", "5s");
      const d = await l.limit("k");
      expect(brief(d)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 5000, delayMs: 0, reason: "blocked" });
      expect(d.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs, p.blocked, p.blockedUntil! - hooks.t0])).toEqual([
        ["fixed", false, 0, 5000, true, 6000],
        ["hourly", false, 0, 5000, true, 6000],
      ]);
      // two tokens need the bucket full again, an hour after 0: that own retry is later than the block's end
      expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: false, retryAfterMs: 3_599_000, reason: "blocked" });
      at(2000);
      expect(brief(await l.peek("k"))).toMatchObject({ allowed: false, retryAfterMs: 4000, reason: "blocked" });
      at(5999);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1, reason: "blocked" });
      at(6000);
      // nothing was counted while blocked
      const served = await l.limit("k");
      expect([served.allowed, served.reason, served.policies.map((p) => p.remaining)]).toEqual([true, "ok", [1, 0]]);
      // a second block replaces the first (last write wins), shorter or longer
      await l.block("k", "1h");
      await l.block("k", 500);
      at(6499);
      expect((await l.limit("k")).reason).toBe("blocked");
      at(6500);
      expect((await l.peek("k")).reason).not.toBe("blocked");
    });

    it("unblock lifts the manual block and the key's penalty boxes (this limiter's policies)", async () => {
      const l = hooks.limiter([fixedWindow({ limit: 2, window: "1s", name: "login", block: "1m" })]);
      at(0);
      await burst(l, "k", 2);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 60_000, reason: "blocked" });
      at(1000); // the window has rolled; the penalty box has not
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 59_000, reason: "blocked" });
      await l.unblock("k");
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
      await l.block("k", "1h");
      expect((await l.limit("k")).reason).toBe("blocked");
      await l.unblock("k");
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, reason: "ok" });
      await l.unblock("never-seen");
    });

    it("a manual block beats an unlimited override; reset forgets the block and the override", async () => {
      const l = hooks.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" })]);
      at(0);
      await l.setOverride("k", { unlimited: true });
      await l.block("k", "2s");
      const d = await l.limit("k");
      // the unlimited answer (the whole quota, full now), blocked until the block's end
      expect([brief(d), d.override]).toEqual([{ allowed: false, limit: 3, remaining: 0, resetAt: 2000, retryAfterMs: 2000, delayMs: 0, reason: "blocked" }, { unlimited: true }]);
      at(2000);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 3, reason: "ok" });
      await l.setOverride("k", { scale: 2 });
      await l.block("k", "1h");
      await l.reset("k");
      expect(await l.getOverride("k")).toBeUndefined();
      const after = await l.limit("k");
      expect([brief(after), after.override]).toEqual([{ allowed: true, limit: 3, remaining: 2, resetAt: 60_000, retryAfterMs: 0, delayMs: 0, reason: "ok" }, undefined]);
    });
  });

  it("a second limiter on the same store and prefix sees an override and a block at its next decision; other keys keep the base quota", async () => {
    const prefix = hooks.prefix();
    const policy = fixedWindow({ limit: 2, window: "1h", name: "hourly" });
    const admin = hooks.limiter([policy], prefix);
    const worker = hooks.limiter([policy], prefix);
    at(0);
    expect((await worker.limit("k")).allowed).toBe(true);
    await admin.setOverride("k", { scale: 10 });
    expect(await worker.getOverride("k")).toEqual({ scale: 10 });
    const seen = await burst(worker, "k", 20);
    expect(seen.filter((d) => d.allowed).length).toBe(19); // 20 in all with the one before
    expect(seen.map((d) => [d.limit, d.override])).toEqual(Array(20).fill([20, { scale: 10 }]));
    expect((await burst(worker, "other", 3)).map((d) => [d.allowed, d.limit])).toEqual([
      [true, 2],
      [true, 2],
      [false, 2],
    ]);
    // another limiter of the prefix with other policies reads the key's override too
    const other = hooks.limiter([tokenBucket({ capacity: 3, refillRate: 1, interval: "1h", name: "bucket" })], prefix);
    expect((await other.limit("k")).policies[0]!.limit).toBe(30);
    await admin.block("k", "1m");
    expect((await worker.limit("k")).reason).toBe("blocked");
    await admin.unblock("k");
    await admin.clearOverride("k");
    expect(brief(await worker.limit("k"))).toMatchObject({ allowed: false, limit: 2, reason: "limit" });
  });

  it("the headers carry the effective quotas: q in RateLimit-Policy, r in RateLimit, the decision's limit in the others", async () => {
    const l = hooks.limiter([fixedWindow({ limit: 3, window: "1m", name: "per-minute" }), tokenBucket({ capacity: 4, refillRate: 2, name: "burst" })]);
    const headersOf = (d: Decision) => {
      const headers = new Headers();
      setRateLimitHeaders(headers, d, ["ietf", "legacy"], l.policies);
      return ["RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After"].map((h) => headers.get(h));
    };
    at(0);
    await l.setOverride("k", { scale: 2 }); // 6 per minute; 8 tokens, one per 250 ms
    const d = await l.limit("k");
    expect([d.policy, d.limit, d.remaining]).toEqual(["per-minute", 6, 5]);
    expect(headersOf(d)).toEqual(['"per-minute";q=6;w=60, "burst";q=8;w=2', '"per-minute";r=5;t=60, "burst";r=7;t=1', "6", "5", null]);
    await burst(l, "k", 5);
    const denied = await l.limit("k");
    expect(headersOf(denied)).toEqual(['"per-minute";q=6;w=60, "burst";q=8;w=2', '"per-minute";r=0;t=60, "burst";r=2;t=1', "6", "0", "60"]);
    // another key: the base quotas
    expect(headersOf(await l.limit("other"))).toEqual(['"per-minute";q=3;w=60, "burst";q=4;w=2', '"per-minute";r=2;t=60, "burst";r=3;t=1', "3", "2", null]);
  });

  it("every override and block call, and every decision with or without an override, makes exactly one call to the store", async () => {
    const counted = countingStore(hooks.store());
    const l = new RateLimiter({
      store: counted.store,
      limits: [fixedWindow({ limit: 3, window: "1m", name: "fixed" }), tokenBucket({ capacity: 2, refillRate: 1, name: "burst" })],
      prefix: hooks.prefix(),
      denyCache: false,
      timeoutMs: hooks.storeTimeoutMs,
    });
    const one = async (label: string, call: () => Promise<unknown>) => {
      counted.calls.length = 0;
      await call();
      return [label, counted.calls.length === 1 ? "one call" : counted.calls.join(", ") || "no call"];
    };
    at(0);
    const seen = [
      await one("limit, no override", () => l.limit("k")),
      await one("setOverride", () => l.setOverride("k", { scale: 2 }, { ttl: "1h" })),
      await one("getOverride", () => l.getOverride("k")),
      await one("limit, scaled", () => l.limit("k")),
      await one("peek, scaled", () => l.peek("k")),
      await one("refund, scaled", () => l.refund("k", { cost: 1 })),
      await one("setOverride quotas", () => l.setOverride("k", { quotas: { burst: 5 } })),
      await one("limit, quotas", () => l.limit("k", { cost: 2 })),
      await one("setOverride unlimited", () => l.setOverride("k", { unlimited: true })),
      await one("limit, unlimited", () => l.limit("k")),
      await one("block", () => l.block("k", "1m")),
      await one("limit, blocked", () => l.limit("k")),
      await one("unblock", () => l.unblock("k")),
      await one("clearOverride", () => l.clearOverride("k")),
      await one("limit, cleared", () => l.limit("k")),
      await one("reset", () => l.reset("k")),
    ];
    expect(seen).toEqual(seen.map(([label]) => [label, "one call"]));
  });

  it("the limiter's own setOverride and unblock end its cached denial of the key at once", async () => {
    let local = 0;
    const l = new RateLimiter({
      store: hooks.store(),
      limits: fixedWindow({ limit: 1, window: "1h", name: "hourly" }),
      prefix: hooks.prefix(),
      denyCache: { clock: () => local },
      timeoutMs: hooks.storeTimeoutMs,
    });
    at(0);
    expect((await l.limit("k")).allowed).toBe(true);
    expect((await l.limit("k")).allowed).toBe(false);
    local = 1000;
    at(1000);
    await l.setOverride("k", { scale: 3 });
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, reason: "ok" });
    await l.block("k", "1h");
    expect((await l.limit("k")).reason).toBe("blocked");
    local = 2000;
    at(2000);
    await l.unblock("k");
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, reason: "ok" });
  });
}
