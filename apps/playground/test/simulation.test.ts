import { readFile } from "node:fs/promises";
import { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { FIGURES, renderFigure } from "../src/docs-figures.js";
import { renderComparisonSvg } from "../src/plot.js";
import {
  ALGORITHMS,
  PLANS,
  PRESETS,
  T0_MS,
  formatTrace,
  generateTrace,
  parseTrace,
  presetSettings,
  retryAfterSeconds,
  simulate,
  stateFromQuery,
  stateToQuery,
} from "../src/simulation.js";
import { EPOCH_MS, directRun, windowEdgePolicies, windowEdgeTrace } from "./direct.js";

describe("window-edge preset (the default): 200 requests in 2 s across a minute boundary, 100 per minute", () => {
  it("is the default preset and generates exactly the seed's trace", () => {
    expect(PRESETS[0].id).toBe("window-edge");
    expect(stateFromQuery("").preset).toBe("window-edge");
    expect(T0_MS).toBe(EPOCH_MS);
    expect(generateTrace(presetSettings("window-edge"))).toEqual(windowEdgeTrace());
  });

  it("counts what a direct run of the core RateLimiter decides: fixed 200, sliding window 101, sliding log 100, token bucket 103, leaky bucket 23", async () => {
    const sim = await simulate(presetSettings("window-edge"));
    const policies = windowEdgePolicies();
    const expected = {
      fixedWindow: { allowed: 200, denied: 0, delayed: 0 },
      slidingWindow: { allowed: 101, denied: 99, delayed: 0 },
      slidingLog: { allowed: 100, denied: 100, delayed: 0 },
      tokenBucket: { allowed: 103, denied: 97, delayed: 0 },
      leakyBucket: { allowed: 23, denied: 177, delayed: 13 },
    };
    for (const algorithm of ALGORITHMS) {
      const run = sim.runs[algorithm];
      const direct = await directRun(policies[algorithm] as never, windowEdgeTrace());
      expect({ algorithm, allowed: direct.allowed, denied: direct.denied, delayed: direct.delayed }).toEqual({ algorithm, ...expected[algorithm] });
      expect(run?.totals).toMatchObject(expected[algorithm]);
      // request by request, the playground shows the core's decisions
      expect(run?.outcomes.map(({ allowed, delayMs, remaining, retryAfterMs }) => ({ allowed, delayMs, remaining, retryAfterMs }))).toEqual(direct.outcomes);
    }
    // the Retry-After a client sees: seconds, rounded up
    expect(sim.runs.slidingLog?.totals.maxRetryAfterS).toBe(59);
    expect(sim.runs.slidingWindow?.totals.maxRetryAfterS).toBe(1);
    expect(sim.runs.fixedWindow?.totals.maxRetryAfterS).toBe(0);
  });

  it("plots what it counts: the bins add up to the totals", async () => {
    const sim = await simulate(presetSettings("window-edge"));
    expect(sim.view).toEqual({ startMs: 58_900, endMs: 61_100, binMs: 20, bins: 110 });
    for (const run of Object.values(sim.runs)) {
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      expect(sum(run.series.allowed) + sum(run.series.delayed)).toBe(run.totals.allowed);
      expect(sum(run.series.denied)).toBe(run.totals.denied);
      expect(run.series.remaining.every((r) => r >= 0 && r <= run.quota)).toBe(true);
    }
    // the fixed window is full again right at the boundary; the sliding window is not
    const edgeBin = (60_000 - sim.view.startMs) / sim.view.binMs;
    expect(sim.runs.fixedWindow?.series.remaining[edgeBin - 1]).toBe(0);
    expect(sim.runs.fixedWindow?.series.remaining[edgeBin]).toBe(98);
    expect(sim.runs.slidingWindow?.series.remaining[edgeBin]).toBe(0);
  });
});

describe("plan presets (the demo's free, pro and enterprise plans)", () => {
  it.each(["free", "pro", "enterprise"] as const)("%s: every column counts what the core decides with the plan's limits and daily cap", async (plan) => {
    const { perMinute, perDay, burst } = PLANS[plan];
    const settings = presetSettings(plan);
    const trace = generateTrace(settings);
    expect(trace.length).toBe(12 * 4 * burst);
    const sim = await simulate(settings);
    const perDayLimit = fixedWindow({ limit: perDay, window: "1d", name: "per-day" });
    const direct = {
      fixedWindow: fixedWindow({ limit: perMinute, window: "1m" }),
      slidingWindow: slidingWindow({ limit: perMinute, window: "1m" }),
      slidingLog: slidingLog({ limit: perMinute, window: "1m" }),
      tokenBucket: tokenBucket({ capacity: burst, refillRate: perMinute, interval: "1m" }),
      leakyBucket: leakyBucket({ rate: perMinute, period: "1m", burst, queue: burst }),
    };
    for (const algorithm of ALGORITHMS) {
      const reference = await directRun([direct[algorithm], perDayLimit], trace);
      expect(sim.runs[algorithm]?.totals).toMatchObject({ allowed: reference.allowed, denied: reference.denied, delayed: reference.delayed });
      expect(sim.runs[algorithm]?.policyNames).toEqual([direct[algorithm].name, "per-day"]);
    }
  });
});

describe("traffic shapes", () => {
  const base = presetSettings("window-edge");
  it("steady, bursts and ramp send the requests they say", () => {
    expect(generateTrace({ ...base, shape: "steady", "steady.rate": "2", "steady.duration": "2m" })).toHaveLength(240);
    const bursts = generateTrace({ ...base, shape: "bursts", "bursts.size": "40", "bursts.spread": "1s", "bursts.every": "15s", "bursts.count": "12" });
    expect(bursts).toHaveLength(480);
    expect(bursts[40]?.timeMs).toBe(15_000);
    const ramp = generateTrace({ ...base, shape: "ramp", "ramp.from": "0", "ramp.to": "4", "ramp.duration": "3m" });
    expect(ramp).toHaveLength(360);
    // the rate grows: fewer requests in the first half than in the second
    expect(ramp.filter((e) => e.timeMs < 90_000).length).toBe(90);
    expect(ramp.every((e, i) => i === 0 || e.timeMs >= (ramp[i - 1]?.timeMs ?? 0))).toBe(true);
  });

  it("a pasted trace (time, or time,cost) runs as written, sorted by time", async () => {
    const text = "# a comment\n0\n100\n100,3\n\n50;2\n2000 7\n";
    const trace = parseTrace(text);
    expect(trace).toEqual([
      { timeMs: 0, cost: 1 },
      { timeMs: 50, cost: 2 },
      { timeMs: 100, cost: 1 },
      { timeMs: 100, cost: 3 },
      { timeMs: 2000, cost: 7 },
    ]);
    expect(parseTrace(formatTrace(trace))).toEqual(trace);
    const sim = await simulate({ ...base, shape: "trace", "trace.text": text, "fixedWindow.limit": "5", "fixedWindow.window": "1s" });
    const reference = await directRun(fixedWindow({ limit: 5, window: "1s" }), trace);
    expect(sim.runs.fixedWindow?.totals).toMatchObject({ allowed: reference.allowed, denied: reference.denied });
    expect(reference).toMatchObject({ allowed: 3, denied: 2 });
    // cost 7 can never pass a limit of 5: denied without a Retry-After
    expect(sim.runs.fixedWindow?.totals.never).toBe(1);
  });

  it("names the line of a trace it cannot read, and refuses too much traffic", () => {
    expect(() => parseTrace("0\n10\nten\n")).toThrow(/line 3/);
    expect(() => parseTrace("0,0\n")).toThrow(/line 1: cost/);
    expect(() => generateTrace({ ...base, shape: "steady", "steady.rate": "1000", "steady.duration": "1h" })).toThrow(/at most 50000/);
  });

  it("reports settings that core refuses per column, with core's message", async () => {
    const sim = await simulate({ ...base, "tokenBucket.capacity": "0", "slidingLog.window": "soon" });
    expect(sim.scenario.errors.tokenBucket).toMatch(/capacity/);
    expect(sim.scenario.errors.slidingLog).toMatch(/window/);
    expect(sim.runs.tokenBucket).toBeUndefined();
    expect(sim.runs.fixedWindow?.totals.allowed).toBe(200);
  });
});

describe("state in the URL", () => {
  it("writes only what differs from the preset, and reads it back", () => {
    const state = stateFromQuery("?preset=pro");
    expect(stateToQuery(state)).toBe("preset=pro");
    state.settings["slidingWindow.limit"] = "250";
    state.settings.shape = "trace";
    state.settings["trace.text"] = "0\n10,2\n";
    const query = stateToQuery(state);
    expect(query).toBe("preset=pro&shape=trace&trace.text=0%0A10%2C2%0A&slidingWindow.limit=250");
    expect(stateFromQuery(query)).toEqual(state);
  });

  it("ignores unknown keys and falls back to the default preset", () => {
    const state = stateFromQuery("preset=nope&bogus=1&fixedWindow.limit=7");
    expect(state.preset).toBe("window-edge");
    expect(state.settings.bogus).toBeUndefined();
    expect(state.settings["fixedWindow.limit"]).toBe("7");
  });
});

describe("plots and docs", () => {
  it("Retry-After is whole seconds, rounded up", () => {
    expect([1, 999, 1000, 1001, 59_000].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 59]);
  });

  it("the comparison SVG shows the panels and counts", async () => {
    const sim = await simulate(presetSettings("window-edge"));
    const svg = renderComparisonSvg(sim, ["fixedWindow", "slidingWindow", "tokenBucket"], { title: "edge" });
    expect(svg.match(/data-algorithm="/g)).toHaveLength(3);
    expect(svg).toContain("allowed 200");
    expect(svg).toContain("allowed 101");
    expect(svg).toContain("allowed 103");
    expect(svg).toContain("fixed-window edge");
  });

  it.each(FIGURES.map((f) => [f.out, f] as const))("%s is what `pnpm simulate` renders today", async (out, figure) => {
    const committed = await readFile(new URL(`../../../${out}`, import.meta.url), "utf8");
    const { svg } = await renderFigure(figure);
    expect(committed, `${out} is stale: run pnpm simulate`).toBe(svg);
  });
});
