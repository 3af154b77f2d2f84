/**
 * The conformance suite's section on decisions made without the store, run on every store by
 * `testStore`: the deny cache's answer to a key the store denied carries every field the store's
 * own denial would carry at that moment — `override`, the policies with `blocked` and
 * `blockedUntil`, `limit`, `remaining`, `resetAt`, `policy` — its times moved on by the time
 * elapsed, and writes the same headers; it lasts only while that holds.
 *
 * The store under test is reached through promises (as a store across a network answers), so
 * that the deny cache is on whatever the store; a second limiter on the same namespace without a
 * cache asks the store the same question at the same moment, and is the yardstick.
 *
 * @module
 */
import { type Decision, type HeaderStyle, type Policy, RateLimiter, type Store, fixedWindow, setRateLimitHeaders, tokenBucket } from "@sluice/core";
import type { BoundStore, StoreNamespace } from "@sluice/core/store";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** `inner` answering through promises, with a count of the consume calls that reached it. */
function remote(inner: Store): { store: Store; consumes: () => number } {
  let consumes = 0;
  const store: Store = {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      return {
        consume: async (key, cost, lease) => {
          consumes++;
          return lease === undefined ? bound.consume(key, cost) : bound.consume(key, cost, lease);
        },
        peek: async (key) => bound.peek(key),
        reset: async (key) => bound.reset(key),
        refund: async (key, cost, charge) => bound.refund(key, cost, charge),
        release: async (key, lease) => bound.release(key, lease),
        control: async (key, command) => (bound.control as NonNullable<BoundStore["control"]>)(key, command),
      };
    },
  };
  return { store, consumes: () => consumes };
}

/** The fields a caller sees, but `pending` (a promise) and `reason`. */
function fields(d: Decision) {
  const { pending: _pending, reason: _reason, ...rest } = d;
  return rest;
}

function headersOf(d: Decision, policies: readonly Policy[], styles: HeaderStyle[]): Record<string, string> {
  const headers = new Headers();
  setRateLimitHeaders(headers, d, styles, policies);
  return Object.fromEntries(headers);
}

