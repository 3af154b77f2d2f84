/**
 * Smoke test of the in-memory benchmark: runs every piece with tiny iteration counts and checks the
 * shape of what it reports. Never asserts timings.
 */
import { describe, expect, it } from "vitest";
import { buildKeys, measureThroughput, median, pairedRatio, roundOps, shuffled } from "./lib/harness.js";
import { markdownTable, target, verdict } from "./lib/report.js";
import { fixedWindow, MemoryStore, RateLimiter } from "@sluice/core";
import { POLICY_KINDS } from "@sluice/core/store";
import { BENCH_ALGORITHMS } from "./algorithms/index.js";
import {
  ALGORITHMS,
  CLOCK_FLOOR,
  EXPRESS,
  FLOOR,
  HONO_RL,
  LIMITER,
  RLF,
  allowPolicy,
  denyPolicy,
  denyWindowMs,
  idlePolicy,
  measureAlgorithm,
  measureHeap,
  scenarioContenders,
} from "./memory-contenders.js";
import { agrees, formatStat, pairedStat, ratioStat } from "./lib/stats.js";
import { TARGETS, type ThroughputRow, formatMemoryReport, runMemoryBench } from "./memory.js";

const tiny = { rounds: 2, warmupMs: 0, targetRoundMs: 0, warmupOps: 5, opsPerRound: 20 };

describe("the deny path's fixed window", () => {
  const hour = 3_600_000;
  const day = 24 * hour;

  it("has more than an hour left wherever the run starts (a 1 h window rolled over at the top of the hour)", () => {
    const bareEnd = 20_000 * 24 * day; // a boundary of 24 days (and of 1 h)
    expect(denyWindowMs(bareEnd - 2 * hour)).toBe(24 * day);
    expect(denyWindowMs(bareEnd - hour)).toBe(23 * day); // exactly an hour left: not more
    expect(denyWindowMs(bareEnd - 1)).toBe(23 * day);
    expect(denyWindowMs(bareEnd)).toBe(24 * day); // a new 24-day window begins
    const both = 552 * day * 40; // 24 and 23 days end together
    expect(denyWindowMs(both - 1)).toBe(22 * day);
    for (let i = 0; i < 2000; i++) {
      const now = 1.7e12 + i * 7_919_993; // spread over ~6 months
      const w = denyWindowMs(now);
      expect(w - (now % w)).toBeGreaterThan(hour);
    }
  });

  it("denies through what was the top of an hour", async () => {
    let now = 20_000 * 24 * day - 30 * 60_000; // 30 minutes before a 1 h (and 24-day) boundary
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => now }), limits: fixedWindow({ limit: 1, window: denyWindowMs(now) }) });
    expect((await limiter.limit("k")).allowed).toBe(true);
    now += 60 * 60_000; // past the hour
    expect((await limiter.limit("k")).allowed).toBe(false);
  });
});

describe("the table of algorithms", () => {
  it("has an entry for every policy kind of core and measures the five rate algorithms, each with policies of its own kind", () => {
    expect(Object.keys(BENCH_ALGORITHMS).sort()).toEqual([...POLICY_KINDS].sort());
    expect(ALGORITHMS).toEqual(["fixedWindow", "slidingWindow", "slidingLog", "tokenBucket", "leakyBucket"]);
    for (const algorithm of ALGORITHMS) {
      expect([allowPolicy(algorithm), denyPolicy(algorithm), idlePolicy(algorithm)].map((p) => p.kind)).toEqual([algorithm, algorithm, algorithm]);
    }
  });
});

