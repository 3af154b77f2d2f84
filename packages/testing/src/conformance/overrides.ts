/**
 * What a per-key override does to the decisions (`limiter.setOverride(key, override, { ttl })`):
 * `{ quotas }` sets the named policies' quotas, `{ unlimited: true }` allows without counting, a
 * `ttl` ends at its exact millisecond, and the state counted under an override is judged by the
 * base quota once it ends.
 *
 * @module
 */
import { concurrency, fixedWindow, slidingLog, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { burst, limitBrief } from "./helpers.js";

/** `{ quotas }`, `{ unlimited: true }`, a `ttl`, and what an override leaves behind. */
export function testOverrides(suite: SuiteContext): void {
  it("{ quotas } sets the named policies' quotas (a bucket's rate with it); the others keep theirs", async () => {
    const l = suite.limiter([
      tokenBucket({ capacity: 3, refillRate: 1, name: "burst" }),
      fixedWindow({ limit: 10, window: "1m", name: "per-minute" }),
      slidingLog({ limit: 100, window: "1h", name: "hourly" }),
    ]);
    suite.at(0);
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
    suite.at(428);
    expect((await l.limit("k")).allowed).toBe(false);
    suite.at(429);
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, reason: "ok" });
    // another key: the base quotas
    expect((await l.limit("other")).policies.map((p) => p.limit)).toEqual([3, 10, 100]);
  });

  it("{ unlimited: true } allows without counting (no slot held, no penalty box, no refund); once cleared, the base quota is whole", async () => {
    const l = suite.limiter([
      fixedWindow({ limit: 2, window: "1m", name: "per-minute", block: "10m" }),
      tokenBucket({ capacity: 3, refillRate: 1, interval: "10s", name: "burst" }),
      concurrency({ limit: 1, name: "one" }),
    ]);
    suite.at(0);
    await l.setOverride("k", { unlimited: true });
    for (const d of await burst(l, "k", 6, 2)) {
      // every policy allows with its own whole quota; the binding one has the least: the cap's 1
      expect(limitBrief(d)).toEqual({ allowed: true, limit: 1, remaining: 1, resetAt: 0, retryAfterMs: 0, delayMs: 0, reason: "ok" });
      expect([d.policy, d.override]).toEqual(["one", { unlimited: true }]);
      expect(d.policies).toEqual([
        { policy: "per-minute", allowed: true, limit: 2, remaining: 2, resetAt: T0, retryAfterMs: 0, delayMs: 0, refillAt: T0 },
        { policy: "burst", allowed: true, limit: 3, remaining: 3, resetAt: T0, retryAfterMs: 0, delayMs: 0, refillAt: T0 },
        { policy: "one", allowed: true, limit: 1, remaining: 1, resetAt: T0, retryAfterMs: 0, delayMs: 0, refillAt: T0 },
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
    const p = suite.limiter([fixedWindow({ limit: 1, window: "1m", name: "login", block: "10m" })]);
    await p.limit("p");
    expect(limitBrief(await p.limit("p"))).toMatchObject({ allowed: false, retryAfterMs: 600_000, reason: "blocked" });
    await p.setOverride("p", { unlimited: true }, { ttl: "1m" });
    expect(limitBrief(await p.limit("p"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
    suite.at(60_000);
    expect(limitBrief(await p.limit("p"))).toMatchObject({ allowed: false, retryAfterMs: 540_000, reason: "blocked" });
  });

  it("a ttl ends at its exact millisecond (applied at end − 1, not at end); the counts it leaves are judged by the base quota", async () => {
    const l = suite.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 2 }, { ttl: "30s" });
    expect((await burst(l, "k", 6)).every((d) => d.allowed)).toBe(true);
    suite.at(29_999);
    expect(await l.getOverride("k")).toEqual({ scale: 2 });
    const before = await l.limit("k");
    expect([limitBrief(before), before.override]).toEqual([{ allowed: false, limit: 6, remaining: 0, resetAt: 60_000, retryAfterMs: 30_001, delayMs: 0, reason: "limit" }, { scale: 2 }]);
    suite.at(30_000);
    expect(await l.getOverride("k")).toBeUndefined();
    // 6 counted in this window, against a quota of 3 again: nothing more until the window ends
    const after = await l.limit("k");
    expect([limitBrief(after), after.override]).toEqual([{ allowed: false, limit: 3, remaining: 0, resetAt: 60_000, retryAfterMs: 30_000, delayMs: 0, reason: "limit" }, undefined]);
    suite.at(60_000);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: true, limit: 3, remaining: 2, resetAt: 120_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    // raised again mid-window: the count carries over (1 + 5 = 6, no more)
    await l.setOverride("k", { scale: 2 }, { ttl: 1000 });
    expect((await burst(l, "k", 6)).map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
  });

  it("a bucket deeper than its own quota when an override ends refills from there (capacity 2, 1/s, { scale: 3 } for 1 s)", async () => {
    // under the override: 6 tokens, T' = ceil(1,000,000 × 2 / 6) = 333,334 µs; 6 taken at 0 leave the
    // bucket full again at 2,000,004 µs. Back to 2 tokens of 1 s: full at the same time, so one
    // token is back 1,000,004 µs from 0, a whole millisecond later than 1 s
    const l = suite.limiter([tokenBucket({ capacity: 2, refillRate: 1, name: "burst" })]);
    suite.at(0);
    await l.setOverride("k", { scale: 3 }, { ttl: "1s" });
    expect((await burst(l, "k", 7)).map((d) => d.allowed)).toEqual([true, true, true, true, true, true, false]);
    suite.at(999);
    // under the override: (999,000 − 4) µs refilled, 2 whole tokens of 333,334 µs
    expect(limitBrief(await l.peek("k"))).toEqual({ allowed: true, limit: 6, remaining: 2, resetAt: 2001, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    suite.at(1000);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: false, limit: 2, remaining: 0, resetAt: 2001, retryAfterMs: 1, delayMs: 0, reason: "limit" });
    suite.at(1001);
    expect(limitBrief(await l.limit("k"))).toEqual({ allowed: true, limit: 2, remaining: 0, resetAt: 3001, retryAfterMs: 0, delayMs: 0, reason: "ok" });
  });
}
