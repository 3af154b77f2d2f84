/**
 * Several limits on one key (a burst and a per-minute quota, say): a request is allowed only if
 * every limit allows it, a denied one consumes from none, and the decision names the binding policy.
 *
 * @module
 */
import { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { burst } from "./helpers.js";

/** Several limits on one key: all or nothing, and the binding policy named. */
export function testSeveralLimits(suite: SuiteContext): void {
  it("is all or nothing, and names the binding policy", async () => {
    const l = suite.limiter([
      tokenBucket({ capacity: 2, refillRate: 1, name: "burst" }),
      fixedWindow({ limit: 3, window: "1m", name: "per-minute" }),
    ]);
    suite.at(0);
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
    suite.at(1000);
    const d = await l.limit("k");
    expect(d).toMatchObject({ allowed: true, policy: "burst", remaining: 0 }); // tie on 0: the first configured
    suite.at(2000);
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
    const l = suite.limiter(policies);
    suite.at(0);
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
}
