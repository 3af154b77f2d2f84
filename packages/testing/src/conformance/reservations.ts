/**
 * Reservations (`BoundStore.reserve` and the limiter's `reserve` option), tested on the store
 * under test: the store call's exact semantics, what a limiter with reservations promises (few
 * store calls on a hot key, changes made elsewhere binding within `maxAgeMs`, units given back),
 * and the invariant that matters most, checked directly: several instances reserving on one store
 * never admit more than a policy allows in any span.
 *
 * @module
 */
import {
  type Decision,
  MemoryStore,
  type Policy,
  RateLimiter,
  type RateLimiterOptions,
  type ReserveOptions,
  SluiceStoreError,
  type Store,
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import type { BoundStore, ReserveResult, StoreNamespace } from "@sluice/core/store";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** A store that forwards every call to `inner`, counting them, and can be made to fail (a store that is down). */
export function countingStore(inner: Store): Store & { calls: Record<string, number>; down: boolean } {
  const calls: Record<string, number> = {};
  const wrapper = {
    calls,
    down: false,
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      const call = <T>(name: string, run: () => T): T => {
        calls[name] = (calls[name] ?? 0) + 1;
        if (wrapper.down) throw new SluiceStoreError("connect ECONNREFUSED (the test took the store down)", { notApplied: true });
        return run();
      };
      return {
        consume: async (key, cost, lease) => call("consume", () => (lease === undefined ? bound.consume(key, cost) : bound.consume(key, cost, lease))),
        peek: async (key) => call("peek", () => bound.peek(key)),
        reset: async (key) => call("reset", () => bound.reset(key)),
        refund: async (key, cost, charge) => call("refund", () => bound.refund(key, cost, charge)),
        release: async (key, lease) => call("release", () => bound.release(key, lease)),
        reserve: async (key, units, holdMs) => call("reserve", () => bound.reserve!(key, units, holdMs)) as ReserveResult,
        control: async (key, command) => call("control", () => bound.control!(key, command)),
      };
    },
  };
  return wrapper;
}

/** Store calls counted by a {@link countingStore}, in all. */
export const callsOf = (store: { calls: Record<string, number> }): number => Object.values(store.calls).reduce((a, b) => a + b, 0);

/** What the reservation suites share: a clock for the store and the limiters' local clock together. */
export interface ReservationHooks extends SuiteContext {
  /** Sets the store's clock and the limiters' local clock (ms since `t0`). */
  at(ms: number): void;
  /** The local clock the limiters' `reserve.clock` reads. */
  local(): number;
}

/** {@link ReservationHooks} over a {@link SuiteContext}: the local clock follows the store's. */
export function reservationHooks(suite: SuiteContext): ReservationHooks {
  let local = 0;
  return {
    ...suite,
    at(ms) {
      local = ms;
      suite.setNow(suite.t0 + ms);
    },
    local: () => local,
  };
}

/**
 * A limiter with reservations over `store`: the deny cache off (every denial is the store's), the
 * test's store timeout, the local clock of `suite`.
 */
export function reservingLimiter(
  suite: ReservationHooks,
  store: Store,
  limits: Policy | Policy[],
  prefix: string,
  reserve: Omit<ReserveOptions, "clock"> = {},
  options: Partial<RateLimiterOptions> = {},
): RateLimiter {
  return new RateLimiter({ store, limits, prefix, denyCache: false, timeoutMs: suite.storeTimeoutMs, reserve: { ...reserve, clock: suite.local }, ...options });
}

/**
 * The store under test as a limiter with reservations sees it: a MemoryStore is wrapped (a limiter
 * never reserves over one, it is already local), so that its `reserve` is exercised too.
 */
export function reservable(store: Store): Store {
  return store instanceof MemoryStore ? { bind: (namespace) => store.bind(namespace) } : store;
}

