/**
 * Smoke test of the reservations section: the whole run, small, against its own redis-server.
 * Asserts what is exact — the simulated runs are the same every time, so their store calls and
 * what they admit are counts — and never a time or a latency.
 */
import { describe, expect, it } from "vitest";
import { startDelayProxy } from "./lib/delay-proxy.js";
import { benchmarksMarkdown, compare, figures } from "./publish.js";
import { type ReservationsBenchOptions, COLD_REDIS, COLD_WRAPPED, DEFAULT_RESERVATIONS_OPTIONS, TARGETS, runReservationsBench } from "./reservations.js";
import { LATENCY_CONTENDERS, quantile } from "./reservations-latency.js";
import { formatReservationsReport } from "./reservations-report.js";
import { scriptCalls } from "./reservations-contenders.js";

const tinyRounds = { rounds: 2, maxRounds: 2, budgetMs: 0, warmupMs: 0, targetRoundMs: 0, warmupOps: 20, opsPerRound: 40, slices: 1 };

/** The section as `pnpm bench` runs it, scaled down: seconds of simulated time, a fraction of a second of real load. */
const SMALL: ReservationsBenchOptions = {
  ...DEFAULT_RESERVATIONS_OPTIONS,
  shortSpecs: [{ algorithm: "fixedWindow", perSecond: 2000, windowS: 1 }],
  hotLoad: { ...DEFAULT_RESERVATIONS_OPTIONS.hotLoad, durationMs: 10_000 },
  upstashDecisions: 20,
  admittedSpecs: [
    { algorithm: "fixedWindow", perSecond: 200, windowS: 1 },
    { algorithm: "tokenBucket", perSecond: 200, windowS: 1 },
  ],
  admittedLoad: { ...DEFAULT_RESERVATIONS_OPTIONS.admittedLoad, durationMs: 3000 },
  latency: { ...DEFAULT_RESERVATIONS_OPTIONS.latency, ratePerS: 200, warmupMs: 100, primeMs: 100, measureMs: 200, passes: 1 },
  coldMemory: tinyRounds,
  coldRedis: { ...tinyRounds, inFlight: 4 },
};

