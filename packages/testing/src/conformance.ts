/**
 * The conformance suite every store must pass: `testStore({ makeStore })` registers Vitest tests
 * for every algorithm's exact decisions, window edges (through the store's test clock), multi-limit
 * atomicity, costs above 1, peek, reset, key and prefix isolation, the key schema (`testKeySchema`:
 * prefix and tier collisions, lone surrogates, long keys), tight `retryAfterMs`, refunds, the
 * penalty box, concurrency caps (leases, release, lease expiry on the test clock), a property test
 * against the reference models, and the recorded vectors.
 *
 * @example
 * ```ts
 * import { MemoryStore } from "@sluice/core";
 * import { testStore } from "@sluice/testing";
 *
 * testStore({ name: "memory", makeStore: ({ clock }) => new MemoryStore({ clock }) });
 * ```
 */
import {
  type Decision,
  type Override,
  type Policy,
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
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { holdsLeases } from "./algorithms/index.js";
import { type InvariantHooks, testHostileSequences, testInvariants, testOverrideInvariants } from "./invariants.js";
import { testMixedSequences } from "./mixed-sequences.js";
import { testReserveCall, testReservedDecisions } from "./reservations.js";
import { testReservationInvariants } from "./reservations-fuzz.js";
import { testOverrides } from "./overrides.js";
import { testNames } from "./names.js";
import { testCachedDenials } from "./cached-denials.js";
import { testKeySchema } from "./key-schema.js";
import { type PlainDecision, type ReferenceCharge, ReferenceLimiter, plain } from "./reference.js";
import { type PolicySpec, type VectorCase, isOverrideRead, policyFromSpec, policySpecArbitrary, runStep } from "./vectors.js";
import { T0, deepRuns, uniquePrefix } from "./suite-shared.js";
import recorded from "../vectors/vectors.json" with { type: "json" };

/** Options of {@link testStore}. */
export interface TestStoreOptions {
  /** Suite name, e.g. `"memory"` or `"redis (ioredis)"`. */
  name: string;
  /**
   * Builds the store under test. `clock` is the test hook for time: epoch milliseconds that the
   * store must use as its clock (a test-only hook; production stores use their own clock).
   */
  makeStore: (hooks: { clock: () => number }) => Store | Promise<Store>;
  /** Runs once after the suite (close connections, stop servers). */
  teardown?: () => void | Promise<void>;
  /** Runs of the property test against the reference models. @default 60 */
  numRuns?: number;
  /**
   * Runs of each invariant property (hundreds of calls each: keep it low for a store whose every
   * call crosses a process or an HTTP hop). @default numRuns
   */
  invariantRuns?: number;
  /** Per-test timeout in ms for slow stores. @default 20_000 */
  timeoutMs?: number;
}


/** Registers the conformance suite for one store. */
export function testStore(options: TestStoreOptions): void {
  const clock = { now: T0 };
  let store: Store;
  const failures: unknown[] = [];
  const deep = deepRuns();
  // a deep run's properties take minutes: the limits are then there for a hung store only
  const timeout = deep === undefined ? (options.timeoutMs ?? 20_000) : Math.max(options.timeoutMs ?? 20_000, 30 * 60_000);
  const runs = (n: number) => deep ?? n;
  // a store call gets the test's budget, not the production default (1 s): on a loaded machine a
  // slow answer must not fail the suite, while a hung store still fails it with a store error
  const storeTimeoutMs = Math.floor(timeout / 2);

  const limiter = (limits: Policy | Policy[], prefix = uniquePrefix()) =>
    // the deny cache answers repeated denials without the store: off, so every call here reaches it
    new RateLimiter({
      store,
      limits,
      prefix,
      onStoreError: "deny",
      onStoreFailure: (error) => failures.push(error),
      denyCache: false,
      timeoutMs: storeTimeoutMs,
    });
  const at = (ms: number) => {
    clock.now = T0 + ms;
  };
  /** `n` requests in a row; returns the decisions. */
  const burst = async (l: RateLimiter, key: string, n: number, cost = 1) => {
    const out: Decision[] = [];
    for (let i = 0; i < n; i++) out.push(await l.limit(key, { cost }));
    return out;
  };
  const brief = (d: Decision) => ({
    allowed: d.allowed,
    remaining: d.remaining,
    resetAt: d.resetAt - T0,
    retryAfterMs: d.retryAfterMs,
    delayMs: d.delayMs,
    reason: d.reason,
  });

  describe(`store conformance: ${options.name}`, { timeout }, () => {
    // a property stops (failing, with the best counterexample it has) before Vitest's timeout
    // would: a timed-out test keeps running in the background, and here it would keep moving the
    // clock the next tests share. A failure found on a slow store is still reported, shrunk as far
    // as that time allowed, rather than as a timeout.
    const fcConfig = fc.readConfigureGlobal();
    beforeAll(async () => {
      fc.configureGlobal({ ...fcConfig, interruptAfterTimeLimit: Math.max(1000, timeout - 2000), markInterruptAsFailure: true });
      store = await options.makeStore({ clock: () => clock.now });
    });
    afterAll(async () => {
      fc.configureGlobal(fcConfig);
      await options.teardown?.();
    });
    afterEach(() => {
      const seen = failures.splice(0);
      if (seen.length > 0) throw new Error(`the store failed during the test: ${String(seen[0])}`, { cause: seen[0] });
    });

    describe("fixedWindow", () => {
      it("counts per window, denies with the time to the window's end, and resets on the edge", async () => {
        const l = limiter(fixedWindow({ limit: 3, window: "1s" }));
        at(500);
        expect((await burst(l, "k", 4)).map(brief)).toEqual([
          { allowed: true, remaining: 2, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 1, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 0, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: false, remaining: 0, resetAt: 1000, retryAfterMs: 500, delayMs: 0, reason: "limit" },
        ]);
        at(999);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(1000);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 2, resetAt: 2000 });
        expect(brief(await l.limit("k", { cost: 4 }))).toEqual({
          allowed: false,
          remaining: 2,
          resetAt: 2000,
          retryAfterMs: Infinity,
          delayMs: 0,
          reason: "cost-exceeds-limit",
        });
        expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: true, remaining: 0 });
      });
    });

    describe("slidingWindow", () => {
      it("weights the previous window by its overlap, exactly", async () => {
        const l = limiter(slidingWindow({ limit: 10, window: "1s" }));
        at(0);
        const first = await burst(l, "k", 10);
        expect(first.map((d) => d.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
        expect(first.every((d) => d.allowed && d.resetAt === T0 + 2000)).toBe(true);
        // 11th: the previous window must slide out far enough: 10*(1000-r) + 1*1000 <= 10000 → r >= 100
        expect(brief(await l.limit("k"))).toEqual({
          allowed: false,
          remaining: 0,
          resetAt: 2000,
          retryAfterMs: 1100,
          delayMs: 0,
          reason: "limit",
        });
        at(1099);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(1100);
        expect(brief(await l.limit("k"))).toEqual({ allowed: true, remaining: 0, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        // prev 10, cur 1 at r = 100: 10*(900-d) + 2*1000 <= 10000 → d >= 100
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 100, resetAt: 3000 });
        at(1500);
        expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: true, remaining: 0 });
        at(2500);
        // prev = 5 (window 1), cur = 0: remaining floor((10000 - 5*500)/1000) = 7; full again when window 2 ends
        expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 7, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        at(4000);
        expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 10, resetAt: 4000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      });

      it("rolls over twice when the previous window alone blocks the cost", async () => {
        const l = limiter(slidingWindow({ limit: 4, window: "1s" }));
        at(0);
        await burst(l, "k", 4);
        // cost 4 needs prev*(W-r') <= 0 after the rollover: only once window 0 has fully slid out
        expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: false, retryAfterMs: 2000 });
        at(1999);
        expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(2000);
        expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: true, remaining: 0 });
      });
    });

    describe("slidingLog", () => {
      it("keeps an exact log; an entry leaves exactly one window after it was admitted", async () => {
        const l = limiter(slidingLog({ limit: 3, window: "1s" }));
        const seen: ReturnType<typeof brief>[] = [];
        for (const t of [100, 200, 300, 400]) {
          at(t);
          seen.push(brief(await l.limit("k")));
        }
        expect(seen).toEqual([
          { allowed: true, remaining: 2, resetAt: 1100, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 1, resetAt: 1200, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 0, resetAt: 1300, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: false, remaining: 0, resetAt: 1300, retryAfterMs: 700, delayMs: 0, reason: "limit" },
        ]);
        at(1099);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(1100);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, resetAt: 2100 });
        at(1250);
        // live entries: 300, 1100 → a cost of 2 needs the entry of 300 to leave (at 1300)
        expect(brief(await l.limit("k", { cost: 2 }))).toEqual({
          allowed: false,
          remaining: 1,
          resetAt: 2100,
          retryAfterMs: 50,
          delayMs: 0,
          reason: "limit",
        });
        at(1300);
        expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: true, remaining: 0, resetAt: 2300 });
      });
    });

    describe("tokenBucket", () => {
      it("behaves like the seed's TokenBucket(100, 10): starts full, refills continuously", async () => {
        const l = limiter(tokenBucket({ capacity: 100, refillRate: 10 }));
        at(0);
        const full = await burst(l, "k", 100);
        expect(full.map((d) => d.remaining)).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
        expect(full.map((d) => d.resetAt - T0)).toEqual(Array.from({ length: 100 }, (_, i) => (i + 1) * 100));
        expect(brief(await l.limit("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 10_000, retryAfterMs: 100, delayMs: 0, reason: "limit" });
        at(99);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(1000);
        expect((await burst(l, "k", 11)).map((d) => d.allowed)).toEqual([...Array(10).fill(true), false]);
        at(1250);
        // 2.5 tokens: one taken, floor(1.5) left
        expect(brief(await l.limit("k"))).toEqual({ allowed: true, remaining: 1, resetAt: 11_100, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 1, resetAt: 11_100, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect(brief(await l.limit("k", { cost: 101 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit", remaining: 1 });
        expect(brief(await l.limit("k", { cost: 3 }))).toMatchObject({ allowed: false, retryAfterMs: 150, remaining: 1 });
      });

      it("rounds a fractional emission interval up to whole microseconds", async () => {
        const l = limiter(tokenBucket({ capacity: 1, refillRate: 3 })); // T = ceil(1e6/3) = 333334 µs
        at(0);
        expect((await l.limit("k")).allowed).toBe(true);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 334, resetAt: 334 });
        at(333);
        expect((await l.limit("k")).allowed).toBe(false);
        at(334);
        expect((await l.limit("k")).allowed).toBe(true);
      });
    });

    describe("leakyBucket", () => {
      it("passes the burst and denies the next with the emission interval", async () => {
        const l = limiter(leakyBucket({ rate: 10, period: "1s", burst: 5 }));
        at(0);
        expect((await burst(l, "k", 6)).map(brief)).toEqual([
          { allowed: true, remaining: 4, resetAt: 100, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 3, resetAt: 200, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 2, resetAt: 300, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 1, resetAt: 400, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: true, remaining: 0, resetAt: 500, retryAfterMs: 0, delayMs: 0, reason: "ok" },
          { allowed: false, remaining: 0, resetAt: 500, retryAfterMs: 100, delayMs: 0, reason: "limit" },
        ]);
      });

      it("shapes with a queue: delays 100, 200, 300, then denies", async () => {
        const l = limiter(leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 }));
        at(0);
        const seen = (await burst(l, "k", 9)).map(brief);
        expect(seen.slice(5)).toEqual([
          { allowed: true, remaining: 0, resetAt: 600, retryAfterMs: 0, delayMs: 100, reason: "ok" },
          { allowed: true, remaining: 0, resetAt: 700, retryAfterMs: 0, delayMs: 200, reason: "ok" },
          { allowed: true, remaining: 0, resetAt: 800, retryAfterMs: 0, delayMs: 300, reason: "ok" },
          { allowed: false, remaining: 0, resetAt: 800, retryAfterMs: 100, delayMs: 0, reason: "limit" },
        ]);
        expect(brief(await l.limit("k", { cost: 9 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
        at(99);
        expect((await l.limit("k")).allowed).toBe(false);
        at(100);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, delayMs: 300 });
      });
    });

    describe("several limits", () => {
      it("is all or nothing, and names the binding policy", async () => {
        const l = limiter([
          tokenBucket({ capacity: 2, refillRate: 1, name: "burst" }),
          fixedWindow({ limit: 3, window: "1m", name: "per-minute" }),
        ]);
        at(0);
        const [a, b, c] = await burst(l, "k", 3);
        expect([a, b].map((d) => [d!.policy, d!.remaining])).toEqual([
          ["burst", 1],
          ["burst", 0],
        ]);
        expect(c).toMatchObject({ allowed: false, policy: "burst", retryAfterMs: 1000, reason: "limit" });
        expect(c!.policies).toEqual([
          { policy: "burst", allowed: false, limit: 2, remaining: 0, resetAt: T0 + 2000, retryAfterMs: 1000, delayMs: 0, refillAt: T0 + 1000 },
          // would have allowed: reports its state unchanged (1 left, nothing consumed)
          { policy: "per-minute", allowed: true, limit: 3, remaining: 1, resetAt: T0 + 60_000, retryAfterMs: 0, delayMs: 0, refillAt: T0 + 60_000 },
        ]);
        at(1000);
        const d = await l.limit("k");
        expect(d).toMatchObject({ allowed: true, policy: "burst", remaining: 0 }); // tie on 0: the first configured
        at(2000);
        const e = await l.limit("k");
        expect(e).toMatchObject({ allowed: false, policy: "per-minute", retryAfterMs: 58_000, reason: "limit" });
        expect(e.policies[0]).toEqual({ policy: "burst", allowed: true, limit: 2, remaining: 1, resetAt: T0 + 3000, retryAfterMs: 0, delayMs: 0, refillAt: T0 + 3000 });
        // the denied request took nothing from the bucket
        expect((await l.peek("k")).policies[0]!.remaining).toBe(1);
        // both deny: the binding policy is the one with the largest retryAfterMs
        const f = await l.limit("k", { cost: 3 });
        expect(f).toMatchObject({ allowed: false, policy: "burst", retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
        expect(f.policies.map((p) => [p.allowed, p.retryAfterMs])).toEqual([
          [false, Infinity],
          [false, 58_000],
        ]);
      });

      it("consumes from every limit when allowed, and from none when one denies", async () => {
        const policies = [
          slidingLog({ limit: 5, window: "10s", name: "log" }),
          slidingWindow({ limit: 4, window: "10s", name: "sliding" }),
          leakyBucket({ rate: 1, period: "1s", burst: 6, name: "leaky" }),
          fixedWindow({ limit: 100, window: "1h", name: "hourly" }),
        ];
        const l = limiter(policies);
        at(0);
        const ok = await l.limit("k", { cost: 3 });
        expect(ok.policies.map((p) => p.remaining)).toEqual([2, 1, 3, 97]);
        const no = await l.limit("k", { cost: 2 }); // the sliding window (1 left) denies
        expect(no).toMatchObject({ allowed: false, policy: "sliding" });
        expect(no.policies.map((p) => [p.allowed, p.remaining])).toEqual([
          [true, 2],
          [false, 1],
          [true, 3],
          [true, 97],
        ]);
        const after = await l.peek("k");
        expect(after.policies.map((p) => p.remaining)).toEqual([2, 1, 3, 97]);
      });
    });

    describe("peek and reset", () => {
      it("peek consumes nothing and says whether a cost-1 request would pass", async () => {
        const l = limiter(fixedWindow({ limit: 2, window: "1m" }));
        at(0);
        for (let i = 0; i < 5; i++) expect(brief(await l.peek("k"))).toMatchObject({ allowed: true, remaining: 2 });
        await burst(l, "k", 2);
        expect(brief(await l.peek("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 60_000, retryAfterMs: 60_000, delayMs: 0, reason: "limit" });
      });

      it("reset forgets every limit of the key and only that key", async () => {
        const l = limiter([fixedWindow({ limit: 2, window: "1m", name: "fixed" }), slidingLog({ limit: 2, window: "1m", name: "log" })]);
        at(0);
        await burst(l, "k", 2);
        await burst(l, "other", 2);
        expect((await l.limit("k")).allowed).toBe(false);
        await l.reset("k");
        expect(await l.limit("k")).toMatchObject({ allowed: true, remaining: 1 });
        expect((await l.limit("other")).allowed).toBe(false);
        await l.reset("never-seen"); // resetting an unknown key is fine
      });
    });

    describe("isolation", () => {
      it("keys and prefixes never share state; the same prefix and limits do", async () => {
        const policy = fixedWindow({ limit: 1, window: "1m" });
        const prefix = uniquePrefix("iso");
        const a = limiter(policy, prefix);
        const sameNamespace = limiter(policy, prefix);
        const otherPrefix = limiter(policy);
        at(0);
        expect((await a.limit("k")).allowed).toBe(true);
        expect((await a.limit("k")).allowed).toBe(false);
        expect((await a.limit("k2")).allowed).toBe(true);
        expect((await otherPrefix.limit("k")).allowed).toBe(true);
        expect((await sameNamespace.limit("k")).allowed).toBe(false);
        // keys that differ only by case, by a trailing space or by unicode normalisation are distinct
        expect((await a.limit("K")).allowed).toBe(true);
        expect((await a.limit("k ")).allowed).toBe(true);
        expect((await a.limit("caf\u00e9")).allowed).toBe(true);
        expect((await a.limit("cafe\u0301")).allowed).toBe(true);
        expect((await a.limit("{tag}:with:colons")).allowed).toBe(true);
        expect((await a.limit("{tag}:with:colons")).allowed).toBe(false);
      });
    });

    // concurrency caps are left out: a slot may be released at any moment, so a concurrency denial's
    // retryAfterMs (1 s, or the earliest lease expiry when sooner) is a hint, not the exact time
    describe("tight retryAfterMs", () => {
      const configs: [string, () => Policy[], number][] = [
        ["fixedWindow", () => [fixedWindow({ limit: 7, window: "2s" })], 2],
        ["slidingWindow", () => [slidingWindow({ limit: 7, window: "2s" })], 2],
        ["slidingLog", () => [slidingLog({ limit: 7, window: "2s" })], 2],
        ["tokenBucket", () => [tokenBucket({ capacity: 7, refillRate: 3, interval: "2s" })], 2],
        ["leakyBucket", () => [leakyBucket({ rate: 3, period: "1s", burst: 4, queue: 2 })], 2],
        ["several", () => [tokenBucket({ capacity: 4, refillRate: 2 }), slidingWindow({ limit: 9, window: "3s" })], 3],
      ];
      for (const [name, make, cost] of configs) {
        it(`${name}: allowed at now + retryAfterMs, denied 1 ms earlier`, async () => {
          const l = limiter(make());
          let t = 137;
          let checked = 0;
          for (let step = 0; step < 40 && checked < 6; step++) {
            at(t);
            const d = await l.limit("k", { cost });
            if (!d.allowed) {
              expect(Number.isFinite(d.retryAfterMs)).toBe(true);
              expect(d.retryAfterMs).toBeGreaterThan(0);
              at(t + d.retryAfterMs - 1);
              expect((await l.limit("k", { cost })).allowed).toBe(false);
              at(t + d.retryAfterMs);
              expect((await l.limit("k", { cost })).allowed).toBe(true);
              t += d.retryAfterMs;
              checked++;
            }
            t += 61 * (step % 3);
          }
          expect(checked).toBeGreaterThanOrEqual(3);
        });
      }
    });

    describe("effective window: the IETF t", () => {
      /** The `RateLimit` and `Retry-After` values Sluice writes for `d` (default styles). */
      const ietf = (l: RateLimiter, d: Decision) => {
        const headers = new Headers();
        setRateLimitHeaders(headers, d, ["ietf"], l.policies);
        return [headers.get("RateLimit"), headers.get("Retry-After")];
      };

      it("t counts to the next unit, not to the full quota, for every algorithm", async () => {
        // each case (the policy, when its burst starts, the burst's size, the 429's RateLimit and
        // Retry-After): exhaust it, then the 429's t equals Retry-After (t used to be the time back to
        // the full quota: 15 s for both buckets, 100 s for the sliding window)
        const cases: [Policy, number, number, string, string][] = [
          [tokenBucket({ capacity: 3, refillRate: 1, interval: "5s", name: "tb" }), 0, 3, '"tb";r=0;t=5', "5"],
          [leakyBucket({ rate: 1, period: "5s", burst: 3, name: "lb" }), 0, 3, '"lb";r=0;t=5', "5"],
          [fixedWindow({ limit: 3, window: "1m", name: "fw" }), 0, 3, '"fw";r=0;t=60', "60"],
          // 10 counted 20 s into a 60 s window: after the roll (40 s) the previous count must weigh 9 or less (6 s more)
          [slidingWindow({ limit: 10, window: "1m", name: "sw" }), 20_000, 10, '"sw";r=0;t=46', "46"],
          [slidingLog({ limit: 3, window: "100s", name: "sl" }), 0, 3, '"sl";r=0;t=100', "100"],
        ];
        for (const [policy, startMs, n, rateLimit, retryAfter] of cases) {
          const l = limiter(policy);
          at(startMs);
          const allowed = await burst(l, "k", n);
          expect(allowed.every((d) => d.allowed)).toBe(true);
          const denied = await l.limit("k");
          expect([policy.kind, ...ietf(l, denied)]).toEqual([policy.kind, rateLimit, retryAfter]);
        }
      });

      it("a sliding log with spread entries: t is when the oldest leaves, Retry-After when enough have", async () => {
        const l = limiter(slidingLog({ limit: 5, window: "300s", name: "log" }));
        for (const [ms, cost] of [[0, 1], [2_000, 1], [100_000, 1], [200_000, 2]] as const) {
          at(ms);
          expect((await l.limit("k", { cost })).allowed).toBe(true);
        }
        at(200_500);
        const d = await l.limit("k", { cost: 2 });
        // 2 units need the two oldest entries gone: the first leaves at 300 s, the second at 302 s
        expect(ietf(l, d)).toEqual(['"log";r=0;t=100', "102"]);
        expect(d.policies[0]!.refillAt - d.now).toBe(99_500);
      });

      it("a cost-5 request: t is the next token, Retry-After the fifth", async () => {
        const l = limiter(tokenBucket({ capacity: 10, refillRate: 1, interval: "2s", name: "tb" }));
        at(0);
        await burst(l, "k", 10);
        const d = await l.limit("k", { cost: 5 });
        expect(ietf(l, d)).toEqual(['"tb";r=0;t=2', "10"]);
      });

      it("a three-limit tier: every violated policy's t is at most Retry-After", async () => {
        const l = limiter([
          tokenBucket({ capacity: 3, refillRate: 1, interval: "2s", name: "burst" }),
          slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
          fixedWindow({ limit: 100, window: "1d", name: "per-day" }),
        ]);
        at(30_000);
        await burst(l, "k", 3);
        const d = await l.limit("k");
        // the bucket denies (a token in 2 s); the others would have allowed and report their state:
        // the minute's third free unit needs its window rolled (30 s) and 3 counted to weigh 2 (20 s
        // more); the day's window ends at midnight
        expect(ietf(l, d)).toEqual(['"burst";r=0;t=2, "per-minute";r=2;t=50, "per-day";r=97;t=86370', "2"]);
        at(36_000);
        await burst(l, "k", 2); // the bucket has 3 again; the minute's 5 are used
        const e = await l.limit("k");
        // the minute denies: its next unit frees at the roll (24 s) plus the 5 counted weighing 4 (12 s)
        expect(ietf(l, e)).toEqual(['"burst";r=1;t=2, "per-minute";r=0;t=36, "per-day";r=95;t=86364', "36"]);
      });

      // (not for a concurrency cap: its refillAt is the earliest lease expiry or 1 s, whichever is
      // sooner, and a release may free a slot before it)
      it("at refillAt a request of r + 1 units passes, 1 ms earlier it does not", async () => {
        const configs: Policy[] = [
          fixedWindow({ limit: 7, window: "2s" }),
          slidingWindow({ limit: 7, window: "2s" }),
          slidingLog({ limit: 7, window: "2s" }),
          tokenBucket({ capacity: 7, refillRate: 3, interval: "2s" }),
          leakyBucket({ rate: 3, period: "1s", burst: 4 }),
        ];
        for (const policy of configs) {
          let t = 137;
          let checked = 0;
          for (let step = 0; step < 12; step++) {
            // replay the same history on a fresh key, so the probe before refillAt does not disturb the one at it
            const history = [0, 1, 2].map((i) => [t - 300 * (3 - i), 2] as const);
            const run = async (key: string) => {
              for (const [ms, cost] of history) {
                at(ms);
                await l.limit(key, { cost });
              }
              at(t);
              return l.peek(key);
            };
            const l = limiter(policy);
            const p = (await run("a")).policies[0]!;
            if (p.refillAt > p.retryAfterMs + (T0 + t) && p.remaining < policy.limit) {
              const next = p.remaining + 1;
              at(p.refillAt - T0 - 1);
              expect([policy.kind, (await l.limit("a", { cost: next })).allowed]).toEqual([policy.kind, false]);
              await run("b");
              at(p.refillAt - T0);
              expect([policy.kind, (await l.limit("b", { cost: next })).allowed]).toEqual([policy.kind, true]);
              checked++;
            }
            t += 157;
          }
          expect([policy.kind, checked >= 3]).toEqual([policy.kind, true]);
        }
      });

      it("on random sequences, Retry-After is never earlier than the t of a violated policy", async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 3 }),
            fc.array(fc.record({ dt: fc.integer({ min: 0, max: 1500 }), cost: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 30 }),
            async (specs, steps) => {
              const policies = specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
              const l = limiter(policies);
              let t = T0 + 3;
              for (const step of steps) {
                t += step.dt;
                clock.now = t;
                const d = await l.limit("k", { cost: step.cost });
                for (const p of d.policies) expect(p.refillAt).toBeGreaterThanOrEqual(d.now);
                if (d.allowed || d.retryAfterMs === Infinity) continue;
                const headers = new Headers();
                setRateLimitHeaders(headers, d, ["ietf"], l.policies);
                const retryAfter = Number(headers.get("Retry-After"));
                const ts = [...(headers.get("RateLimit") ?? "").matchAll(/;t=(\d+)/g)].map((m) => Number(m[1]));
                d.policies.forEach((p, i) => {
                  if (p.allowed) return;
                  expect(p.refillAt - d.now).toBeLessThanOrEqual(p.retryAfterMs);
                  expect(ts[i]).toBeLessThanOrEqual(retryAfter);
                });
              }
            },
          ),
          { numRuns: runs(options.numRuns ?? 60) },
        );
      });
    });

    describe("refund", () => {
      const rem = (d: Decision) => d.policies.map((p) => p.remaining);

      it("fixedWindow: at most what the decision charged, never above the quota, only in its window", async () => {
        const l = limiter(fixedWindow({ limit: 3, window: "1m" }));
        at(0);
        const [d1, , d3] = await burst(l, "k", 3);
        expect(rem(await l.refund("k", { decision: d3! }))).toEqual([1]);
        expect(rem(await l.refund("k", { decision: d3! }))).toEqual([1]); // that decision's unit is back already
        expect(rem(await l.refund("k", { cost: 10 }))).toEqual([3]); // 2 were charged: back to 3, not beyond
        expect((await l.limit("k")).remaining).toBe(2);
        at(60_000);
        expect((await l.limit("k")).remaining).toBe(2);
        expect(rem(await l.refund("k", { decision: d1! }))).toEqual([2]); // charged in the last window: nothing here
      });

      it("slidingWindow: the window it was charged in, also once it is the previous one", async () => {
        const l = limiter(slidingWindow({ limit: 4, window: "10s" }));
        at(0);
        const d1 = await l.limit("k", { cost: 2 });
        at(10_000);
        await l.limit("k", { cost: 2 });
        // 2 now + 2 previous weighing 100 %: nothing left; giving d1 back leaves 2 + 0
        expect((await l.peek("k")).remaining).toBe(0);
        expect(rem(await l.refund("k", { decision: d1 }))).toEqual([2]);
        expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: true, remaining: 0 });
      });

      it("slidingLog: that request's entry and no other", async () => {
        const l = limiter(slidingLog({ limit: 5, window: "10s" }));
        at(0);
        const d1 = await l.limit("k", { cost: 2 });
        at(1_000);
        await l.limit("k", { cost: 3 });
        expect(rem(await l.refund("k", { decision: d1, cost: 5 }))).toEqual([2]); // only d1's 2 units
        at(10_000); // d1's entry would have left now anyway; the other stays until 11 s
        expect((await l.peek("k")).remaining).toBe(2);
        at(11_000);
        expect((await l.peek("k")).remaining).toBe(5);
      });

      it("buckets: at most back to full", async () => {
        for (const policy of [tokenBucket({ capacity: 5, refillRate: 1, interval: "10s" }), leakyBucket({ rate: 1, period: "10s", burst: 5 })]) {
          const l = limiter(policy);
          at(0);
          await burst(l, "k", 3);
          expect([policy.kind, rem(await l.refund("k", { cost: 2 }))]).toEqual([policy.kind, [4]]);
          expect([policy.kind, rem(await l.refund("k", { cost: 100 }))]).toEqual([policy.kind, [5]]);
          const after = await burst(l, "k", 6);
          expect([policy.kind, after.map((d) => d.allowed)]).toEqual([policy.kind, [true, true, true, true, true, false]]);
        }
      });

      const buckets = () => [tokenBucket({ capacity: 3, refillRate: 1, interval: "1s" }), leakyBucket({ rate: 1, period: "1s", burst: 3 })];

      it("buckets: a refund after an earlier charge's refund gives back nothing of a later charge", async () => {
        // a1's refund moved a2 up to finish at 1 s; at 1 s a2 has no unit left to give, and a3's
        // units are a3's: before the refund shift, a2's stale mark handed one of them back
        for (const policy of [tokenBucket({ capacity: 2, refillRate: 1, interval: "1s" }), leakyBucket({ rate: 1, period: "1s", burst: 2 })]) {
          const l = limiter(policy);
          at(0);
          const [a1, a2] = await burst(l, "k", 2);
          expect([policy.kind, rem(await l.refund("k", { decision: a1! }))]).toEqual([policy.kind, [1]]);
          at(1_000);
          expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1 });
          expect([policy.kind, rem(await l.refund("k", { decision: a2! }))]).toEqual([policy.kind, [1]]);
          expect([policy.kind, (await l.limit("k", { cost: 2 })).allowed]).toEqual([policy.kind, false]);
          expect([policy.kind, brief(await l.limit("k"))]).toMatchObject([policy.kind, { allowed: true, remaining: 0 }]);
        }
      });

      it("buckets: refunds newest first, and oldest first, give every unit back", async () => {
        for (const policy of buckets()) {
          const l = limiter(policy);
          at(0);
          const newest = await burst(l, "newest", 3);
          const oldest = await burst(l, "oldest", 3);
          const got = [];
          for (const d of newest.reverse()) got.push(rem(await l.refund("newest", { decision: d })));
          for (const d of oldest) got.push(rem(await l.refund("oldest", { decision: d })));
          expect([policy.kind, got]).toEqual([policy.kind, [[1], [2], [3], [1], [2], [3]]]);
        }
      });

      it("buckets: refunds in another order may give back less, never more", async () => {
        for (const policy of buckets()) {
          const l = limiter(policy);
          at(0);
          const [a1, a2, a3] = await burst(l, "k", 3);
          // a2's refund moves a3 up and counts as a shift on every older mark too: a1's then looks
          // spent (it was not: a1 finishes at 1 s), so it gives nothing back; a3 is the last and exact
          const got = [];
          for (const d of [a2!, a1!, a3!]) got.push(rem(await l.refund("k", { decision: d })));
          expect([policy.kind, got]).toEqual([policy.kind, [[1], [1], [2]]]);
        }
      });

      it("buckets: the refund shift fades while the bucket stays full, never so fast that an old mark comes back to life", async () => {
        for (const policy of buckets()) {
          const l = limiter(policy);
          at(0);
          const [a1, a2, a3] = await burst(l, "k", 3);
          const got = [];
          for (const d of [a1!, a2!]) got.push(rem(await l.refund("k", { decision: d }))); // a shift of 2 s; a3 finishes at 1 s
          at(1_500); // full since 1 s: the shift fades to 1.5 s (the state is kept until 3 s for it)
          const b1 = await l.limit("k");
          got.push([b1.remaining]);
          got.push(rem(await l.refund("k", { decision: a3! }))); // a3's mark (3 s) less 1.5 s: finished, nothing back
          got.push(rem(await l.refund("k", { decision: b1 }))); // the last charge: exact
          expect([policy.kind, got]).toEqual([policy.kind, [[1], [2], [2], [2], [3]]]);
          at(6_000); // full for 4.5 s: no shift left, and a refund out of order is exact again
          const [c1] = await burst(l, "k", 2);
          expect([policy.kind, rem(await l.refund("k", { decision: c1! }))]).toEqual([policy.kind, [2]]);
        }
      });

      it("every limit that charged gets it back in one call; a denied decision refunds nothing", async () => {
        const l = limiter([tokenBucket({ capacity: 2, refillRate: 1, interval: "1m" }), fixedWindow({ limit: 10, window: "1h" })]);
        at(0);
        const [a, b, c] = await burst(l, "k", 3);
        expect(c!.allowed).toBe(false);
        expect(rem(await l.refund("k", { decision: c! }))).toEqual([0, 8]);
        expect(rem(await l.refund("k", { decision: a! }))).toEqual([1, 9]);
        expect(rem(await l.refund("k", { decision: b!, cost: 1 }))).toEqual([2, 10]);
        expect(await l.refund("k", { cost: 0 }).catch((e: unknown) => (e as Error).name)).toBe("SluiceInputError");
      });
    });

    describe("penalty box (block)", () => {
      it('block: "15m": the denial that starts it and every request until it ends are "blocked"', async () => {
        const l = limiter(fixedWindow({ limit: 2, window: "1m", name: "login", block: "15m" }));
        at(0);
        await burst(l, "k", 2);
        const third = await l.limit("k");
        expect(brief(third)).toEqual({ allowed: false, remaining: 0, resetAt: 900_000, retryAfterMs: 900_000, delayMs: 0, reason: "blocked" });
        expect(third.policies[0]).toMatchObject({ blocked: true, refillAt: T0 + 900_000 });
        const headers = new Headers();
        setRateLimitHeaders(headers, third, ["ietf"], l.policies);
        expect([headers.get("RateLimit"), headers.get("Retry-After")]).toEqual(['"login";r=0;t=900', "900"]);
        at(60_000); // the window has rolled, the block has not
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 840_000, reason: "blocked" });
        expect(brief(await l.peek("k"))).toMatchObject({ allowed: false, retryAfterMs: 840_000, reason: "blocked" });
        at(900_000 - 1);
        expect((await l.limit("k")).reason).toBe("blocked");
        at(900_000);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
      });

      it("escalates repeats within max of the last block's end, and starts again after a quiet spell", async () => {
        const l = limiter(tokenBucket({ capacity: 1, refillRate: 1, interval: "1h", block: { base: "1s", factor: 2, max: "4s" } }));
        at(0);
        await l.limit("k");
        const blocks: number[] = [];
        let t = 0;
        for (let i = 0; i < 5; i++) {
          // a client that comes back as soon as each block ends, before the bucket has a token:
          // denied by the empty bucket again, a new block each time, each longer
          const d = await l.limit("k");
          expect(d.reason).toBe("blocked");
          const p = d.policies[0]!;
          blocks.push(p.blockedUntil! - d.now);
          // Retry-After is when the bucket has a token again (the later of that and the block's end)
          expect(d.retryAfterMs).toBe(3_600_000 - t);
          t = p.blockedUntil! - T0;
          at(t);
        }
        expect(blocks).toEqual([1_000, 2_000, 4_000, 4_000, 4_000]);
        at(t + 4_001); // more than max (4 s) after the last block ended: a first offence again
        const again = await l.limit("k");
        expect(again.policies[0]!.blockedUntil! - again.now).toBe(1_000);
      });

      it("a client that retries at now + retryAfterMs is never denied again for that wait, nor escalated", async () => {
        // issue: retrying at each retryAfterMs used to give blocks of 60, 120, 240 … 1920 s
        const l = limiter(fixedWindow({ limit: 2, window: "1h", block: { base: "1m", factor: 2, max: "1h" } }));
        at(0);
        await burst(l, "k", 2);
        const denied = await l.limit("k");
        expect([denied.reason, denied.retryAfterMs, denied.policies[0]!.blockedUntil! - denied.now]).toEqual(["blocked", 3_600_000, 60_000]);
        const headers = new Headers();
        setRateLimitHeaders(headers, denied, ["ietf"], l.policies);
        expect([headers.get("RateLimit"), headers.get("Retry-After")]).toEqual(['"2-per-1h";r=0;t=3600', "3600"]);
        at(denied.retryAfterMs);
        const retried = await l.limit("k");
        expect([retried.allowed, retried.reason]).toEqual([true, "ok"]);
        // over the limit again within an hour of the last block's end: a repeat, blocked for 2 min
        await l.limit("k");
        const again = await l.limit("k");
        expect([again.reason, again.policies[0]!.blockedUntil! - again.now, again.retryAfterMs]).toEqual(["blocked", 120_000, 3_600_000]);
        // a client that comes back when the block ends, not when told, is denied by the window: a third offence
        at(denied.retryAfterMs + 120_000);
        const early = await l.limit("k");
        expect([early.reason, early.policies[0]!.blockedUntil! - early.now]).toEqual(["blocked", 240_000]);
      });

      it("blocks the key for every policy, consumes nothing meanwhile; reset lifts it; a cost that can never pass is no offence", async () => {
        const l = limiter([
          fixedWindow({ limit: 3, window: "1m", name: "burst", block: "10s" }),
          fixedWindow({ limit: 100, window: "1h", name: "hourly" }),
        ]);
        at(0);
        expect((await l.limit("k", { cost: 101 })).reason).toBe("cost-exceeds-limit");
        expect((await l.limit("k")).allowed).toBe(true);
        await burst(l, "k", 2);
        const d = await l.limit("k");
        expect(d.reason).toBe("blocked");
        // blocked for 10 s; told to come back when the window ends (60 s), when the request passes
        expect(d.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs, p.blocked, p.blockedUntil])).toEqual([
          ["burst", false, 0, 60_000, true, T0 + 10_000],
          ["hourly", true, 97, 0, undefined, undefined],
        ]);
        at(5_000);
        await burst(l, "k", 3);
        expect((await l.peek("k")).policies[1]!.remaining).toBe(97);
        await l.reset("k");
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, reason: "ok" });
      });
    });

    describe("concurrency", () => {
      it("holds one slot per allowed request, whatever its cost, until released; a denial says 1 s", async () => {
        const l = limiter(concurrency({ limit: 2, name: "exports" }));
        at(0);
        const a = await l.limit("k");
        const b = await l.limit("k", { cost: 5 });
        expect([a, b].map((d) => [d.allowed, d.remaining, typeof d.lease])).toEqual([
          [true, 1, "string"],
          [true, 0, "string"],
        ]);
        expect(a.lease).toMatch(/^[1-9][0-9]*$/);
        expect(a.lease).not.toBe(b.lease);
        // t: a slot may free any time, so within a second; full again when every lease has expired (30 s)
        expect(a.policies[0]).toEqual({ policy: "exports", allowed: true, limit: 2, remaining: 1, resetAt: T0 + 30_000, retryAfterMs: 0, delayMs: 0, refillAt: T0 + 1000 });
        const c = await l.limit("k");
        expect(brief(c)).toEqual({ allowed: false, remaining: 0, resetAt: 30_000, retryAfterMs: 1000, delayMs: 0, reason: "limit" });
        expect(c.lease).toBeUndefined();
        const headers = new Headers();
        setRateLimitHeaders(headers, c, ["ietf"], l.policies);
        expect([headers.get("RateLimit-Policy"), headers.get("RateLimit"), headers.get("Retry-After")]).toEqual([
          '"exports";q=2;qu="concurrent-requests"',
          '"exports";r=0;t=1',
          "1",
        ]);
        at(500);
        expect(brief(await l.release("k", a))).toEqual({ allowed: true, remaining: 1, resetAt: 30_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect((await l.release("k", a.lease as string)).remaining).toBe(1); // released already: nothing changes
        expect((await l.release("k", "4503599627370495")).remaining).toBe(1); // a lease never handed out: nothing either
        expect((await l.release("other", b)).remaining).toBe(2); // another key holds no such lease
        const d = await l.limit("k");
        expect(brief(d)).toMatchObject({ allowed: true, remaining: 0, resetAt: 30_500 });
        expect((await l.limit("k")).allowed).toBe(false);
        expect((await l.limit("k2")).allowed).toBe(true); // keys never share slots
        await l.release("k", b);
        await l.release("k", d);
        expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 2, resetAt: 500, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect(await l.release("k", "01").catch((e: unknown) => (e as Error).name)).toBe("SluiceInputError");
      });

      it("a lease never released expires after `lease` (the test clock): the wait is until the earliest expiry", async () => {
        const l = limiter(concurrency({ limit: 2, lease: "5s" }));
        at(0);
        await l.limit("k");
        at(1000);
        await l.limit("k");
        at(4500);
        expect(brief(await l.limit("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 6000, retryAfterMs: 500, delayMs: 0, reason: "limit" });
        at(4999);
        expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
        at(5000); // the first lease has expired
        const e = await l.limit("k");
        expect(brief(e)).toEqual({ allowed: true, remaining: 0, resetAt: 10_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect(e.policies[0]!.refillAt).toBe(T0 + 6000); // the lease of t=1000 expires 1 s later
        at(10_000);
        expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 2, resetAt: 10_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
        expect((await l.release("k", e)).remaining).toBe(2); // expired already: a no-op
      });

      it("is all or nothing with rate limits: a rate denial acquires no lease, a concurrency denial consumes no units", async () => {
        const l = limiter([fixedWindow({ limit: 2, window: "1m", name: "per-minute" }), concurrency({ limit: 1, name: "one" })]);
        at(0);
        const a = await l.limit("k");
        expect(a.policies.map((p) => p.remaining)).toEqual([1, 0]);
        const b = await l.limit("k");
        expect(b).toMatchObject({ allowed: false, policy: "one", retryAfterMs: 1000, reason: "limit" });
        expect(b.policies.map((p) => [p.allowed, p.remaining])).toEqual([
          [true, 1],
          [false, 0],
        ]);
        await l.release("k", a);
        const c = await l.limit("k");
        expect([c.allowed, c.policies.map((p) => p.remaining)]).toEqual([true, [0, 0]]);
        await l.release("k", c);
        const d = await l.limit("k");
        expect(d).toMatchObject({ allowed: false, policy: "per-minute", retryAfterMs: 60_000 });
        expect(d.lease).toBeUndefined();
        expect((await l.peek("k")).policies.map((p) => [p.allowed, p.remaining])).toEqual([
          [false, 0],
          [true, 1],
        ]);
      });

      it("reset frees every slot; a refund frees none", async () => {
        const l = limiter(concurrency({ limit: 1 }));
        at(0);
        const a = await l.limit("k");
        expect(a.policy).toBe("1-in-flight");
        await l.refund("k", { decision: a });
        expect((await l.limit("k")).allowed).toBe(false);
        await l.reset("k");
        expect((await l.limit("k")).allowed).toBe(true);
        expect((await l.release("k", a)).remaining).toBe(0); // a lease forgotten by the reset: a no-op
      });
    });

    describe("reference models", () => {
      it("decides like the naive reference model on random sequences", async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 3 }),
            fc.array(
              fc.record({
                dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 3000 })),
                key: fc.constantFrom("a", "b"),
                cost: fc.integer({ min: 1, max: 5 }),
                op: fc.constantFrom("limit", "limit", "limit", "limit", "peek", "reset", "refund", "refund", "release", "release"),
                withDecision: fc.boolean(),
                pick: fc.nat(),
              }),
              { minLength: 1, maxLength: 40 },
            ),
            async (specs, steps) => {
              const policies = specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
              const l = limiter(policies);
              const ref = new ReferenceLimiter(policies);
              // the latest allowed decision per key, the units it may still give back, the units
              // given back so far, and the reference's record of its charge
              const latest = new Map<string, Decision>();
              const charged = new Map<Decision, number>();
              const refunded = new Map<Decision, number>();
              const refCharges = new Map<Decision, ReferenceCharge>();
              // the decisions that acquired a lease, per key (released or not: a release is idempotent)
              const leases = new Map<string, Decision[]>();
              const concurrent = holdsLeases(policies);
              let t = T0 + 7;
              for (const step of steps) {
                t += step.dt;
                clock.now = t;
                if (step.op === "reset") {
                  await l.reset(step.key);
                  ref.reset(step.key);
                  continue;
                }
                if (step.op === "refund") {
                  const decision = step.withDecision ? latest.get(step.key) : undefined;
                  const got = plain(await l.refund(step.key, { cost: step.cost, decision }));
                  let want: PlainDecision;
                  if (decision === undefined) want = ref.refund(step.key, step.cost, undefined, t);
                  else {
                    const left = charged.get(decision) ?? 0;
                    const units = Math.min(step.cost, left);
                    charged.set(decision, left - units);
                    const before = refunded.get(decision) ?? 0;
                    refunded.set(decision, before + units);
                    want = units === 0 ? ref.peek(step.key, t) : ref.refund(step.key, units, { ...refCharges.get(decision)!, refunded: before }, t);
                  }
                  expect(got).toEqual(want);
                  continue;
                }
                if (step.op === "release") {
                  const held = leases.get(step.key) ?? [];
                  const decision = held[step.pick % Math.max(1, held.length)];
                  if (decision === undefined) continue;
                  expect(plain(await l.release(step.key, decision))).toEqual(ref.release(step.key, Number(decision.lease), t));
                  continue;
                }
                const decision = step.op === "peek" ? await l.peek(step.key) : await l.limit(step.key, { cost: step.cost });
                const got: PlainDecision = plain(decision);
                const want = step.op === "peek" ? ref.peek(step.key, t) : ref.limit(step.key, step.cost, t, Number(decision.lease ?? 0));
                expect(got).toEqual(want);
                if (step.op === "limit") expect(decision.lease !== undefined).toBe(decision.allowed && concurrent);
                if (step.op === "limit" && decision.allowed) {
                  latest.set(step.key, decision);
                  charged.set(decision, step.cost);
                  refCharges.set(decision, ref.lastCharge!);
                  if (decision.lease !== undefined) leases.set(step.key, [...(leases.get(step.key) ?? []), decision]);
                }
              }
            },
          ),
          { numRuns: runs(options.numRuns ?? 60) },
        );
      });

      it("decides like the reference model with overrides and manual blocks set, replaced, cleared and ending between the requests", async () => {
        const anOverride = fc.oneof(
          fc.record({ scale: fc.constantFrom(0.5, 1.5, 2, 3) }),
          fc.record({ pick: fc.nat(), quota: fc.integer({ min: 1, max: 12 }) }),
          fc.constant({ unlimited: true as const }),
        );
        await fc.assert(
          fc.asyncProperty(
            fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 3 }),
            fc.array(
              fc.record({
                dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 3000 })),
                key: fc.constantFrom("a", "a", "b"),
                cost: fc.integer({ min: 1, max: 5 }),
                op: fc.constantFrom("limit", "limit", "limit", "limit", "limit", "limit", "peek", "refund", "release", "reset", "set", "set", "clear", "get", "block", "unblock"),
                override: anOverride,
                ttl: fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 3000 })),
                pick: fc.nat(),
              }),
              // long enough for an override to meet counts made under another quota
              { minLength: 20, maxLength: 50, size: "medium" },
            ),
            async (specs, steps) => {
              const policies = specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
              const l = limiter(policies);
              const ref = new ReferenceLimiter(policies);
              const leases = new Map<string, Decision[]>();
              // (quotas go below the counts and leases already held, which the stores must answer
              // exactly like the reference; refunds give back the latest charges: a refund of one
              // decision across a change of a bucket's rate is judged by the invariants instead)
              let t = T0 + 11;
              for (const step of steps) {
                t += step.dt;
                clock.now = t;
                if (step.op === "set") {
                  const o = step.override;
                  const override: Override =
                    "unlimited" in o
                      ? o
                      : "scale" in o
                        ? { scale: o.scale }
                        : { quotas: { [`p${o.pick % policies.length}`]: o.quota } };
                  const set = await l.setOverride(step.key, override, step.ttl === undefined ? undefined : { ttl: step.ttl }).then(
                    () => true,
                    (error: unknown) => {
                      if (error instanceof SluiceInputError) return false; // a scale that leaves a quota 0
                      throw error;
                    },
                  );
                  if (set) ref.setOverride(step.key, override, step.ttl ?? 0, t);
                  continue;
                }
                if (step.op === "clear") {
                  await l.clearOverride(step.key);
                  ref.clearOverride(step.key, t);
                  continue;
                }
                if (step.op === "get") {
                  expect(JSON.parse(JSON.stringify((await l.getOverride(step.key)) ?? null))).toEqual(ref.getOverride(step.key, t) ?? null);
                  continue;
                }
                if (step.op === "block") {
                  await l.block(step.key, 1 + (step.pick % 3000));
                  ref.block(step.key, 1 + (step.pick % 3000), t);
                  continue;
                }
                if (step.op === "unblock") {
                  await l.unblock(step.key);
                  ref.unblock(step.key, t);
                  continue;
                }
                if (step.op === "reset") {
                  await l.reset(step.key);
                  ref.reset(step.key);
                  continue;
                }
                if (step.op === "refund") {
                  expect(plain(await l.refund(step.key, { cost: step.cost }))).toEqual(ref.refund(step.key, step.cost, undefined, t));
                  continue;
                }
                if (step.op === "release") {
                  const held = leases.get(step.key) ?? [];
                  const decision = held[step.pick % Math.max(1, held.length)];
                  if (decision === undefined) continue;
                  expect(plain(await l.release(step.key, decision))).toEqual(ref.release(step.key, Number(decision.lease), t));
                  continue;
                }
                const decision = step.op === "peek" ? await l.peek(step.key) : await l.limit(step.key, { cost: step.cost });
                const want = step.op === "peek" ? ref.peek(step.key, t) : ref.limit(step.key, step.cost, t, Number(decision.lease ?? 0));
                expect(plain(decision)).toEqual(want);
                if (step.op === "limit" && decision.allowed && decision.lease !== undefined) leases.set(step.key, [...(leases.get(step.key) ?? []), decision]);
              }
            },
          ),
          { numRuns: runs(Math.max(1, Math.ceil((options.numRuns ?? 60) / 2))) },
        );
      });
    });

    // what a user relies on, tested directly rather than through the reference models
    const invariantHooks: InvariantHooks = {
      limiter: (limits, prefix) => limiter(limits, prefix),
      store: () => store,
      prefix: () => uniquePrefix("inv"),
      setNow: (ms) => {
        clock.now = ms;
      },
      t0: T0,
      numRuns: runs(options.invariantRuns ?? options.numRuns ?? 60),
      storeTimeoutMs,
    };
    describe("invariants", () => {
      testInvariants(invariantHooks);
    });
    describe("hostile sequences", () => {
      testHostileSequences(invariantHooks);
      testMixedSequences(invariantHooks);
    });

    // per-key overrides and manual blocks: exact sequences, bad input, round trips, and the invariants with them
    describe("overrides and manual blocks", () => {
      testOverrides(invariantHooks);
      testOverrideInvariants(invariantHooks);
    });

    // reservations: the store call, what a limiter with reserve promises, and the multi-instance invariant
    describe("reservations", () => {
      testReserveCall(invariantHooks);
      testReservedDecisions(invariantHooks);
      testReservationInvariants(invariantHooks);
    });

    // names that Object.prototype answers for, as policy, quota key, key, prefix and tier: ordinary data
    describe("names as data", () => {
      testNames(invariantHooks);
    });

    // the deny cache's answers, which no store call makes: every field of the store's own denial, moved on
    describe("decisions made without the store", () => {
      testCachedDenials(invariantHooks);
    });

    // the key schema (prefix and tier collisions, escapes, lone surrogates, long keys), on this store
    describe("key schema", () => {
      beforeAll(() => {
        clock.now = T0 + 1234;
      });
      testKeySchema({ name: options.name, makeStore: () => store, timeoutMs: timeout, storeTimeoutMs });
    });

    describe("recorded vectors", () => {
      for (const vectorCase of (recorded as { cases: VectorCase[] }).cases) {
        it(vectorCase.name, async () => {
          await replayCase(vectorCase, {
            limiter: (policies) => limiter(policies),
            setNow: (ms) => {
              clock.now = ms;
            },
          });
        });
      }
    });
  });
}