/** `BoundStore.reserve`'s exact semantics on the store under test (call inside a store's `describe`). */
export function testReserveCall(suite: SuiteContext): void {
  const h = reservationHooks(suite);
  const bind = (policies: Policy[]) => suite.store().bind({ prefix: suite.prefix(), policies });
  const remaining = (r: { policies: readonly { remaining: number }[] }) => r.policies.map((p) => p.remaining);

  it("reserve charges up to the units asked, as many as every policy can give now, all or nothing", async () => {
    h.at(0);
    const bound = bind([fixedWindow({ limit: 10, window: "1m", name: "fw" }), slidingWindow({ limit: 6, window: "10s", name: "sw" })]);
    const first = await bound.reserve!("k", 4, 1000);
    expect([first.granted, remaining(first), first.now]).toEqual([4, [6, 2], suite.t0]);
    const second = await bound.reserve!("k", 4, 1000);
    expect([second.granted, remaining(second)]).toEqual([2, [4, 0]]);
    const third = await bound.reserve!("k", 4, 1000);
    expect([third.granted, remaining(third)]).toEqual([0, [4, 0]]);
    const denied = await bound.consume("k", 1);
    expect(denied.policies.map((p) => p.allowed)).toEqual([true, false]);
    // another key is untouched
    expect(remaining(await bound.peek("other"))).toEqual([10, 6]);
  });

  it("a bucket's reserved units count as used at the end of the hold: checked now, counted then", async () => {
    h.at(0);
    // 10 tokens, one per 100 ms; full at 0
    const bound = bind([tokenBucket({ capacity: 10, refillRate: 10, name: "tb" })]);
    const r = await bound.reserve!("k", 3, 200);
    // TAT = 0 + 200 (the hold) + 3 × 100: the bucket reads as 5 tokens now, not 7
    expect([r.granted, remaining(r), r.policies[0]!.resetAt - suite.t0]).toEqual([3, [5], 500]);
    expect(r.marks).toEqual([(suite.t0 + 500) * 1000]);
    const after: boolean[] = [];
    for (let i = 0; i < 6; i++) after.push((await bound.consume("k", 1)).policies[0]!.allowed);
    expect(after).toEqual([true, true, true, true, true, false]);
    // a reservation is never a denial and asks for no more than fits: nothing left now
    expect((await bound.reserve!("k", 3, 200)).granted).toBe(0);
  });

  it("the unused units of a reservation go back through the refund of its charge, at its price", async () => {
    h.at(0);
    const window = bind([fixedWindow({ limit: 10, window: "1m", name: "fw" })]);
    const w = await window.reserve!("k", 6, 1000);
    expect(remaining(await window.refund("k", 2, { atMs: w.now, marks: w.marks }))).toEqual([6]);
    const bucket = bind([tokenBucket({ capacity: 10, refillRate: 10, name: "tb" })]);
    const b = await bucket.reserve!("k", 4, 200);
    expect(remaining(b)).toEqual([4]);
    // all four back: the TAT moves back by 4 × 100 ms; the hold (200 ms) lingers until it passes
    expect(remaining(await bucket.refund("k", 4, { atMs: b.now, marks: b.marks, prices: [100_000] }))).toEqual([8]);
    h.at(200);
    expect(remaining(await bucket.peek("k"))).toEqual([10]);
  });

  it("reserve grants nothing while a block runs, under an unlimited override, or for a policy that cannot reserve", async () => {
    h.at(0);
    const boxed = bind([fixedWindow({ limit: 1, window: "1m", name: "fw", block: "1m" })]);
    await boxed.consume("k", 1);
    await boxed.consume("k", 1); // denied: the penalty box starts
    expect((await boxed.reserve!("k", 2, 1000)).granted).toBe(0);
    const plain = bind([fixedWindow({ limit: 5, window: "1m", name: "fw" })]);
    await plain.control!("m", { op: "block", durationMs: 1000 });
    expect((await plain.reserve!("m", 2, 1000)).granted).toBe(0);
    await plain.control!("u", { op: "setOverride", override: "u", ttlMs: 0 });
    const unlimited = await plain.reserve!("u", 2, 1000);
    expect([unlimited.granted, unlimited.override]).toEqual([0, { unlimited: true }]);
    await plain.control!("s", { op: "setOverride", override: "s,2", ttlMs: 0 });
    const scaled = await plain.reserve!("s", 3, 1000);
    expect([scaled.granted, remaining(scaled), scaled.policies[0]!.limit, scaled.override]).toEqual([3, [7], 10, { scale: 2 }]);
    for (const policy of [slidingLog({ limit: 5, window: "1m" }), leakyBucket({ rate: 1, period: "1s", burst: 3, queue: 2 }), concurrency({ limit: 3 })]) {
      const r = await bind([fixedWindow({ limit: 5, window: "1m", name: "fw" }), policy]).reserve!("k", 2, 1000);
      expect([policy.kind, r.granted]).toEqual([policy.kind, 0]);
    }
  });
}

