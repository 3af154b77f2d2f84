/**
 * What `pnpm bench` says about two consecutive runs: ✓ for a ratio stable in both and within ±5%,
 * and, in the Stability line, every ratio that either run printed as stable but the other run did
 * not reproduce within ±5%.
 */
import { describe, expect, it } from "vitest";
import { type BenchRun, type Figure, benchmarksMarkdown, benchmarksSvg, compare, previousFigure } from "./publish.js";
import { machineInfo } from "./lib/report.js";
import { ratioStat } from "./lib/stats.js";

/** Six rounds (the fewest with a 95% interval of the median: their whole range): `[lo, mid ×4, hi]`. */
function six(lo: number, mid: number, hi: number): number[] {
  return [lo, mid, mid, mid, mid, hi];
}

function figure(contender: string, rounds: number[]): Figure {
  return { id: `memory / 1 hot key / ${contender} / rate-limiter-flexible`, section: "memory", scenario: "1 hot key", contender, against: "rate-limiter-flexible", stat: ratioStat(rounds), headline: false };
}

describe("compare", () => {
  const previous = [
    figure("steady", six(0.98, 1, 1.02)), // stable 1.00×
    figure("moved", six(0.98, 1, 1.02)), // stable 1.00×, then 1.20×
    figure("now stable", six(0.7, 1, 1.3)), // unstable around 1.00×, then stable 1.04×
    figure("never", six(0.7, 1, 1.3)), // unstable in both
  ];
  const current = [figure("steady", six(1.03, 1.04, 1.05)), figure("moved", six(1.19, 1.2, 1.21)), figure("now stable", six(1.03, 1.04, 1.05)), figure("never", six(0.5, 1, 1.5))];

  it("marks agreement (stable in both, within ±5%) and reproduction (stable in either, medians within ±5%)", () => {
    const figs = compare(current, previous);
    expect(figs.map((f) => [f.contender, f.agrees, f.reproduced])).toEqual([
      ["steady", true, true],
      ["moved", false, false],
      ["now stable", false, true],
      ["never", false, undefined],
    ]);
    // no previous run: nothing to agree with
    expect(compare(current, undefined).map((f) => [f.agrees, f.reproduced])).toEqual(current.map(() => [false, undefined]));
  });

  it("names every stable ratio the other run did not reproduce in the Stability line", () => {
    const machine = { ...machineInfo(), loadAvgEnd: 0 };
    const run = { date: "2026-01-02T00:00:00.000Z", command: "pnpm bench", machine, durationS: 1 } as BenchRun;
    const md = benchmarksMarkdown(run, compare(current, previous), "2026-01-01T00:00:00.000Z");
    expect(md).toContain(
      "- Stability: 3 of 4 ratios stable in this run; 1 of the 2 stable in both this run and the previous one (2026-01-01T00:00:00.000Z) agree within ±5% (✓); " +
        "of the 3 stable in either run, 2 came out within ±5% of the other run's median and 1 did not: " +
        "memory / 1 hot key / moved / rate-limiter-flexible (1.00× (0.98–1.02) then 1.20× (1.19–1.21), medians 1.00× then 1.20×).",
    );
    // the same machine: no note; another CPU model: the line says so
    const note = "The previous run was on another machine";
    expect(benchmarksMarkdown(run, compare(current, previous), "2026-01-01T00:00:00.000Z", machine)).not.toContain(note);
    const other = { ...machine, cpu: "Another CPU" };
    expect(benchmarksMarkdown(run, compare(current, previous), "2026-01-01T00:00:00.000Z", other)).toContain(
      `medians 1.00× then 1.20×). ${note} (${machine.cores} × Another CPU, Node ${machine.node}), so its ratios need not carry over to this one.\n`,
    );
  });

  it("draws the ratios stable in both runs and within ±5% first in the SVG, labelled with scenario and baseline", () => {
    const machine = { ...machineInfo(), loadAvgEnd: 0 };
    const run = { date: "2026-01-02T00:00:00.000Z", command: "pnpm bench", machine, durationS: 1 } as BenchRun;
    const svg = benchmarksSvg(run, compare(current, previous));
    expect(svg).toContain("Stable in this run and the previous one, within ±5% of it (✓)");
    expect(svg).toContain("memory, 1 hot key: steady ÷ rate-limiter-flexible</text>");
    expect(svg).toContain(">1.04×</text>");
    // only the agreeing one: "moved" was stable in both but 20% away
    expect(svg).not.toContain("moved ÷");
    // no previous run: no such panel
    expect(benchmarksSvg(run, compare(current, undefined))).not.toContain("Stable in this run and the previous one");
  });
});

describe("a previous run from before the interval of the median", () => {
  it("keeps its median and min–max but counts as unstable: its stability was decided by another rule", () => {
    const old = { ...figure("steady", six(0.98, 1, 1.02)), stat: { median: 1, min: 0.98, max: 1.02, rounds: 3, stable: true } } as unknown as Figure;
    const read = previousFigure(old);
    expect(read.stat).toEqual({ median: 1, low: 0.98, high: 1.02, confidence: 0, min: 0.98, max: 1.02, rounds: 3, stable: false });
    const [f] = compare([figure("steady", six(0.99, 1, 1.01))], [old]);
    expect(f?.agrees).toBe(false);
    expect(f?.reproduced).toBe(true); // stable now, and its median within ±5% of the old one
  });
});