/** Replays a case against a limiter factory and a way to set the store's clock, asserting each decision. */
export async function replayCase(
  vectorCase: VectorCase,
  hooks: { limiter: (policies: Policy[]) => RateLimiter; setNow: (ms: number) => void },
): Promise<void> {
  const l = hooks.limiter(vectorCase.limits.map(policyFromSpec));
  const concurrent = holdsLeases(l.policies);
  const decisions: Decision[] = [];
  for (const [i, step] of vectorCase.steps.entries()) {
    hooks.setNow(step.at);
    const decision = await runStep(l, step, decisions);
    if (decision === undefined) continue;
    if (isOverrideRead(decision)) {
      expect(decision.got, `${vectorCase.name}, step ${i} (getOverride ${JSON.stringify(step.key)} at ${step.at})`).toEqual(step.expectOverride);
      continue;
    }
    decisions[i] = decision;
    // (under an unlimited override no slot is held: whether the decision still carries a lease id is the limiter's affair)
    const unlimited = decision.override !== undefined && "unlimited" in decision.override;
    if (step.op === "limit" && !unlimited) expect(decision.lease !== undefined, `${vectorCase.name}, step ${i}: a lease iff allowed with a concurrency cap`).toBe(decision.allowed && concurrent);
    expect(plain(decision), `${vectorCase.name}, step ${i} (${step.op} ${JSON.stringify(step.key)} cost ${step.cost ?? 1} at ${step.at})`).toEqual(step.expect);
  }
}
