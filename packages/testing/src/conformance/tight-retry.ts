/**
 * Tight retry: after a denial, the same request at `now + retryAfterMs` is allowed (if nothing else
 * consumed), and at `now + retryAfterMs - 1` it is not — for every algorithm and several limits.
 *
 * Concurrency caps are left out: a slot may be released at any moment, so a concurrency denial's
 * `retryAfterMs` (1 s, or the earliest lease expiry when sooner) is a hint, not the exact time.
 *
 * @module
 */
import { type Policy, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** After a denial the same request passes at now + retryAfterMs, not 1 ms earlier. */
export function testTightRetry(suite: SuiteContext): void {
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
      const l = suite.limiter(make());
      let t = 137;
      let checked = 0;
      for (let step = 0; step < 40 && checked < 6; step++) {
        suite.at(t);
        const d = await l.limit("k", { cost });
        if (!d.allowed) {
          expect(Number.isFinite(d.retryAfterMs)).toBe(true);
          expect(d.retryAfterMs).toBeGreaterThan(0);
          suite.at(t + d.retryAfterMs - 1);
          expect((await l.limit("k", { cost })).allowed).toBe(false);
          suite.at(t + d.retryAfterMs);
          expect((await l.limit("k", { cost })).allowed).toBe(true);
          t += d.retryAfterMs;
          checked++;
        }
        t += 61 * (step % 3);
      }
      expect(checked).toBeGreaterThanOrEqual(3);
    });
  }
}