/** Decisions in a row for `key`, one every `everyMs` from `fromMs`, each awaited with its background work. */
async function steady(h: ReservationHooks, limiter: RateLimiter, key: string, fromMs: number, count: number, everyMs: number): Promise<Decision[]> {
  const out: Decision[] = [];
  for (let i = 0; i < count; i++) {
    h.at(fromMs + i * everyMs);
    const d = await limiter.limit(key);
    await d.pending;
    out.push(d);
  }
  return out;
}

/** The store under test as a limiter with reservations sees it, its calls counted. */
const counted = (suite: SuiteContext) => countingStore(reservable(suite.store()));

/** A fixed window of `limit` an hour, named `hourly`. */
const perHour = (limit: number) => fixedWindow({ limit, window: "1h", name: "hourly" });

/**
 * What a limiter with reservations promises, on the store under test: few store calls on a hot
 * key and one per decision on a cold one, changes made through another instance binding within
 * `maxAgeMs`, unused units given back.
 */
export function testReservedDecisions(suite: SuiteContext): void {
  const h = reservationHooks(suite);

  it("a hot key is decided from reservations: 2,000 decisions at a steady rate, at most 20 store calls, none waiting", async () => {
    const store = counted(suite);
    const l = reservingLimiter(h, store, perHour(100_000), suite.prefix());
    const decisions = await steady(h, l, "hot", 0, 2000, 1);
    expect(decisions.every((d) => d.allowed)).toBe(true);
    const reserved = decisions.filter((d) => d.reserved === true).length;
    expect(reserved).toBeGreaterThanOrEqual(1990);
    expect(callsOf(store)).toBeLessThanOrEqual(20);
    // what the decisions report never grows while they are served, and agrees with the store at the end
    await l.returnReservations();
    expect((await l.peek("hot")).remaining).toBe(100_000 - 2000);
  });

  it("a cold key (one request a second) never reserves: one store call per decision", async () => {
    const store = counted(suite);
    const l = reservingLimiter(h, store, perHour(1000), suite.prefix());
    const decisions = await steady(h, l, "cold", 0, 6, 1000);
    expect(decisions.some((d) => d.reserved === true)).toBe(false);
    expect(store.calls).toEqual({ consume: 6 });
  });

  it("a limiter with a sliding log, a queue or a concurrency cap decides every request in the store", async () => {
    for (const policy of [slidingLog({ limit: 1000, window: "1h" }), leakyBucket({ rate: 100, period: "1s", burst: 100, queue: 5 }), concurrency({ limit: 1000 })]) {
      const store = counted(suite);
      const l = reservingLimiter(h, store, [perHour(100_000), policy], suite.prefix());
      const decisions = await steady(h, l, "k", 0, 50, 1);
      expect([policy.kind, decisions.some((d) => d.reserved === true), store.calls.reserve ?? 0]).toEqual([policy.kind, false, 0]);
    }
  });

  it("a block set through another instance binds within maxAgeMs; through this limiter at once", async () => {
    const store = reservable(suite.store());
    const prefix = suite.prefix();
    const a = reservingLimiter(h, store, perHour(100_000), prefix, { maxAgeMs: 500 });
    const b = reservingLimiter(h, store, perHour(100_000), prefix, { maxAgeMs: 500 });
    await steady(h, a, "k", 0, 100, 1);
    h.at(100);
    await b.block("k", "1h");
    const after = await steady(h, a, "k", 100, 600, 1);
    const firstBlocked = after.findIndex((d) => d.reason === "blocked");
    expect(firstBlocked).toBeGreaterThanOrEqual(0);
    expect(firstBlocked).toBeLessThanOrEqual(500);
    expect(after.slice(firstBlocked).every((d) => !d.allowed)).toBe(true);
    // through the same limiter: at once
    await steady(h, b, "j", 1000, 100, 1);
    await b.block("j", "1h");
    expect((await b.limit("j")).reason).toBe("blocked");
  });

  it("an override set through another instance binds within maxAgeMs", async () => {
    const store = reservable(suite.store());
    const prefix = suite.prefix();
    const a = reservingLimiter(h, store, perHour(100_000), prefix, { maxAgeMs: 300 });
    const b = reservingLimiter(h, store, perHour(100_000), prefix, { maxAgeMs: 300 });
    await steady(h, a, "k", 0, 50, 1);
    h.at(50);
    await b.setOverride("k", { scale: 2 });
    const after = await steady(h, a, "k", 50, 400, 1);
    const seen = after.findIndex((d) => d.override !== undefined);
    expect(seen).toBeGreaterThanOrEqual(0);
    expect(seen).toBeLessThanOrEqual(300);
    expect(after.slice(seen).every((d) => d.limit === 200_000)).toBe(true);
  });

  it("returnReservations gives every unused unit back; a refund of a reserved decision goes back to its reservation without a round trip", async () => {
    const store = counted(suite);
    const l = reservingLimiter(h, store, perHour(10_000), suite.prefix());
    const decisions = await steady(h, l, "k", 0, 200, 1);
    const last = decisions.at(-1)!;
    expect(last.reserved).toBe(true);
    const before = callsOf(store);
    const refunded = await l.refund("k", { decision: last });
    expect([refunded.reserved, refunded.remaining, callsOf(store)]).toEqual([true, last.remaining + 1, before]);
    await l.returnReservations();
    expect((await l.peek("k")).remaining).toBe(10_000 - 199);
  });

}

