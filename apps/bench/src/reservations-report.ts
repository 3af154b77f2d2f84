/**
 * The reservations section's tables, printed by `bench:reservations` and published by `pnpm bench`
 * (`docs/benchmarks.md`).
 *
 * @module
 */
import { formatRate, markdownTable, summaryLines, verdict } from "./lib/report.js";
import { formatStat } from "./lib/stats.js";
import type { HotAlgorithm, LimitSpec } from "./reservations-contenders.js";
import type { ReservationsReport } from "./reservations.js";

/** `fixedWindow 120,000 per 60 s`, `tokenBucket 20,000, 2,000/s`. */
export function specTitle(spec: LimitSpec): string {
  const limit = (spec.perSecond * spec.windowS).toLocaleString("en-US");
  return `${spec.algorithm} ${limit}${TITLE_TAIL[spec.algorithm](spec)}`;
}

/** How each algorithm's title ends: a window's length, a bucket's refill. */
const TITLE_TAIL: Readonly<Record<HotAlgorithm, (spec: LimitSpec) => string>> = {
  fixedWindow: (spec) => ` per ${spec.windowS} s`,
  slidingWindow: (spec) => ` per ${spec.windowS} s`,
  tokenBucket: (spec) => `, ${spec.perSecond.toLocaleString("en-US")}/s`,
};

const ms = (x: number) => (x >= 10 ? x.toFixed(0) : x >= 1 ? x.toFixed(1) : x.toFixed(3));
const share = (x: number) => `${(x * 100).toFixed(1)}%`;

/** Store calls per 1,000 decisions: Sluice's rows, then `@upstash/ratelimit`'s. */
export function storeCallsTable(report: ReservationsReport): string {
  const rows = report.storeCalls.map((r) => [
    specTitle(r.spec),
    `Sluice + reserve, ${r.store}`,
    `${r.latencyMs} ms`,
    r.tally.decisions.toLocaleString("en-US"),
    share(r.tally.reserved / r.tally.decisions),
    Object.entries(r.byMethod)
      .map(([method, n]) => `${n} ${method}`)
      .join(", "),
    r.callsPer1000.toFixed(1),
    r.target ? verdict(r.target, "") : "information",
  ]);
  for (const u of report.upstashRatelimit) {
    rows.push([specTitle(u.spec), "@upstash/ratelimit, Upstash (HTTP)", "real", u.decisions.toLocaleString("en-US"), "–", "–", u.commandsPer1000.toFixed(1), ""]);
  }
  return markdownTable(
    ["limit", "contender, store", "round trip", "decisions", "from a reservation", "the limiters' store calls", "store calls per 1,000", "target"],
    rows,
    ["l", "l", "r", "r", "r", "l", "r", "l"],
  );
}

/** `limit()` latency through the delaying proxies. */
export function latencyTable(report: ReservationsReport): string {
  return markdownTable(
    ["contender", "decisions", "from a reservation", "p50 ms", "p99 ms", "max ms", "each turn: p50 / p99 ms", "target"],
    report.latency.map((r) => [
      r.contender,
      r.samples.toLocaleString("en-US"),
      share(r.reservedShare),
      ms(r.p50Ms),
      ms(r.p99Ms),
      ms(r.maxMs),
      r.turns.map((t) => `${ms(t.p50Ms)} / ${ms(t.p99Ms)}`).join("; "),
      r.targets.map((t) => `${t.against} ${verdict(t, "")}`).join(", "),
    ]),
    ["l", "r", "r", "r", "r", "r", "l", "l"],
  );
}

/** Admitted at 120% of the limit, with reservations and per decision. */
export function admittedTable(report: ReservationsReport): string {
  return markdownTable(
    ["limit", "offered", "admitted, reserve on", "from a reservation", "admitted, per decision", "on ÷ per decision", "target"],
    report.admitted.map((r) => [
      specTitle(r.spec),
      r.reserving.decisions.toLocaleString("en-US"),
      r.reserving.allowed.toLocaleString("en-US"),
      share(r.reserving.reserved / r.reserving.decisions),
      r.perDecision.allowed.toLocaleString("en-US"),
      r.ratio.toFixed(4),
      verdict(r.target, ""),
    ]),
    ["l", "r", "r", "r", "r", "r", "l"],
  );
}