describe("harness", () => {
  it("computes medians, paired ratios and round sizes", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(() => median([])).toThrow(RangeError);
    const a = { name: "a", opsPerRound: 1, roundOpsPerSec: [10, 30, 20], opsPerSec: 20 };
    const b = { name: "b", opsPerRound: 1, roundOpsPerSec: [5, 10, 40], opsPerSec: 10 };
    expect(pairedRatio(a, b)).toBe(2); // ratios 2, 3, 0.5
    expect(roundOps(123_456)).toBe(120_000);
    expect(roundOps(0.2)).toBe(1);
  });

  it("reports a ratio as the median of per-round ratios with the 95% interval of the median, unstable beyond ±5%", () => {
    // 6 rounds: the 95% interval is the whole range
    const steady = pairedStat([10, 10.2, 10.4, 10.6, 10.8, 11], [10, 10, 10, 10, 10, 10]);
    expect(steady).toEqual({ median: 1.05, low: 1, high: 1.1, confidence: 62 / 64, min: 1, max: 1.1, rounds: 6, stable: true });
    expect(formatStat(steady)).toBe("1.05× (1.00–1.10)");
    const jumpy = ratioStat([1, 1.5, 0.8, 1, 1, 1]);
    expect(jumpy.stable).toBe(false);
    expect(formatStat(jumpy)).toBe("unstable (0.80–1.50)");
    // two runs agree when both are stable and within ±5% of each other
    expect(agrees(steady, ratioStat([1.06, 1.07, 1.08, 1.09, 1.1, 1.11]))).toBe(true);
    expect(agrees(steady, ratioStat([1.3, 1.3, 1.3, 1.3, 1.3, 1.3]))).toBe(false);
    expect(agrees(jumpy, steady)).toBe(false);
    expect(agrees(undefined, steady)).toBe(false);
  });

  it("builds distinct keys and shuffles them the same way every time", () => {
    const keys = buildKeys(1000);
    expect(keys[0]).toBe("user:0");
    expect(new Set(keys).size).toBe(1000);
    const once = shuffled(keys);
    expect(shuffled(keys)).toEqual(once);
    expect(once).not.toEqual(keys);
    expect([...once].sort()).toEqual([...keys].sort());
  });

  it("rejects a contender that allows on the deny path or denies on the allow path", async () => {
    await expect(measureThroughput([{ name: "leaky", expect: "deny", run: async (ops) => ops }], tiny)).rejects.toThrow(
      "leaky: expected no call of 5 to be allowed, but 5 were",
    );
    await expect(measureThroughput([{ name: "stingy", expect: "allow", run: async () => 0 }], tiny)).rejects.toThrow(
      "stingy: expected every call of 5 to be allowed, but 0 were",
    );
  });
});

describe("contenders", () => {
  it("allow every call in the allow scenarios and deny every call on the deny path", async () => {
    for (const expectation of ["allow", "deny"] as const) {
      const contenders = await scenarioContenders("slidingLog", buildKeys(expectation === "allow" ? 50 : 1), expectation);
      expect(contenders.map((c) => c.name)).toEqual([RLF, FLOOR, CLOCK_FLOOR, "slidingLog"]);
      for (const c of contenders) expect(await c.run(120)).toBe(expectation === "allow" ? 120 : 0);
    }
  });

  it("measure the peers beside the algorithm they implement, with the same expectations", async () => {
    for (const expectation of ["allow", "deny"] as const) {
      const fixed = await scenarioContenders("fixedWindow", buildKeys(expectation === "allow" ? 50 : 1), expectation);
      expect(fixed.map((c) => c.name)).toEqual([RLF, FLOOR, CLOCK_FLOOR, "fixedWindow", EXPRESS, HONO_RL]);
      const bucket = await scenarioContenders("tokenBucket", buildKeys(expectation === "allow" ? 50 : 1), expectation);
      expect(bucket.map((c) => c.name)).toEqual([RLF, FLOOR, CLOCK_FLOOR, "tokenBucket", LIMITER]);
      for (const c of [...fixed, ...bucket]) expect(await c.run(120)).toBe(expectation === "allow" ? 120 : 0);
    }
  });

  it("measure one algorithm in every scenario", async () => {
    const measured = await measureAlgorithm("tokenBucket", 50, tiny);
    expect(measured.map((m) => [m.scenario, m.keys])).toEqual([
      ["hot", 1],
      ["many", 50],
      ["deny", 1],
    ]);
    for (const m of measured) {
      expect(m.results.map((r) => r.name)).toEqual([RLF, FLOOR, CLOCK_FLOOR, "tokenBucket", LIMITER]);
      for (const r of m.results) {
        expect(r.opsPerRound).toBe(20);
        expect(r.roundOpsPerSec).toHaveLength(2);
        expect(r.opsPerSec).toBeGreaterThan(0);
      }
    }
  });

  it("measure bytes per key (shape only; needs --expose-gc, so in-process it refuses)", async () => {
    if (typeof globalThis.gc === "function") {
      const r = await measureHeap("tokenBucket", 100);
      expect(r).toMatchObject({ subject: "tokenBucket", keys: 100 });
    } else {
      await expect(measureHeap("tokenBucket", 100)).rejects.toThrow("run with node --expose-gc");
    }
  });
});

