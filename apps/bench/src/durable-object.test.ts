/**
 * Smoke test of the Durable Object benchmark and of what `pnpm bench` publishes: a tiny run in
 * Miniflare, then its figures, the markdown and the chart. Never asserts timings.
 */
import { describe, expect, it } from "vitest";
import { CEILING, SLUICE, runDoBench } from "./durable-object.js";
import { benchmarksMarkdown, benchmarksSvg, compare, figures } from "./publish.js";
import { machineInfo } from "./lib/report.js";

describe("Durable Object bench", () => {
  it("measures the SluiceLimiter object against a counter object, one object, per key and sharded; then publishes", async () => {
    const report = await runDoBench({
      rounds: 2,
      warmupMs: 0,
      targetRoundMs: 0,
      warmupOps: 5,
      opsPerRound: 20,
      inFlight: 4,
      scenarios: [
        { keys: 1, shards: 0 },
        { keys: 10, shards: 0 },
        { keys: 10, shards: 2 },
      ],
    });
    expect(report.scenarios.map((s) => s.title)).toEqual(["1 key (one object)", "10 keys, one object per key", "10 keys over 2 shards"]);
    for (const s of report.scenarios) {
      expect(s.rows.map((r) => r.name)).toEqual([CEILING, SLUICE]);
      for (const r of s.rows) expect(r.run.roundOpsPerSec).toHaveLength(2);
      expect(s.rows[0]?.vsCeiling.median).toBe(1);
    }

    const run = { date: report.date, command: "pnpm bench", machine: report.machine, durationS: 1, durableObject: report };
    const figs = figures(run);
    expect(figs.map((f) => f.id)).toEqual(report.scenarios.map((s) => `durable-object / ${s.title} / ${SLUICE} / ${CEILING}`));
    // compared with itself, every stable figure agrees; an unstable one never does
    const again = compare(figs, figs);
    for (const f of again) {
      expect(f.agrees).toBe(f.stat.stable);
      expect(f.reproduced).toBe(f.stat.stable ? true : undefined);
    }
    const md = benchmarksMarkdown(run, again, "the previous date");
    expect(md).toContain("## Durable Object: decisions per second in workerd (Miniflare)");
    expect(md).toContain("Reproduce: `pnpm bench`");
    expect(md).toContain(`Machine: ${machineInfo().cores} × `);
    expect(md).toContain("![Ratios of this run](benchmarks.svg)");
    const svg = benchmarksSvg(run, figs);
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("10 keys over 2 shards");
    expect(svg.trim().endsWith("</svg>")).toBe(true);
  });
});