/**
 * Reservations across instances on one store: units held by one instance are never refilled
 * beneath it nor served past their window, an instance that dies holding units costs the key at
 * most those, and while the store is down an instance serves from what it holds.
 */
export function testReservationsAcrossInstances(suite: SuiteContext): void {
  const h = reservationHooks(suite);

  it("a bucket never refills beneath units held elsewhere: another instance draining the bucket leaves no more than it holds", async () => {
    const store = reservable(suite.store());
    const prefix = suite.prefix();
    // 10 tokens, one per 100 ms: a hold is at most 250 ms (a quarter of the fill time)
    const policy = tokenBucket({ capacity: 10, refillRate: 10, name: "tb" });
    const a = reservingLimiter(h, store, policy, prefix, { share: 1 });
    const b = reservingLimiter(h, store, policy, prefix, { share: 1 });
    for (let i = 0; i < 4; i++) await (await a.limit("k")).pending;
    h.at(400); // full again; a's rate is still high
    const first = await a.limit("k");
    await first.pending;
    h.at(600); // two tokens' worth of time later
    let admitted = 0;
    for (let i = 0; i < 12; i++) if ((await b.limit("k")).allowed) admitted++;
    for (let i = 0; i < 12; i++) if ((await a.limit("k")).allowed) admitted++;
    // at one instant a bucket admits at most its capacity
    expect(admitted).toBeLessThanOrEqual(10);
    expect(admitted).toBeGreaterThan(0);
    await a.returnReservations();
  });

  it("a window's reserved units serve only inside their window: past its end another instance's full quota is all there is", async () => {
    for (const policy of [fixedWindow({ limit: 100, window: "1s", name: "w" }), slidingWindow({ limit: 100, window: "1s", name: "w" })]) {
      const store = reservable(suite.store());
      const prefix = suite.prefix();
      const a = reservingLimiter(h, store, policy, prefix, { share: 1 });
      const b = new RateLimiter({ store, limits: policy, prefix, denyCache: false, timeoutMs: suite.storeTimeoutMs });
      // a is hot at the end of window 0 and holds units when it ends
      const early = await steady(h, a, "k", 960, 30, 1);
      expect(early.some((d) => d.reserved === true)).toBe(true);
      h.at(1000);
      // window 1: b takes what the store has, then a asks again at the same instant
      let admitted = 0;
      for (let i = 0; i < 110; i++) if ((await b.limit("k")).allowed) admitted++;
      for (let i = 0; i < 20; i++) if ((await a.limit("k")).allowed) admitted++;
      expect([policy.kind, admitted <= 100]).toEqual([policy.kind, true]);
      await a.returnReservations();
    }
  });

  it("an instance that dies holding units costs the key at most those units, until their window ends", async () => {
    const store = reservable(suite.store());
    const prefix = suite.prefix();
    const dying = reservingLimiter(h, store, fixedWindow({ limit: 1000, window: "10s", name: "w" }), prefix);
    await steady(h, dying, "k", 0, 20, 1);
    const held = 1000 - 20 - (await new RateLimiter({ store, limits: fixedWindow({ limit: 1000, window: "10s", name: "w" }), prefix, denyCache: false }).peek("k")).remaining;
    expect(held).toBeGreaterThan(0);
    // the instance is gone: its units stay charged, and the others get exactly the rest of the window
    const other = new RateLimiter({ store, limits: fixedWindow({ limit: 1000, window: "10s", name: "w" }), prefix, denyCache: false, timeoutMs: suite.storeTimeoutMs });
    h.at(5000);
    const d = await other.limit("k", { cost: 1000 - 20 - held });
    expect(d.allowed).toBe(true);
    expect((await other.limit("k")).allowed).toBe(false);
    h.at(10_000);
    expect((await other.limit("k", { cost: 1000 })).allowed).toBe(true);
  });

  it("an instance that dies holding a bucket's units costs the key at most those units, for their refill time plus the hold", async () => {
    const store = reservable(suite.store());
    const prefix = suite.prefix();
    // 1,000 tokens, one per ms: a hold is at most 250 ms
    const policy = tokenBucket({ capacity: 1000, refillRate: 1000, name: "tb" });
    const dying = reservingLimiter(h, store, policy, prefix);
    await steady(h, dying, "k", 0, 20, 1);
    const observer = new RateLimiter({ store, limits: policy, prefix, denyCache: false, timeoutMs: suite.storeTimeoutMs });
    h.at(20);
    const left = (await observer.peek("k")).remaining;
    // what the store holds back: the dead instance's unused units and the part of its hold not yet over
    expect(left).toBeLessThan(1000);
    // at the latest after every unit's refill plus the hold (250 ms), the bucket is full again
    h.at(20 + 1000 + 250);
    expect((await observer.peek("k")).remaining).toBe(1000);
  });

  it("while the store is down, an instance serves from the units it holds until they expire; then onStoreError decides", async () => {
    const store = counted(suite);
    const l = reservingLimiter(h, store, perHour(100_000), suite.prefix(), { maxAgeMs: 400 }, { onStoreError: "deny", onStoreFailure: () => {} });
    await steady(h, l, "k", 0, 100, 1);
    store.down = true;
    const during = await steady(h, l, "k", 100, 500, 1);
    const firstFailed = during.findIndex((d) => d.reason === "store-error");
    expect(firstFailed).toBeGreaterThan(0);
    expect(during.slice(0, firstFailed).every((d) => d.allowed && d.reserved === true)).toBe(true);
    expect(during.slice(firstFailed).every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
    store.down = false;
  });
}
