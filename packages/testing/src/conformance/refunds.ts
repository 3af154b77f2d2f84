/**
 * Refunds (`limiter.refund(key, { decision?, cost? })`): each algorithm gives back at most what the
 * decision charged, never above the quota, and only where the charge still counts (its window, its
 * log entry, its bucket's depth); every limit that charged gets its share back in one call.
 *
 * @module
 */
import { type Policy, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";
import { brief, burst, remainingOf as rem } from "./helpers.js";

/** The window algorithms' refunds, and one call across several limits. */
export function testRefunds(suite: SuiteContext): void {
  it("fixedWindow: at most what the decision charged, never above the quota, only in its window", async () => {
    const l = suite.limiter(fixedWindow({ limit: 3, window: "1m" }));
    suite.at(0);
    const [d1, , d3] = await burst(l, "k", 3);
    expect(rem(await l.refund("k", { decision: d3! }))).toEqual([1]);
    expect(rem(await l.refund("k", { decision: d3! }))).toEqual([1]); // that decision's unit is back already
    expect(rem(await l.refund("k", { cost: 10 }))).toEqual([3]); // 2 were charged: back to 3, not beyond
    expect((await l.limit("k")).remaining).toBe(2);
    suite.at(60_000);
    expect((await l.limit("k")).remaining).toBe(2);
    expect(rem(await l.refund("k", { decision: d1! }))).toEqual([2]); // charged in the last window: nothing here
  });

  it("slidingWindow: the window it was charged in, also once it is the previous one", async () => {
    const l = suite.limiter(slidingWindow({ limit: 4, window: "10s" }));
    suite.at(0);
    const d1 = await l.limit("k", { cost: 2 });
    suite.at(10_000);
    await l.limit("k", { cost: 2 });
    // 2 now + 2 previous weighing 100 %: nothing left; giving d1 back leaves 2 + 0
    expect((await l.peek("k")).remaining).toBe(0);
    expect(rem(await l.refund("k", { decision: d1 }))).toEqual([2]);
    expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("slidingLog: that request's entry and no other", async () => {
    const l = suite.limiter(slidingLog({ limit: 5, window: "10s" }));
    suite.at(0);
    const d1 = await l.limit("k", { cost: 2 });
    suite.at(1_000);
    await l.limit("k", { cost: 3 });
    expect(rem(await l.refund("k", { decision: d1, cost: 5 }))).toEqual([2]); // only d1's 2 units
    suite.at(10_000); // d1's entry would have left now anyway; the other stays until 11 s
    expect((await l.peek("k")).remaining).toBe(2);
    suite.at(11_000);
    expect((await l.peek("k")).remaining).toBe(5);
  });

  it("every limit that charged gets it back in one call; a denied decision refunds nothing", async () => {
    const l = suite.limiter([tokenBucket({ capacity: 2, refillRate: 1, interval: "1m" }), fixedWindow({ limit: 10, window: "1h" })]);
    suite.at(0);
    const [a, b, c] = await burst(l, "k", 3);
    expect(c!.allowed).toBe(false);
    expect(rem(await l.refund("k", { decision: c! }))).toEqual([0, 8]);
    expect(rem(await l.refund("k", { decision: a! }))).toEqual([1, 9]);
    expect(rem(await l.refund("k", { decision: b!, cost: 1 }))).toEqual([2, 10]);
    expect(await l.refund("k", { cost: 0 }).catch((e: unknown) => (e as Error).name)).toBe("SluiceInputError");
  });
}

/** Two small buckets, one of each kind, with the same burst and rate. */
const buckets = (): Policy[] => [tokenBucket({ capacity: 3, refillRate: 1, interval: "1s" }), leakyBucket({ rate: 1, period: "1s", burst: 3 })];

/**
 * The buckets' refunds: back to full at most, and a refund of an older charge never gives back a
 * later one's units, in whatever order the charges come back.
 */
export function testBucketRefunds(suite: SuiteContext): void {
  it("buckets: at most back to full", async () => {
    for (const policy of [tokenBucket({ capacity: 5, refillRate: 1, interval: "10s" }), leakyBucket({ rate: 1, period: "10s", burst: 5 })]) {
      const l = suite.limiter(policy);
      suite.at(0);
      await burst(l, "k", 3);
      expect([policy.kind, rem(await l.refund("k", { cost: 2 }))]).toEqual([policy.kind, [4]]);
      expect([policy.kind, rem(await l.refund("k", { cost: 100 }))]).toEqual([policy.kind, [5]]);
      const after = await burst(l, "k", 6);
      expect([policy.kind, after.map((d) => d.allowed)]).toEqual([policy.kind, [true, true, true, true, true, false]]);
    }
  });

  it("buckets: a refund after an earlier charge's refund gives back nothing of a later charge", async () => {
    // a1's refund moved a2 up to finish at 1 s; at 1 s a2 has no unit left to give, and a3's
    // units are a3's: the refund shift keeps a2's stale mark from handing one of them back
    for (const policy of [tokenBucket({ capacity: 2, refillRate: 1, interval: "1s" }), leakyBucket({ rate: 1, period: "1s", burst: 2 })]) {
      const l = suite.limiter(policy);
      suite.at(0);
      const [a1, a2] = await burst(l, "k", 2);
      expect([policy.kind, rem(await l.refund("k", { decision: a1! }))]).toEqual([policy.kind, [1]]);
      suite.at(1_000);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1 });
      expect([policy.kind, rem(await l.refund("k", { decision: a2! }))]).toEqual([policy.kind, [1]]);
      expect([policy.kind, (await l.limit("k", { cost: 2 })).allowed]).toEqual([policy.kind, false]);
      expect([policy.kind, brief(await l.limit("k"))]).toMatchObject([policy.kind, { allowed: true, remaining: 0 }]);
    }
  });

  it("buckets: refunds newest first, and oldest first, give every unit back", async () => {
    for (const policy of buckets()) {
      const l = suite.limiter(policy);
      suite.at(0);
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
      const l = suite.limiter(policy);
      suite.at(0);
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
      const l = suite.limiter(policy);
      suite.at(0);
      const [a1, a2, a3] = await burst(l, "k", 3);
      const got = [];
      for (const d of [a1!, a2!]) got.push(rem(await l.refund("k", { decision: d }))); // a shift of 2 s; a3 finishes at 1 s
      suite.at(1_500); // full since 1 s: the shift fades to 1.5 s (the state is kept until 3 s for it)
      const b1 = await l.limit("k");
      got.push([b1.remaining]);
      got.push(rem(await l.refund("k", { decision: a3! }))); // a3's mark (3 s) less 1.5 s: finished, nothing back
      got.push(rem(await l.refund("k", { decision: b1 }))); // the last charge: exact
      expect([policy.kind, got]).toEqual([policy.kind, [[1], [2], [2], [2], [3]]]);
      suite.at(6_000); // full for 4.5 s: no shift left, and a refund out of order is exact again
      const [c1] = await burst(l, "k", 2);
      expect([policy.kind, rem(await l.refund("k", { decision: c1! }))]).toEqual([policy.kind, [2]]);
    }
  });
}