/** Registers the cached-denials section (call inside a store's `describe`). */
export function testCachedDenials(suite: SuiteContext): void {
  /**
   * A limiter with a deny cache over the store under test, its local clock and the store's moved
   * together from `t0`, and the yardstick: the same namespace, no cache.
   */
  const world = (limits: Policy[]) => {
    const time = { local: 0 };
    const prefix = suite.prefix();
    const { store, consumes } = remote(suite.store());
    const common = { limits, prefix, onStoreError: "deny" as const, timeoutMs: suite.storeTimeoutMs };
    // an entry may live an hour here: how long it lasts is what the tests look at
    const cached = new RateLimiter({ ...common, store, denyCache: { clock: () => time.local, maxAgeMs: 3_600_000 } });
    const direct = new RateLimiter({ ...common, store: suite.store(), denyCache: false });
    const at = (ms: number) => {
      time.local = ms;
      suite.setNow(suite.t0 + ms);
    };
    /** The cached limiter's answer now and the store's own, with the store calls the first one made. */
    const both = async (key: string) => {
      const before = consumes();
      const local = await cached.limit(key);
      const calls = consumes() - before;
      return { local, store: await direct.limit(key), calls };
    };
    return { cached, direct, at, both };
  };
  const all: HeaderStyle[] = ["ietf", "draft-6", "legacy"];

  it("with an override set: the cached denial carries it; every field and header reads as the store's own, moved on", async () => {
    const limits = [fixedWindow({ limit: 2, window: "10s", name: "short" }), fixedWindow({ limit: 100, window: "1h", name: "long" })];
    const w = world(limits);
    w.at(0);
    await w.cached.setOverride("k", { quotas: { short: 3 } });
    for (let i = 0; i < 3; i++) expect((await w.cached.limit("k")).allowed).toBe(true);
    const denial = await w.cached.limit("k");
    expect(denial).toMatchObject({ allowed: false, reason: "limit", limit: 3, retryAfterMs: 10_000, override: { quotas: { short: 3 } } });
    w.at(2_500);
    const { local, store, calls } = await w.both("k");
    expect(calls).toBe(0);
    expect([local.reason, store.reason]).toEqual(["cached-deny", "limit"]);
    expect(local.override).toEqual({ quotas: { short: 3 } });
    expect(fields(local)).toEqual(fields(store));
    expect(local).toMatchObject({ now: suite.t0 + 2_500, policy: "short", limit: 3, remaining: 0, resetAt: suite.t0 + 10_000, retryAfterMs: 7_500 });
    expect(headersOf(local, limits, all)).toEqual({
      "ratelimit-policy": '"short";q=3;w=10, "long";q=100;w=3600',
      ratelimit: '"short";r=0;t=8, "long";r=97;t=3598',
      "ratelimit-limit": "3",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "8",
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String(Math.ceil((suite.t0 + 10_000) / 1000)),
      "retry-after": "8",
    });
    expect(headersOf(local, limits, all)).toEqual(headersOf(store, limits, all));
    expect(headersOf(local, limits, ["draft-7"])).toEqual(headersOf(store, limits, ["draft-7"]));
  });

  it("with a penalty box running under an override: blocked, blockedUntil and the wait carried", async () => {
    const limits = [fixedWindow({ limit: 1, window: "1s", name: "login", block: "1m" })];
    const w = world(limits);
    w.at(0);
    await w.cached.setOverride("k", { scale: 2 });
    await w.cached.limit("k");
    await w.cached.limit("k");
    const blocked = await w.cached.limit("k");
    expect(blocked).toMatchObject({ allowed: false, reason: "blocked", limit: 2, retryAfterMs: 60_000, override: { scale: 2 } });
    expect(blocked.policies[0]).toMatchObject({ blocked: true, blockedUntil: suite.t0 + 60_000 });
    for (const ms of [1, 30_000, 59_000]) {
      w.at(ms);
      const { local, store, calls } = await w.both("k");
      expect(calls).toBe(0);
      expect([local.reason, store.reason]).toEqual(["cached-deny", "blocked"]);
      expect(fields(local)).toEqual(fields(store));
      expect(local.override).toEqual({ scale: 2 });
      expect(local.policies).toEqual([
        { policy: "login", allowed: false, limit: 2, remaining: 0, resetAt: suite.t0 + 60_000, retryAfterMs: 60_000 - ms, delayMs: 0, refillAt: suite.t0 + 60_000, blocked: true, blockedUntil: suite.t0 + 60_000 },
      ]);
      expect(headersOf(local, limits, all)).toEqual(headersOf(store, limits, all));
      expect(headersOf(local, limits, ["ietf"])).toEqual({
        "ratelimit-policy": '"login";q=2;w=1',
        ratelimit: `"login";r=0;t=${Math.ceil((60_000 - ms) / 1000)}`,
        "retry-after": String(Math.ceil((60_000 - ms) / 1000)),
      });
    }
    // the wait is over: the store is asked, and lets the obedient client through
    w.at(60_000);
    expect(await w.cached.limit("k")).toMatchObject({ allowed: true, reason: "ok", limit: 2, override: { scale: 2 } });
  });

  it("a manual block under { unlimited: true }: the cached denial says unlimited, as the store's does", async () => {
    const limits = [tokenBucket({ capacity: 3, refillRate: 1, interval: "1s", name: "bucket" })];
    const w = world(limits);
    w.at(0);
    await w.cached.setOverride("k", { unlimited: true });
    await w.cached.block("k", "30s");
    expect(await w.cached.limit("k")).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 30_000, override: { unlimited: true } });
    w.at(12_345);
    const { local, store, calls } = await w.both("k");
    expect(calls).toBe(0);
    expect(local).toMatchObject({ reason: "cached-deny", retryAfterMs: 17_655, override: { unlimited: true } });
    expect(fields(local)).toEqual(fields(store));
    expect(headersOf(local, limits, all)).toEqual(headersOf(store, limits, all));
  });

  it("an entry lasts while every policy reads as the store would: a bucket that is not full ends it at its next token", async () => {
    const limits = [fixedWindow({ limit: 1, window: "1m", name: "minute" }), tokenBucket({ capacity: 5, refillRate: 1, interval: "1s", name: "bucket" })];
    const w = world(limits);
    w.at(0);
    await w.cached.limit("k");
    expect(await w.cached.limit("k")).toMatchObject({ reason: "limit", policy: "minute", retryAfterMs: 60_000 });
    // the bucket gains a token at 1 s (margin 6 ms): the denial is the store's until then
    w.at(500);
    const early = await w.both("k");
    expect([early.local.reason, early.calls]).toEqual(["cached-deny", 0]);
    expect(fields(early.local)).toEqual(fields(early.store));
    w.at(994);
    expect((await w.both("k")).calls).toBe(1);
    // from 1 s the bucket is full and stays so: the minute's denial is kept until the minute ends
    w.at(1_000);
    expect((await w.both("k")).calls).toBe(1);
    w.at(45_000);
    const late = await w.both("k");
    expect([late.local.reason, late.calls]).toEqual(["cached-deny", 0]);
    expect(fields(late.local)).toEqual(fields(late.store));
    expect(late.local.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs, p.resetAt - suite.t0, p.refillAt - suite.t0])).toEqual([
      ["minute", false, 0, 15_000, 60_000, 60_000],
      ["bucket", true, 5, 0, 45_000, 45_000],
    ]);
    expect(headersOf(late.local, limits, all)).toEqual(headersOf(late.store, limits, all));
  });
}
