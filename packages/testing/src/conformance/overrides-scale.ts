/**
 * `{ scale }` overrides on each kind of policy, as exact sequences on the store's test clock. A quota
 * `Q` is scaled to `Q' = min(max, max(1, floor(Q × scale)))`; a window keeps its length; a bucket's
 * queue becomes `floor(queue × Q'/Q)` and its emission interval `T' = max(1, ceil(T × Q/Q'))` µs.
 * State counted under one quota is then judged by the other, when an override starts or ends.
 *
 * @module
 */
import { concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { type LimitBrief, burst, limitBrief } from "./helpers.js";

/** `{ scale }` on every kind of policy, each in the sequences of its own definition. */
export function testScaleOverrides(suite: SuiteContext): void {
  describe("{ scale } on each kind", () => {
    scaleOnWindows(suite);
    scaleOnBuckets(suite);
  });
}

/** The window algorithms' quotas scaled, and a log holding more than its quota once an override ends. */
function scaleOnWindows(suite: SuiteContext): void {
  it("fixedWindow: limit × scale per window, the window unchanged", async () => {
    const l = suite.limiter([fixedWindow({ limit: 3, window: "1s", name: "fixed" })]);
    suite.at(500);
    await l.setOverride("k", { scale: 2 });
    const seen = await burst(l, "k", 7);
    expect(seen.map(limitBrief)).toEqual([
      ...[5, 4, 3, 2, 1, 0].map((remaining) => ({ allowed: true, limit: 6, remaining, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" })),
      { allowed: false, limit: 6, remaining: 0, resetAt: 1000, retryAfterMs: 500, delayMs: 0, reason: "limit" },
    ]);
    expect(seen.map((d) => d.override)).toEqual(Array(7).fill({ scale: 2 }));
    expect(seen[6]!.policies).toEqual([{ policy: "fixed", allowed: false, limit: 6, remaining: 0, resetAt: T0 + 1000, retryAfterMs: 500, delayMs: 0, refillAt: T0 + 1000 }]);
    suite.at(1000);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: true, limit: 6, remaining: 5, resetAt: 2000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(limitBrief(await l.limit("k", { cost: 6 }))).toMatchObject({ allowed: false, retryAfterMs: 1000, reason: "limit" });
    expect(limitBrief(await l.limit("k", { cost: 7 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
    // another key keeps the base quota
    expect(limitBrief(await l.limit("other", { cost: 4 }))).toMatchObject({ allowed: false, limit: 3, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
    expect((await l.limit("other")).override).toBeUndefined();
  });

  it("slidingWindow: limit × scale (4 × 2.5 = 10), weighted as ever", async () => {
    const l = suite.limiter([slidingWindow({ limit: 4, window: "1s", name: "sliding" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 2.5 });
    const first = await burst(l, "k", 10);
    expect(first.map((d) => [d.allowed, d.limit, d.remaining, d.resetAt - T0])).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map((r) => [true, 10, r, 2000]));
    // 11th: 10 × (1000 − r) + 1 × 1000 <= 10 × 1000 once r >= 100 in the next window
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 2000, retryAfterMs: 1100, delayMs: 0, reason: "limit" });
    suite.at(1099);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1100);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: true, limit: 10, remaining: 0, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
  });

  it("slidingLog: limit × scale, rounded down (2 × 1.5 = 3); an entry leaves one window after it", async () => {
    const l = suite.limiter([slidingLog({ limit: 2, window: "1s", name: "log" })]);
    await l.setOverride("k", { scale: 1.5 });
    const seen: LimitBrief[] = [];
    for (const t of [100, 200, 300, 400]) {
      suite.at(t);
      seen.push(limitBrief(await l.limit("k")));
    }
    expect(seen).toEqual([
      { allowed: true, limit: 3, remaining: 2, resetAt: 1100, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, limit: 3, remaining: 1, resetAt: 1200, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, limit: 3, remaining: 0, resetAt: 1300, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: false, limit: 3, remaining: 0, resetAt: 1300, retryAfterMs: 700, delayMs: 0, reason: "limit" },
    ]);
    suite.at(1099);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1100);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, remaining: 0, resetAt: 2100 });
  });

  it("slidingLog holding more than its quota once an override ends: the quota grows when the surplus has left, not at the oldest entry", async () => {
    // limit 2 × 3 = 6 until 200; at 300 the log holds 6 units against a quota of 2, so a unit is
    // free again only once the entries holding 5 of them have left: the last one, at 1180
    const l = suite.limiter([slidingLog({ limit: 2, window: "1s", name: "log" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 3 }, { ttl: 200 });
    for (const t of [100, 150, 180]) {
      suite.at(t);
      expect((await l.limit("k", { cost: 2 })).allowed).toBe(true);
    }
    suite.at(300);
    const denied = await l.limit("k");
    expect(limitBrief(denied)).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 1180, retryAfterMs: 880, delayMs: 0, reason: "limit" });
    expect(denied.policies[0]!.refillAt - T0).toBe(1180);
    expect((await l.peek("k")).policies[0]!.refillAt - T0).toBe(1180);
    suite.at(1179);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(1180);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
  });
}

/** The buckets' capacity, burst, queue and rate scaled, and a concurrency cap's slots. */
function scaleOnBuckets(suite: SuiteContext): void {
  it("tokenBucket: capacity and rate × scale (4 per 2/s × 2.5: 10 tokens, one per 200 ms)", async () => {
    // T = 500,000 µs; T' = ceil(500,000 × 4 / 10) = 200,000 µs
    const l = suite.limiter([tokenBucket({ capacity: 4, refillRate: 2, name: "burst" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 2.5 });
    const full = await burst(l, "k", 10);
    expect(full.map((d) => [d.limit, d.remaining, d.resetAt - T0])).toEqual(Array.from({ length: 10 }, (_, i) => [10, 9 - i, (i + 1) * 200]));
    const denied = await l.limit("k");
    expect(limitBrief(denied)).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 2000, retryAfterMs: 200, delayMs: 0, reason: "limit" });
    expect(denied.policies[0]!.refillAt - denied.now).toBe(200);
    suite.at(199);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(200);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: true, limit: 10, remaining: 0, resetAt: 2200, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    suite.at(1300);
    // 2200 − 1300 = 900 ms behind full: 10 − ceil(900 / 200) = 5 whole tokens
    expect(limitBrief(await l.peek("k"))).toEqual({ allowed: true, limit: 10, remaining: 5, resetAt: 2200, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(limitBrief(await l.limit("k", { cost: 11 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
  });

  it("leakyBucket: burst, queue and rate × scale (10/s, burst 5, queue 3 × 2: burst 10, queue 6, a drop per 50 ms)", async () => {
    const l = suite.limiter([leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3, name: "shaper" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 2 });
    const seen = (await burst(l, "k", 17)).map(limitBrief);
    expect(seen.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => ({ allowed: true, limit: 10, remaining: 9 - i, resetAt: (i + 1) * 50, retryAfterMs: 0, delayMs: 0, reason: "ok" })));
    expect(seen.slice(10, 16)).toEqual(Array.from({ length: 6 }, (_, i) => ({ allowed: true, limit: 10, remaining: 0, resetAt: 550 + i * 50, retryAfterMs: 0, delayMs: (i + 1) * 50, reason: "ok" })));
    expect(seen[16]).toEqual({ allowed: false, limit: 10, remaining: 0, resetAt: 800, retryAfterMs: 50, delayMs: 0, reason: "limit" });
    expect(limitBrief(await l.limit("k", { cost: 17 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
    suite.at(49);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(50);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, delayMs: 300 });
  });

  it("a bucket deeper than its lowered burst and queue gains its first unit when the depth is back within them, not at the next drip", async () => {
    // burst 3 + queue 1, a drop per 100 ms, filled at 0 (TAT 400 ms); { scale: 0.5 }: burst 1,
    // no queue (floor(1 × 1 / 3)), a drop per 300 ms: 100 ms too deep, so the first unit is back
    // at 400 (a credit of T), not at 100 (the next multiple of T)
    const l = suite.limiter([leakyBucket({ rate: 10, period: "1s", burst: 3, queue: 1, name: "shaper" })]);
    suite.at(0);
    expect((await burst(l, "k", 4)).map((d) => [d.allowed, d.delayMs])).toEqual([
      [true, 0],
      [true, 0],
      [true, 0],
      [true, 100],
    ]);
    await l.setOverride("k", { scale: 0.5 });
    const denied = await l.limit("k");
    expect(limitBrief(denied)).toEqual({ allowed: false, limit: 1, remaining: 0, resetAt: 400, retryAfterMs: 400, delayMs: 0, reason: "limit" });
    expect(denied.policies[0]!.refillAt - T0).toBe(400);
    suite.at(399);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(400);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 1, remaining: 0, delayMs: 0 });
  });

  it("concurrency: slots × scale (2 × 1.5 = 3); a release frees one", async () => {
    const l = suite.limiter([concurrency({ limit: 2, name: "exports" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 1.5 });
    const held = await burst(l, "k", 4);
    expect(held.map((d) => [d.allowed, d.limit, d.remaining, d.lease !== undefined])).toEqual([
      [true, 3, 2, true],
      [true, 3, 1, true],
      [true, 3, 0, true],
      [false, 3, 0, false],
    ]);
    await l.release("k", held[0]!);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, remaining: 0 });
  });

  it("concurrency holding more leases than its quota once an override is cleared: a slot is back when the surplus and one more have expired", async () => {
    // 2 × 2 = 4 leases of 1 s taken at 0, 10, 20, 30; cleared at 40: 4 held against 2, so the
    // third expiry (1020) frees a slot under the quota, not the first (1000)
    const l = suite.limiter([concurrency({ limit: 2, lease: "1s", name: "exports" })]);
    await l.setOverride("k", { scale: 2 });
    for (const t of [0, 10, 20, 30]) {
      suite.at(t);
      expect((await l.limit("k")).allowed).toBe(true);
    }
    suite.at(40);
    await l.clearOverride("k");
    const denied = await l.limit("k");
    expect(limitBrief(denied)).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 1030, retryAfterMs: 980, delayMs: 0, reason: "limit" });
    expect(denied.policies[0]!.refillAt - T0).toBe(1020);
    suite.at(1019);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(1020);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
  });
}