/** A cold key: time per decision with `reserve` on ÷ off, decisions per second and CPU time per decision beside. */
export function coldTable(report: ReservationsReport): string {
  return markdownTable(
    ["store", "decisions/s, off / on", "time per decision, on ÷ off", "target", "CPU µs/decision, off / on", "CPU per decision, on ÷ off (information)"],
    report.cold.map((r) => [
      r.store,
      `${formatRate(r.off.opsPerSec)} / ${formatRate(r.on.opsPerSec)}`,
      formatStat(r.cost),
      r.target ? `${r.cost.stable ? (r.target.pass ? "met" : "missed") : "unstable"} (≤ ${r.target.bound}×)` : "information",
      `${r.cpuUsOff.toFixed(2)} / ${r.cpuUsOn.toFixed(2)}`,
      formatStat(r.cpuCost),
    ]),
    ["l", "r", "r", "l", "r", "r"],
  );
}

/** What the section measured and how, as a paragraph. */
export function methodLines(report: ReservationsReport): string[] {
  const o = report.options;
  const l = o.latency;
  return [
    `Sluice's \`reserve\` option (defaults: \`maxAgeMs\` 1000, \`share\` 0.1) against one private redis-server ${report.server.version}.`,
    `**Store calls** and **admitted**: ${o.hotLoad.instances} limiter instances (each its own \`RateLimiter\`, client and store) on one key,`,
    "in simulated time: the test stores of `@sluice/redis/testing` take the store's clock from it and `reserve.clock` the",
    "limiters' own; requests come on a steady schedule, each instance in turn; every store call is made at once and in",
    "order, and its answer is delivered a simulated round trip later while requests keep coming, so a run is the same",
    `every time. Store calls: ${o.hotLoad.offered * 100}% of the limit for ${o.hotLoad.durationMs / 1000} s from 30 s into a minute (a window edge inside), counted by`,
    "Redis itself (`INFO commandstats`: `EVALSHA` + `EVAL` + `SCRIPT LOAD`) and by the Upstash-REST bridge (HTTP requests),",
    "the end's give-backs left out; `@upstash/ratelimit` (its defaults) counted on the same bridge, its decisions back to back",
    `in real time. Admitted: ${o.admittedLoad.offered * 100}% of the limit for ${o.admittedLoad.durationMs / 1000} s, with reservations and then per decision on the same arrivals.`,
    `**Latency**: real time, ${l.instances} instances at ${l.ratePerS.toLocaleString("en-US")} requests/s together (half the limit), a TCP proxy adding ${l.roundTripMs} ms to every`,
    `round trip in front of redis-server and of the bridge; ${l.passes} turns per contender of ${l.measureMs / 1000} s recorded after ${l.warmupMs / 1000} s (the first turn ${(l.warmupMs + l.primeMs) / 1000} s), the contenders in turn.`,
    "**A cold key**: `reserve` on and off over the same kind of store, interleaved round by round, rounds added until",
    "the ratio is stable; the figure is time per decision (CPU time per decision beside it, this process's plus",
    "redis-server's on Redis, which counts its own in scheduler ticks: too coarse for a slice). Keys that never turn hot:",
    "on Redis 60,000 in a fixed shuffled order, each seen about once a second; in memory 100,000, the stores' clocks run",
    "100 times faster than real time so that each is seen once every few seconds of the clock it is counted on. Over a",
    "`MemoryStore` the option is a no-op (the limiter makes no reservations: the same code runs, so the memory section's",
    "figures stand as they are); behind a wrapper the bookkeeping shows where a decision costs least.",
  ];
}

/** The report as `bench:reservations` prints it. */
export function formatReservationsReport(report: ReservationsReport): string {
  const m = report.machine;
  return [
    "# Reservations: decisions without a round trip",
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; 1-minute load average ${m.loadAvgStart} at start, ${m.loadAvgEnd ?? "?"} at end.`,
    ...methodLines(report),
    "",
    "## Store calls per 1,000 decisions on a hot key",
    "",
    storeCallsTable(report),
    "",
    `## \`limit()\` latency, the store ${report.options.latency.roundTripMs} ms away`,
    "",
    latencyTable(report),
    "",
    "## Admitted at 120% of the limit",
    "",
    admittedTable(report),
    "",
    "## A cold key: reserve on ÷ off",
    "",
    coldTable(report),
    "",
    ...summaryLines(report.summary),
  ].join("\n");
}
