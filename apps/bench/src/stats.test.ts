/**
 * The stability rule of every published ratio: the median of per-round ratios with a
 * distribution-free 95% confidence interval from two order statistics, stable when that interval
 * lies within ±5% of the median; and the harness's adaptive rounds. Nothing here is timed: the
 * contenders of the adaptive test report fixed figures through a fake clock-free loop.
 */
import { describe, expect, it } from "vitest";
import { type Contender, allStable, measureThroughput } from "./lib/harness.js";
import { CONFIDENCE, STABLE_SPREAD, agrees, binomialHalfRange, formatStat, medianCiRanks, pairedStat, ratioStat } from "./lib/stats.js";

/** `P(j ≤ B ≤ k)` for `B ~ Binomial(n, 1/2)`, exactly, as a fraction `[numerator, 2^n]` of BigInts. */
function exactRange(n: number, j: number, k: number): [bigint, bigint] {
  let c = 1n; // C(n, 0)
  let sum = 0n;
  for (let i = 0; i <= k; i++) {
    if (i > 0) c = (c * BigInt(n - i + 1)) / BigInt(i);
    if (i >= j) sum += c;
  }
  return [sum, 1n << BigInt(n)];
}

/** Whether the exact `P(j ≤ B ≤ k)` is at least 95%: `20 * sum >= 19 * 2^n`. */
function atLeast95(n: number, j: number, k: number): boolean {
  const [sum, total] = exactRange(n, j, k);
  return 20n * sum >= 19n * total;
}

describe("the interval of the median", () => {
  it("takes ranks 3 and 12 of 14 rounds: [x(3), x(12)] holds the median with probability P(3 ≤ B ≤ 11) = 16172/16384", () => {
    const r = medianCiRanks(14);
    expect([r.lower, r.upper]).toEqual([3, 12]);
    expect(exactRange(14, 3, 11)).toEqual([16172n, 16384n]);
    expect(r.coverage).toBe(16172 / 16384); // 98.7%
    // ranks 4 and 11 fall short: the median is in [x(4), x(11)] only when 4 to 10 rounds lie at
    // or below it, P = 15444/16384 = 94.3% (counting B = 11 too, 15808/16384 = 96.5%, is the
    // off-by-one that would call them a 95% interval)
    expect(exactRange(14, 4, 10)).toEqual([15444n, 16384n]);
    expect(atLeast95(14, 4, 10)).toBe(false);
    expect(exactRange(14, 4, 11)).toEqual([15808n, 16384n]);
  });

  it("is the narrowest symmetric pair reaching 95% for every n from 6 to 200, checked against an exact binomial sum", () => {
    for (let n = 6; n <= 200; n++) {
      const { lower, upper, coverage } = medianCiRanks(n);
      expect(upper).toBe(n + 1 - lower);
      expect(atLeast95(n, lower, upper - 1)).toBe(true);
      // one rank narrower on each side would fall below 95%
      if (upper - lower > 2) expect(atLeast95(n, lower + 1, upper - 2)).toBe(false);
      const [sum, total] = exactRange(n, lower, upper - 1);
      expect(coverage).toBeCloseTo(Number((sum * 10n ** 15n) / total) / 1e15, 12);
      expect(coverage).toBeGreaterThanOrEqual(CONFIDENCE);
    }
    // known values (tables of the sign-test interval of a median)
    expect([6, 9, 10, 12, 15, 17, 20, 25, 30, 40].map((n) => [n, medianCiRanks(n).lower, medianCiRanks(n).upper])).toEqual([
      [6, 1, 6],
      [9, 2, 8],
      [10, 2, 9],
      [12, 3, 10],
      [15, 4, 12],
      [17, 5, 13],
      [20, 6, 15],
      [25, 8, 18],
      [30, 10, 21],
      [40, 14, 27],
    ]);
  });

  it("has no 95% interval below 6 rounds: the whole range with its smaller coverage", () => {
    expect(medianCiRanks(5)).toEqual({ lower: 1, upper: 5, coverage: 30 / 32 });
    expect(medianCiRanks(2)).toEqual({ lower: 1, upper: 2, coverage: 0.5 });
    expect(medianCiRanks(1)).toEqual({ lower: 1, upper: 1, coverage: 0 });
    expect(() => medianCiRanks(0)).toThrow(/n must be a positive integer; got 0/);
    expect(binomialHalfRange(5, 1, 4)).toBe(30 / 32);
  });
});

