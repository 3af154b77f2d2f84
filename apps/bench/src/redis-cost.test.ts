/**
 * Smoke test of the in-Redis cost section: a whole run with tiny rounds against its own
 * redis-server. Asserts what is exact — which commands each contender makes per decision, that a
 * denial writes nothing, that every ratio and target is reported — and never a timing.
 */
import { describe, expect, it } from "vitest";
import { benchmarksMarkdown, compare, figures } from "./publish.js";
import { COST_RATIOS, formatRedisCostReport, runRedisCostBench } from "./redis-cost.js";
import { CEILING, COST_CONTENDERS, FIXED, FIXED_DENIED, REFUND, RLF, RLF_DENIED, TIER, URL_SLIDING } from "./redis-cost-contenders.js";

describe("in-Redis cost bench", () => {
  it("measures every contender's scripts and commands per decision, pinned or saying why not, and reports every ratio with its target", async () => {
    const report = await runRedisCostBench({ rounds: 2, maxRounds: 2, budgetMs: 0, decisionsPerRound: 20, parts: 2, warmupDecisions: 20, inFlight: 2, keyCount: 10 });
    expect(report.rows.map((r) => r.name)).toEqual([...COST_CONTENDERS]);
    expect(report.server.placement).toMatch(/^(pinned to core 0 \(taskset\)|not pinned: .+)$/);
    expect(report.client).toBe(report.server.placement.startsWith("pinned") ? "pinned to core 1" : "not pinned");
    const row = (name: string) => report.rows.find((r) => r.name === name);
    for (const r of report.rows) {
      expect(r.rounds).toBe(2);
      expect(r.scriptUs).toBeGreaterThan(0);
    }
    // the ceiling: one script, one INCR per decision; every key was new during the warm-up, so no PEXPIRE afterwards
    expect(row(CEILING)?.byCommand).toEqual({ evalsha: 1, incr: 1 });
    // rate-limiter-flexible's script: SET NX + INCRBY + PTTL, a denial included (it counts denied requests)
    expect(row(RLF)?.byCommand).toEqual({ evalsha: 1, incrby: 1, pttl: 1, set: 1 });
    expect(row(RLF_DENIED)?.byCommand).toEqual({ evalsha: 1, incrby: 1, pttl: 1, set: 1 });
    // Sluice's denial reads and writes nothing back: no HSET, no PEXPIRE
    expect(row(FIXED_DENIED)?.outcome).toBe("denied");
    expect(row(FIXED_DENIED)?.byCommand).toEqual({ evalsha: 1, hmget: 1, time: 1 });
    // one script call per decision for every Sluice decision, the tier and the refund included
    for (const name of [FIXED, TIER, REFUND, FIXED_DENIED]) expect(row(name)?.byCommand.evalsha).toBe(1);
    expect(row(URL_SLIDING)?.byCommand.evalsha).toBe(1);
    // every ratio, the four with a target among them
    expect(report.ratios.map((r) => `${r.contender} ÷ ${r.against}`)).toEqual(COST_RATIOS.map((s) => `${s.contender} ÷ ${s.against}`));
    expect(report.ratios.filter((r) => r.target !== undefined).map((r) => [r.contender, r.target?.op, r.target?.bound])).toEqual([
      [FIXED, "<=", 1],
      ["Sluice slidingWindow", "<=", 0.5],
      ["Sluice tokenBucket", "<=", 0.4],
      [TIER, "<=", 1.3],
    ]);
    // two rounds: never enough for a 95% interval, so nothing is stable and every target is a miss
    expect(report.ratios.every((r) => !r.stat.stable)).toBe(true);
    expect(report.summary).toMatchObject({ pass: 0, miss: 4 });
    // published first, as figures of their own section
    const run = { date: report.date, command: "pnpm bench", machine: report.machine, durationS: 1, redisCost: report };
    const figs = compare(figures(run), undefined);
    expect(figs.map((f) => f.section)).toEqual(COST_RATIOS.map(() => "redis-cost"));
    expect(benchmarksMarkdown(run, figs, undefined)).toContain("## Inside Redis: time per decision");
    expect(formatRedisCostReport(report)).toContain(`| ${FIXED} ÷ ${RLF} `);
    expect(formatRedisCostReport(report)).toContain(`| ${FIXED_DENIED} ÷ ${RLF_DENIED} `);
  });
});