describe("reservations bench", () => {
  it("counts store calls, what 120% admits, latencies and a cold key's cost, with every target, in one run", async () => {
    const report = await runReservationsBench(SMALL);
    // store calls: each hot limit on Redis and Upstash 50 ms away and on Redis 2 ms away, then the short limit
    expect(report.storeCalls.map((r) => [r.spec.algorithm, r.store, r.latencyMs])).toEqual([
      ["fixedWindow", "Redis (ioredis)", 50],
      ["slidingWindow", "Redis (ioredis)", 50],
      ["tokenBucket", "Redis (ioredis)", 50],
      ["fixedWindow", "Redis (ioredis)", 50],
      ["fixedWindow", "Upstash (HTTP)", 50],
      ["slidingWindow", "Upstash (HTTP)", 50],
      ["tokenBucket", "Upstash (HTTP)", 50],
      ["fixedWindow", "Upstash (HTTP)", 50],
      ["fixedWindow", "Redis (ioredis)", 2],
      ["slidingWindow", "Redis (ioredis)", 2],
      ["tokenBucket", "Redis (ioredis)", 2],
    ]);
    for (const r of report.storeCalls) {
      // 4 instances at half of 2,000 a second for 10 simulated seconds, every one allowed
      expect(r.tally).toMatchObject({ decisions: 10_000, allowed: 10_000 });
      expect(r.tally.reserved).toBeGreaterThan(9_000);
      // Redis counted every call the limiters made, plus the script's first load; the bridge, every one
      const made = Object.values(r.byMethod).reduce((a, b) => a + b, 0);
      expect(r.calls - made).toBeGreaterThanOrEqual(0);
      expect(r.calls - made).toBeLessThanOrEqual(2);
    }
    // the hot limits meet the target even over a run this short (the warm-up weighs more in it)
    for (const r of report.storeCalls.filter((c) => c.target !== undefined)) expect(r.callsPer1000).toBeLessThanOrEqual(TARGETS.callsPer1000);
    expect(report.storeCalls.filter((c) => c.target === undefined).map((c) => c.spec.windowS)).toEqual([1, 1]);
    // @upstash/ratelimit: a script call per decision at least
    for (const u of report.upstashRatelimit) expect(u.commandsPer1000).toBeGreaterThanOrEqual(1000);
    // at 120%: a fixed window admits exactly its limit either way; a bucket never more than per-decision
    // limiting, which admits all it can (over 3 s, the hold's one-off cost weighs too much for a ratio)
    const [fixed, bucket] = report.admitted;
    expect(fixed?.perDecision.allowed).toBe(200 * 3);
    expect(fixed?.reserving.allowed).toBe(200 * 3);
    expect(bucket?.reserving.allowed).toBeLessThanOrEqual(bucket?.perDecision.allowed ?? 0);
    expect(bucket?.reserving.reserved).toBeGreaterThan(0);
    // latency: every contender answered every request; with reservations, most of them from one
    expect(report.latency.map((r) => r.contender)).toEqual([...LATENCY_CONTENDERS]);
    for (const r of report.latency) expect(r.samples).toBe(40);
    for (const r of report.latency) expect(r.targets.length).toBe(r.contender.startsWith("Sluice + reserve") ? 2 : 0);
    // a cold key: each pair measured, never from a reservation (the harness would have stopped)
    expect(report.cold.map((r) => [r.store, r.target !== undefined])).toEqual([
      [COLD_WRAPPED, false],
      [COLD_REDIS, true],
    ]);
    // published: the cold-key ratios as figures, every table in the markdown
    const run = { date: report.date, command: "pnpm bench", machine: report.machine, durationS: 1, reservations: report };
    const figs = compare(figures(run), undefined);
    expect(figs.map((f) => [f.section, f.contender, f.against])).toEqual(report.cold.map(() => ["reservations", "reserve on", "reserve off (time per decision)"]));
    const md = benchmarksMarkdown(run, figs, undefined);
    for (const title of ["## Reservations", "### Store calls per 1,000", "### `limit()` latency", "### Admitted at 120%", "### A cold key"]) expect(md).toContain(title);
    expect(md).toContain("reservations, fixedWindow 120,000 per 60 s, Redis (ioredis), 50 ms away: store calls per 1,000 decisions");
    expect(formatReservationsReport(report)).toContain("| tokenBucket 20,000, 2,000/s ");
  });
});

describe("the pieces", () => {
  it("counts the script commands in INFO commandstats (Redis 7 names a subcommand after a bar)", () => {
    const stats = "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=3\r\ncmdstat_eval:calls=2,usec=1\r\ncmdstat_script|load:calls=1,usec=0\r\ncmdstat_hget:calls=40,usec=9\r\n";
    expect(scriptCalls(stats)).toBe(15);
  });

  it("takes quantiles by the nearest rank", () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect([quantile(sorted, 0.5), quantile(sorted, 0.99), quantile(sorted, 1), quantile([], 0.5)]).toEqual([50, 99, 100, NaN]);
  });

  it("adds its delay to a round trip through the proxy, and passes bytes through in order", async () => {
    const { createServer, connect } = await import("node:net");
    const echo = createServer((s) => s.pipe(s));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const proxy = await startDelayProxy((echo.address() as { port: number }).port, 40);
    try {
      const socket = connect(proxy.port, "127.0.0.1");
      await new Promise((resolve) => socket.once("connect", resolve));
      const got: string[] = [];
      const sentAt = performance.now();
      const back = new Promise<number>((resolve) =>
        socket.on("data", (chunk) => {
          got.push(chunk.toString());
          if (got.join("") === "abc") resolve(performance.now() - sentAt);
        }),
      );
      socket.write("a");
      socket.write("b");
      socket.write("c");
      // at least the delay (timers never fire early); how much more is the machine's
      expect(await back).toBeGreaterThanOrEqual(39);
      expect(got.join("")).toBe("abc");
      socket.destroy();
    } finally {
      await proxy.close();
      await new Promise((resolve) => echo.close(resolve));
    }
  });
});