describe("a ratio's figure", () => {
  const around = (m: number, spread: number, n: number) => Array.from({ length: n }, (_, i) => m * (1 - spread + (2 * spread * i) / (n - 1)));

  it("is stable when the 3rd and 12th of 14 rounds lie within ±5% of the median, whatever the outliers beyond them", () => {
    // 14 rounds: two wild ones at each end, the rest within ±4%
    const rounds = [0.2, 0.5, 0.96, 0.97, 0.98, 0.99, 1, 1, 1.01, 1.02, 1.03, 1.04, 3, 9];
    const s = ratioStat(rounds);
    expect(s).toEqual({ median: 1, low: 0.96, high: 1.04, confidence: 16172 / 16384, min: 0.2, max: 9, rounds: 14, stable: true });
    expect(formatStat(s)).toBe("1.00× (0.96–1.04)");
    // a third outlier on one side reaches the interval: unstable
    const three = [0.2, 0.5, 0.6, 0.97, 0.98, 0.99, 1, 1, 1.01, 1.02, 1.03, 1.04, 1.04, 9];
    expect(ratioStat(three).low).toBe(0.6);
    expect(ratioStat(three).stable).toBe(false);
    expect(formatStat(ratioStat(three))).toBe("unstable (0.60–1.04)");
  });

  it("sits exactly on the ±5% edge: 0.95 and 1.05 around 1 are stable, 0.949 is not", () => {
    const edge = [0.9, 0.9, 0.95, 1, 1, 1, 1, 1, 1, 1, 1, 1.05, 1.1, 1.1];
    expect(ratioStat(edge).stable).toBe(true);
    const past = [0.9, 0.9, 0.949, 1, 1, 1, 1, 1, 1, 1, 1, 1.05, 1.1, 1.1];
    expect(ratioStat(past).stable).toBe(false);
    expect(STABLE_SPREAD).toBe(0.05);
  });

  it("is never stable from fewer than 6 rounds, however tight", () => {
    expect(ratioStat([1, 1, 1, 1, 1]).stable).toBe(false);
    expect(ratioStat(around(1, 0.01, 6)).stable).toBe(true);
  });

  it("pairs rounds, and two runs agree when both are stable and their medians within ±5%", () => {
    const steady = pairedStat(around(11, 0.02, 10), around(10, 0, 10)); // 1.1 ± 2%
    expect(steady.median).toBeCloseTo(1.1, 12);
    expect(steady.stable).toBe(true);
    expect(agrees(steady, ratioStat(around(1.15, 0.02, 10)))).toBe(true); // +4.5%
    expect(agrees(steady, ratioStat(around(1.16, 0.02, 10)))).toBe(false); // +5.5%
    expect(agrees(ratioStat(around(1.1, 0.2, 10)), steady)).toBe(false); // unstable before
    expect(agrees(undefined, steady)).toBe(false);
  });
});

