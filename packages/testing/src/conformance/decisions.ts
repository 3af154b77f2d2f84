/**
 * Each algorithm's exact decisions on the store's test clock: the numbers of the design's table
 * (`remaining`, `resetAt`, `retryAfterMs`, `delayMs`, `reason`) request by request, standing on
 * the window edges and one millisecond before them.
 *
 * @module
 */
import { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { type Brief, brief, burst } from "./helpers.js";

/** fixedWindow's exact decisions: a count per window, the edge, a cost above the limit. */
export function testFixedWindow(suite: SuiteContext): void {
  it("counts per window, denies with the time to the window's end, and resets on the edge", async () => {
    const l = suite.limiter(fixedWindow({ limit: 3, window: "1s" }));
    suite.at(500);
    expect((await burst(l, "k", 4)).map(brief)).toEqual([
      { allowed: true, remaining: 2, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, remaining: 1, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, remaining: 0, resetAt: 1000, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: false, remaining: 0, resetAt: 1000, retryAfterMs: 500, delayMs: 0, reason: "limit" },
    ]);
    suite.at(999);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1000);
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
}

/** slidingWindow's exact decisions: the previous window weighted by its overlap, in integers. */
export function testSlidingWindow(suite: SuiteContext): void {
  it("weights the previous window by its overlap, exactly", async () => {
    const l = suite.limiter(slidingWindow({ limit: 10, window: "1s" }));
    suite.at(0);
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
    suite.at(1099);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1100);
    expect(brief(await l.limit("k"))).toEqual({ allowed: true, remaining: 0, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    // prev 10, cur 1 at r = 100: 10*(900-d) + 2*1000 <= 10000 → d >= 100
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 100, resetAt: 3000 });
    suite.at(1500);
    expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: true, remaining: 0 });
    suite.at(2500);
    // prev = 5 (window 1), cur = 0: remaining floor((10000 - 5*500)/1000) = 7; full again when window 2 ends
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 7, resetAt: 3000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    suite.at(4000);
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 10, resetAt: 4000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
  });

  it("rolls over twice when the previous window alone blocks the cost", async () => {
    const l = suite.limiter(slidingWindow({ limit: 4, window: "1s" }));
    suite.at(0);
    await burst(l, "k", 4);
    // cost 4 needs prev*(W-r') <= 0 after the rollover: only once window 0 has fully slid out
    expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: false, retryAfterMs: 2000 });
    suite.at(1999);
    expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(2000);
    expect(brief(await l.limit("k", { cost: 4 }))).toMatchObject({ allowed: true, remaining: 0 });
  });
}

/** slidingLog's exact decisions: an entry leaves exactly one window after it was admitted. */
export function testSlidingLog(suite: SuiteContext): void {
  it("keeps an exact log; an entry leaves exactly one window after it was admitted", async () => {
    const l = suite.limiter(slidingLog({ limit: 3, window: "1s" }));
    const seen: Brief[] = [];
    for (const t of [100, 200, 300, 400]) {
      suite.at(t);
      seen.push(brief(await l.limit("k")));
    }
    expect(seen).toEqual([
      { allowed: true, remaining: 2, resetAt: 1100, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, remaining: 1, resetAt: 1200, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: true, remaining: 0, resetAt: 1300, retryAfterMs: 0, delayMs: 0, reason: "ok" },
      { allowed: false, remaining: 0, resetAt: 1300, retryAfterMs: 700, delayMs: 0, reason: "limit" },
    ]);
    suite.at(1099);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1100);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, resetAt: 2100 });
    suite.at(1250);
    // live entries: 300, 1100 → a cost of 2 needs the entry of 300 to leave (at 1300)
    expect(brief(await l.limit("k", { cost: 2 }))).toEqual({
      allowed: false,
      remaining: 1,
      resetAt: 2100,
      retryAfterMs: 50,
      delayMs: 0,
      reason: "limit",
    });
    suite.at(1300);
    expect(brief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: true, remaining: 0, resetAt: 2300 });
  });
}

/** tokenBucket's exact decisions: starts full, refills continuously, one number per key. */
export function testTokenBucket(suite: SuiteContext): void {
  it("behaves like the seed's TokenBucket(100, 10): starts full, refills continuously", async () => {
    const l = suite.limiter(tokenBucket({ capacity: 100, refillRate: 10 }));
    suite.at(0);
    const full = await burst(l, "k", 100);
    expect(full.map((d) => d.remaining)).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
    expect(full.map((d) => d.resetAt - T0)).toEqual(Array.from({ length: 100 }, (_, i) => (i + 1) * 100));
    expect(brief(await l.limit("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 10_000, retryAfterMs: 100, delayMs: 0, reason: "limit" });
    suite.at(99);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(1000);
    expect((await burst(l, "k", 11)).map((d) => d.allowed)).toEqual([...Array(10).fill(true), false]);
    suite.at(1250);
    // 2.5 tokens: one taken, floor(1.5) left
    expect(brief(await l.limit("k"))).toEqual({ allowed: true, remaining: 1, resetAt: 11_100, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 1, resetAt: 11_100, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(brief(await l.limit("k", { cost: 101 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit", remaining: 1 });
    expect(brief(await l.limit("k", { cost: 3 }))).toMatchObject({ allowed: false, retryAfterMs: 150, remaining: 1 });
  });

  it("rounds a fractional emission interval up to whole microseconds", async () => {
    const l = suite.limiter(tokenBucket({ capacity: 1, refillRate: 3 })); // T = ceil(1e6/3) = 333334 µs
    suite.at(0);
    expect((await l.limit("k")).allowed).toBe(true);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 334, resetAt: 334 });
    suite.at(333);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(334);
    expect((await l.limit("k")).allowed).toBe(true);
  });
}

/** leakyBucket's exact decisions: the burst, then the queue's delays, then denials. */
export function testLeakyBucket(suite: SuiteContext): void {
  it("passes the burst and denies the next with the emission interval", async () => {
    const l = suite.limiter(leakyBucket({ rate: 10, period: "1s", burst: 5 }));
    suite.at(0);
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
    const l = suite.limiter(leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 }));
    suite.at(0);
    const seen = (await burst(l, "k", 9)).map(brief);
    expect(seen.slice(5)).toEqual([
      { allowed: true, remaining: 0, resetAt: 600, retryAfterMs: 0, delayMs: 100, reason: "ok" },
      { allowed: true, remaining: 0, resetAt: 700, retryAfterMs: 0, delayMs: 200, reason: "ok" },
      { allowed: true, remaining: 0, resetAt: 800, retryAfterMs: 0, delayMs: 300, reason: "ok" },
      { allowed: false, remaining: 0, resetAt: 800, retryAfterMs: 100, delayMs: 0, reason: "limit" },
    ]);
    expect(brief(await l.limit("k", { cost: 9 }))).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: "cost-exceeds-limit" });
    suite.at(99);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(100);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, delayMs: 300 });
  });
}
