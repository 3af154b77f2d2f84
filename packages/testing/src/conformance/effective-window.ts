/**
 * The effective window, IETF draft-11's `t`: the time until a policy's available quota next grows
 * (end of the window for a fixed window; the next unit freed for a sliding window or log; the next
 * token or drip for the buckets), so that on a 429 `Retry-After` is never earlier than the `t` of
 * any violated policy. `reset`-style headers keep "back to the full quota".
 *
 * @module
 */
import { type Decision, type Policy, type RateLimiter, fixedWindow, leakyBucket, setRateLimitHeaders, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import fc from "fast-check";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import { policySpecArbitrary } from "../vectors.js";
import type { SuiteContext } from "./context.js";
import { burst, namedPolicies } from "./helpers.js";

/** The `RateLimit` and `Retry-After` values Sluice writes for `d` (the `"ietf"` style). */
function ietf(l: RateLimiter, d: Decision): (string | null)[] {
  const headers = new Headers();
  setRateLimitHeaders(headers, d, ["ietf"], l.policies);
  return [headers.get("RateLimit"), headers.get("Retry-After")];
}

/** `t` on exhausted policies, spread logs, costs above 1 and a three-limit tier, header by header. */
export function testEffectiveWindow(suite: SuiteContext): void {
  it("t counts to the next unit, not to the full quota, for every algorithm", async () => {
    // each case (the policy, when its burst starts, the burst's size, the 429's RateLimit and
    // Retry-After): exhaust it, then the 429's t equals Retry-After, well short of the time back to
    // the full quota (15 s for both buckets, 100 s for the sliding window)
    const cases: [Policy, number, number, string, string][] = [
      [tokenBucket({ capacity: 3, refillRate: 1, interval: "5s", name: "tb" }), 0, 3, '"tb";r=0;t=5', "5"],
      [leakyBucket({ rate: 1, period: "5s", burst: 3, name: "lb" }), 0, 3, '"lb";r=0;t=5', "5"],
      [fixedWindow({ limit: 3, window: "1m", name: "fw" }), 0, 3, '"fw";r=0;t=60', "60"],
      // 10 counted 20 s into a 60 s window: after the roll (40 s) the previous count must weigh 9 or less (6 s more)
      [slidingWindow({ limit: 10, window: "1m", name: "sw" }), 20_000, 10, '"sw";r=0;t=46', "46"],
      [slidingLog({ limit: 3, window: "100s", name: "sl" }), 0, 3, '"sl";r=0;t=100', "100"],
    ];
    for (const [policy, startMs, n, rateLimit, retryAfter] of cases) {
      const l = suite.limiter(policy);
      suite.at(startMs);
      const allowed = await burst(l, "k", n);
      expect(allowed.every((d) => d.allowed)).toBe(true);
      const denied = await l.limit("k");
      expect([policy.kind, ...ietf(l, denied)]).toEqual([policy.kind, rateLimit, retryAfter]);
    }
  });

  it("a sliding log with spread entries: t is when the oldest leaves, Retry-After when enough have", async () => {
    const l = suite.limiter(slidingLog({ limit: 5, window: "300s", name: "log" }));
    for (const [ms, cost] of [[0, 1], [2_000, 1], [100_000, 1], [200_000, 2]] as const) {
      suite.at(ms);
      expect((await l.limit("k", { cost })).allowed).toBe(true);
    }
    suite.at(200_500);
    const d = await l.limit("k", { cost: 2 });
    // 2 units need the two oldest entries gone: the first leaves at 300 s, the second at 302 s
    expect(ietf(l, d)).toEqual(['"log";r=0;t=100', "102"]);
    expect(d.policies[0]!.refillAt - d.now).toBe(99_500);
  });

  it("a cost-5 request: t is the next token, Retry-After the fifth", async () => {
    const l = suite.limiter(tokenBucket({ capacity: 10, refillRate: 1, interval: "2s", name: "tb" }));
    suite.at(0);
    await burst(l, "k", 10);
    const d = await l.limit("k", { cost: 5 });
    expect(ietf(l, d)).toEqual(['"tb";r=0;t=2', "10"]);
  });

  it("a three-limit tier: every violated policy's t is at most Retry-After", async () => {
    const l = suite.limiter([
      tokenBucket({ capacity: 3, refillRate: 1, interval: "2s", name: "burst" }),
      slidingWindow({ limit: 5, window: "1m", name: "per-minute" }),
      fixedWindow({ limit: 100, window: "1d", name: "per-day" }),
    ]);
    suite.at(30_000);
    await burst(l, "k", 3);
    const d = await l.limit("k");
    // the bucket denies (a token in 2 s); the others would have allowed and report their state:
    // the minute's third free unit needs its window rolled (30 s) and 3 counted to weigh 2 (20 s
    // more); the day's window ends at midnight
    expect(ietf(l, d)).toEqual(['"burst";r=0;t=2, "per-minute";r=2;t=50, "per-day";r=97;t=86370', "2"]);
    suite.at(36_000);
    await burst(l, "k", 2); // the bucket has 3 again; the minute's 5 are used
    const e = await l.limit("k");
    // the minute denies: its next unit frees at the roll (24 s) plus the 5 counted weighing 4 (12 s)
    expect(ietf(l, e)).toEqual(['"burst";r=1;t=2, "per-minute";r=0;t=36, "per-day";r=95;t=86364', "36"]);
  });
}

/**
 * `refillAt` to the millisecond, and `Retry-After` against every violated policy's `t` on random
 * sequences. (Not for a concurrency cap: its `refillAt` is the earliest lease expiry or 1 s,
 * whichever is sooner, and a release may free a slot before it.)
 */
export function testEffectiveWindowEdges(suite: SuiteContext): void {
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
            suite.at(ms);
            await l.limit(key, { cost });
          }
          suite.at(t);
          return l.peek(key);
        };
        const l = suite.limiter(policy);
        const p = (await run("a")).policies[0]!;
        if (p.refillAt > p.retryAfterMs + (T0 + t) && p.remaining < policy.limit) {
          const next = p.remaining + 1;
          suite.at(p.refillAt - T0 - 1);
          expect([policy.kind, (await l.limit("a", { cost: next })).allowed]).toEqual([policy.kind, false]);
          await run("b");
          suite.at(p.refillAt - T0);
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
          const policies = namedPolicies(specs);
          const l = suite.limiter(policies);
          let t = T0 + 3;
          for (const step of steps) {
            t += step.dt;
            suite.setNow(t);
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
      { numRuns: suite.runs.properties },
    );
  });
}