describe("adaptive rounds", () => {
  /**
   * A clock that only contenders move, and a contender whose measured round k takes
   * `ops * 1000 / rate(k)` ms on it: its figure in round k is exactly `rate(k)` decisions/s.
   */
  function scripted(clock: { ms: number }, name: string, rate: (round: number) => number): Contender {
    let phase = "warmup";
    let round = 0;
    return {
      name,
      expect: "allow",
      async beforeRun(p) {
        phase = p;
      },
      async run(ops) {
        clock.ms += (ops * 1000) / (phase === "round" ? rate(round++) : 100);
        return ops;
      },
    };
  }
  const options = { rounds: 3, warmupMs: 0, targetRoundMs: 0, warmupOps: 10, opsPerRound: 10 };
  /** Ratios 1, 1, 1, 2, then 1 for ever: [x(1), x(n)] holds the 2 until n = 9, whose 95% interval is [x(2), x(8)]. */
  const oneOutlier = (k: number) => (k === 3 ? 200 : 100);

  it("says whether every contender is stable against each baseline", () => {
    const base = Array.from({ length: 8 }, () => 100);
    const tight = base.map((x, i) => x * (i % 2 === 0 ? 1.01 : 0.99));
    const wild = base.map((x, i) => x * (i % 2 === 0 ? 1.5 : 0.6));
    expect(allStable(["base", "a"], [base, tight], ["base"])).toBe(true);
    expect(allStable(["base", "a", "b"], [base, tight, wild], ["base"])).toBe(false);
    // a baseline that is not a contender asks for nothing
    expect(allStable(["base", "b"], [base, wild], ["other"])).toBe(true);
    // too few rounds for a 95% interval
    expect(allStable(["base", "a"], [base.slice(0, 5), tight.slice(0, 5)], ["base"])).toBe(false);
  });

  it("runs exactly `rounds` without stableAgainst", async () => {
    const clock = { ms: 0 };
    const results = await measureThroughput([scripted(clock, "base", () => 100), scripted(clock, "x", oneOutlier)], { ...options, maxRounds: 20, clock: () => clock.ms });
    expect(results.map((r) => r.roundOpsPerSec)).toEqual([
      [100, 100, 100],
      [100, 100, 100],
    ]);
    expect(results[0]?.settled).toBeUndefined();
  });

  it("adds rounds until every ratio to the baseline is stable: 9 rounds here, then stops", async () => {
    const clock = { ms: 0 };
    const results = await measureThroughput([scripted(clock, "base", () => 100), scripted(clock, "x", oneOutlier)], {
      ...options,
      stableAgainst: ["base"],
      maxRounds: 20,
      clock: () => clock.ms,
    });
    expect(results[1]?.roundOpsPerSec).toEqual([100, 100, 100, 200, 100, 100, 100, 100, 100]);
    expect(results[0]?.roundOpsPerSec).toHaveLength(9);
    expect(results.map((r) => r.settled)).toEqual([true, true]);
  });

  it("stops at maxRounds, or when the budget is spent, and says it did not settle", async () => {
    const clock = { ms: 0 };
    const capped = await measureThroughput([scripted(clock, "base", () => 100), scripted(clock, "x", oneOutlier)], {
      ...options,
      stableAgainst: ["base"],
      maxRounds: 8,
      clock: () => clock.ms,
    });
    expect(capped[1]?.roundOpsPerSec).toHaveLength(8);
    expect(capped[1]?.settled).toBe(false);
    // a round takes 200 ms of the fake clock (two contenders, 10 ops at 100/s), the 4th 150 ms; the
    // first 3 always run (to 600 ms) and the budget counts from there: with 400 ms, rounds are added
    // at 600, 750 and 950 ms of a deadline at 1,000 ms, and none at 1,150
    const clock2 = { ms: 0 };
    const budgeted = await measureThroughput([scripted(clock2, "base", () => 100), scripted(clock2, "x", oneOutlier)], {
      ...options,
      stableAgainst: ["base"],
      maxRounds: 20,
      budgetMs: 400,
      clock: () => clock2.ms,
    });
    expect(budgeted[1]?.roundOpsPerSec).toHaveLength(6);
    expect(budgeted[1]?.settled).toBe(false);
  });

  it("takes a round's figure as the median of its slices with roundFigure: \"median\", as their sum without", async () => {
    // one contender whose 2nd slice of every round runs at a tenth of its rate: 4 ops per slice
    // (10 per round in 3 slices), at 100/s, 10/s and 100/s: 40 + 400 + 40 ms
    const run = async (roundFigure: "sum" | "median") => {
      const clock = { ms: 0 };
      const results = await measureThroughput([scripted(clock, "x", (k) => (k % 3 === 1 ? 10 : 100))], { ...options, slices: 3, roundFigure, clock: () => clock.ms });
      return results[0]?.roundOpsPerSec;
    };
    expect(await run("sum")).toEqual([25, 25, 25]); // 12 ops in 480 ms
    expect(await run("median")).toEqual([100, 100, 100]);
  });
});
