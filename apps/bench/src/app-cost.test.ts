/**
 * Smoke test of the in-app section: a whole run with tiny rounds, one child process per app (an
 * allowed app that answered anything but 200, or a denying one anything but 429, would stop it).
 * Asserts the rows, the pooled rounds, every ratio and where it is published; never a timing.
 */
import { describe, expect, it } from "vitest";
import { APP_RATIOS, APP_SCENARIO, APP_TARGETS, OWN, formatAppCostReport, runAppCostBench } from "./app-cost.js";
import { APP_CONTENDERS } from "./app-cost-contenders.js";
import { HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME, NOOP, SLUICE_DEFAULT, SLUICE_DENIED } from "./http-apps.js";
import { benchmarksMarkdown, compare, figures } from "./publish.js";

const tiny = { rounds: 2, warmupMs: 0, targetRoundMs: 0, warmupOps: 5, opsPerRound: 20 };

describe("in-app cost bench", () => {
  it("refuses an unknown contender before starting anything", async () => {
    await expect(runAppCostBench({ ...tiny, contenders: ["nobody"] })).rejects.toThrow(/unknown in-app contender "nobody"/);
  });

  it("through @hono/node-server's listener (--node-server): every app answers as through app.fetch", async () => {
    const report = await runAppCostBench({ ...tiny, driver: "node-server" });
    expect(report.options.driver).toBe("node-server");
    expect(report.rows.map((r) => r.name)).toEqual([...APP_CONTENDERS]);
    for (const r of report.rows) expect(r.usPerRequest).toBeGreaterThan(0);
    expect(formatAppCostReport(report)).toContain("@hono/node-server's listener");
  });

  it("pools the processes' rounds, reports time and own cost per request and every ratio, and publishes them", async () => {
    const report = await runAppCostBench({ ...tiny, processes: 2 });
    expect(report.rows.map((r) => r.name)).toEqual([...APP_CONTENDERS]);
    for (const r of report.rows) {
      expect(r.rounds).toBe(4);
      expect(r.usPerRequest).toBeGreaterThan(0);
    }
    expect(report.ratios.map((r) => [r.contender, r.against])).toEqual(APP_RATIOS);
    expect(report.ratios.find((r) => r.against === OWN(HONO_RATE_LIMITER))?.stat.rounds).toBe(4);
    // at most hono-rate-limiter's time per request, as its users configure it and with the same headers
    expect(report.ratios.filter((r) => r.target !== undefined).map((r) => [r.contender, r.against, r.target?.op, r.target?.bound])).toEqual([
      [SLUICE_DEFAULT, HONO_RATE_LIMITER, "<=", 1],
      [SLUICE_DEFAULT, HONO_RATE_LIMITER_SAME, "<=", 1],
    ]);
    expect(APP_TARGETS.size).toBe(2);
    const run = { date: report.date, command: "pnpm bench", machine: report.machine, durationS: 1, app: report };
    const figs = compare(figures(run), undefined);
    expect(figs.every((f) => f.section === "app" && f.scenario === APP_SCENARIO)).toBe(true);
    expect(figs.filter((f) => f.headline).map((f) => f.contender)).toEqual([...Array(6).fill(SLUICE_DEFAULT), ...Array(3).fill(SLUICE_DENIED)]);
    expect(figs.filter((f) => f.target !== undefined).map((f) => f.against)).toEqual([HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME]);
    const md = benchmarksMarkdown(run, figs, undefined);
    expect(md).toContain("## Inside the app: the middleware's own cost per request");
    expect(md).toContain(`| ${SLUICE_DEFAULT}'s own cost ÷ ${HONO_RATE_LIMITER}'s own cost `);
    expect(formatAppCostReport(report)).toContain(`| ${SLUICE_DEFAULT} ÷ ${NOOP} `);
  });
});