describe("report", () => {
  it("formats tables and verdicts", () => {
    expect(markdownTable(["a", "bb"], [["1", "2"], ["333", "4"]], ["l", "r"])).toBe(
      ["| a   | bb |", "|-----|---:|", "| 1   |  2 |", "| 333 |  4 |"].join("\n"),
    );
    expect(verdict(target(RLF, ">=", 1.3, 1.5))).toBe("PASS (≥ 1.3x)");
    expect(verdict(target("bytes", "<=", 80, 81), " B")).toBe("MISS (≤ 80 B)");
  });

  it("runs the whole benchmark in child processes and reports every figure with its target", async () => {
    const report = await runMemoryBench({
      ...tiny,
      manyKeys: 50,
      heapKeys: 1000,
      algorithms: ["tokenBucket"],
      heapSubjects: [FLOOR, "tokenBucket"],
    });
    expect(report.scenarios.map((s) => [s.id, s.title, s.keys, s.expect])).toEqual([
      ["hot", "1 hot key", 1, "allow"],
      ["many", "50 keys", 50, "allow"],
      ["deny", "deny path (1 exhausted key)", 1, "deny"],
    ]);
    for (const s of report.scenarios) {
      expect(s.rows.map((r) => r.name)).toEqual([RLF, FLOOR, CLOCK_FLOOR, "tokenBucket", LIMITER]);
      const [rlf, floor, , sluice] = s.rows as [ThroughputRow, ThroughputRow, ThroughputRow, ThroughputRow];
      expect(rlf.vsRlf).toBe(1);
      expect(floor.vsFloor).toBe(1);
      expect(rlf.targets).toEqual([]);
      expect(sluice?.targets.map((t) => [t.against, t.op, t.bound, t.value])).toEqual([
        [RLF, ">=", TARGETS.vsRlf[s.id], sluice.vsRlf],
        [FLOOR, ">=", TARGETS.vsFloor, sluice.vsFloor],
      ]);
      for (const r of s.rows) {
        expect(Number.isFinite(r.opsPerSec) && r.opsPerSec > 0).toBe(true);
        expect(r.stats.vsRlf.rounds).toBe(2);
        expect(r.stats.vsRlf.median).toBe(r.vsRlf);
        expect(r.stats.vsRlf.min).toBeLessThanOrEqual(r.stats.vsRlf.max);
      }
    }
    expect(report.memory.map((m) => [m.subject, m.keys, m.targets.map((t) => [t.op, t.bound])])).toEqual([
      [FLOOR, 1000, []],
      ["tokenBucket", 1000, [["<=", TARGETS.tokenBucketBytesPerKey]]],
    ]);
    expect(report.memory[0]?.vsFloor).toBe(1);
    expect(report.summary.pass + report.summary.miss).toBe(3 * 2 + 1);
    expect(report.summary.misses).toHaveLength(report.summary.miss);

    const text = formatMemoryReport(report);
    expect(text).toMatch(/\| scenario +\| contender +\| decisions\/s \| ÷ rate-limiter-flexible \| target/);
    expect(text).toMatch(/\| deny path \(1 exhausted key\) \| tokenBucket +\| +[\d.]+ [kM]\/s \| +[\d.]+x \| (PASS|MISS) \(≥ 10x\) +\|/);
    expect(text).toMatch(/\| tokenBucket +\| +-?[\d.]+ \|.*\| (PASS|MISS) \(≤ 80 B\) \|/);
    expect(text).toContain(`Targets: ${report.summary.pass} PASS, ${report.summary.miss} MISS`);
  });
});
