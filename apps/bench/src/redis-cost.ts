/**
 * `pnpm --filter @sluice/bench bench:redis-cost`: what a decision costs **inside Redis** — the
 * figure a user's Redis bill goes by, and nearly free of client noise — for every Sluice algorithm,
 * the three-limit tier, a denial and a refund, beside rate-limiter-flexible's `RateLimiterRedis`,
 * `@upstash/ratelimit` (through the Upstash-REST bridge) and an `INCR` + `PEXPIRE` ceiling.
 *
 * One private redis-server, pinned with `taskset` to core 0 (all its threads); the contenders run
 * in one child process pinned to core 1, so no client preempts a script. When `taskset` is missing
 * (or the machine has one core) both run unpinned and the report says so. Each round runs every
 * contender's decisions in turn (the order rotating); around each contender's slice the child
 * reads `INFO commandstats` (after `CONFIG RESETSTAT`) and `INFO cpu`:
 *
 * - **script µs per decision**: the `usec` of `EVALSHA`/`EVAL` — the time Redis's one thread spent
 *   in the contender's scripts, the commands they call included. Ratios are taken of this figure,
 *   round by round (median, 95% interval of the median; rounds are added while a target's ratio
 *   is unstable);
 * - **redis-server CPU µs per decision** (user + system): the scripts plus reading, parsing and
 *   answering the requests;
 * - **commands per decision**: those sent plus those the scripts call.
 *
 * @module
 */
import { cpus } from "node:os";
import { startRedisServer } from "@sluice/testing/redis-server";
import IORedis from "ioredis";
import { runInChild } from "./lib/child.js";
import { hasTaskset, pin } from "./lib/pin.js";
import { type MachineInfo, type Target, loadAvgNow, machineInfo, markdownTable, runIfMain, summaryLines, target } from "./lib/report.js";
import { type RatioStat, formatStat, median, pairedStat } from "./lib/stats.js";
import {
  BUCKET,
  CEILING,
  CEILING_SCRIPT,
  CONCURRENCY,
  COST_CONTENDERS,
  type CostMeasurement,
  FIXED,
  FIXED_DENIED,
  LEAKY,
  LOG,
  REFUND,
  RLF,
  RLF_DENIED,
  RLF_REWARD,
  type RedisCostMeasurement,
  type RedisCostOptions,
  SLIDING,
  TIER,
  URL_BUCKET,
  URL_FIXED,
  URL_SLIDING,
} from "./redis-cost-contenders.js";

export interface RedisCostBenchOptions extends Omit<RedisCostOptions, "pairs" | "clientCore"> {
  /** Pin redis-server and the clients to separate cores with `taskset` (when there are two cores and `taskset`). @default true */
  pin?: boolean;
  log?: (line: string) => void;
}

// many short rounds rather than a few long ones: a round that another process's burst slowed
// (redis-server is pinned, but the core is not reserved) is one outlier among many, which the
// median's interval leaves out, and the interval narrows as rounds are added
export const DEFAULT_REDIS_COST_OPTIONS: RedisCostBenchOptions = {
  rounds: 11,
  maxRounds: 41,
  budgetMs: 18_000,
  decisionsPerRound: 500,
  // each contender's 500 decisions of a round in 5 parts of 100, the round's figure the median part's
  parts: 5,
  warmupDecisions: 1_000,
  inFlight: 4,
  // 100 keys, each hit every ~0.1 s by its contender: the buckets push their key's TTL (PEXPIRE) about
  // once a second per key, about one call in ten, in every round alike. With keys that come back
  // about as often as the TTL's slack, whether nearly every call or almost none sends a PEXPIRE
  // would turn on how long a round takes, and the rounds' figures would split in two
  keyCount: 100,
};

/** A ratio of script µs per decision: `contender ÷ against`, lower is cheaper; with `bound`, a target. */
export interface CostRatioSpec {
  readonly contender: string;
  readonly against: string;
  /** At most this many times `against`'s Redis time. */
  readonly bound?: number;
}

/** The ratios of the section: those with a target first, then the others for context. */
export const COST_RATIOS: readonly CostRatioSpec[] = [
  { contender: FIXED, against: RLF, bound: 1.0 },
  { contender: SLIDING, against: URL_SLIDING, bound: 0.5 },
  { contender: BUCKET, against: URL_BUCKET, bound: 0.4 },
  { contender: TIER, against: FIXED, bound: 1.3 },
  { contender: FIXED, against: URL_FIXED },
  { contender: FIXED_DENIED, against: RLF_DENIED },
  { contender: REFUND, against: RLF_REWARD },
  ...[RLF, URL_FIXED, URL_SLIDING, URL_BUCKET, FIXED, SLIDING, LOG, BUCKET, LEAKY, CONCURRENCY, TIER, FIXED_DENIED, REFUND].map((contender) => ({ contender, against: CEILING })),
];

/** One contender's figures: medians over rounds. */
export interface CostRow {
  readonly name: string;
  readonly outcome: CostMeasurement["outcome"];
  readonly scriptUs: number;
  readonly serverCpuUs: number;
  readonly commandsPerDecision: number;
  /** Calls per decision of each command (median over rounds). */
  readonly byCommand: Record<string, number>;
  readonly rounds: number;
  readonly roundScriptUs: number[];
}

/** One ratio of script µs per decision. */
export interface CostRatio {
  readonly contender: string;
  readonly against: string;
  readonly stat: RatioStat;
  readonly target?: Target;
}

export interface RedisCostReport {
  readonly benchmark: "redis-cost";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly server: { readonly version: string; readonly placement: string };
  readonly client: string;
  readonly options: Omit<RedisCostBenchOptions, "log">;
  readonly settled: boolean;
  readonly rows: CostRow[];
  readonly ratios: CostRatio[];
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

const CONTENDERS_URL = new URL("./redis-cost-contenders.ts", import.meta.url).href;

function rowOf(m: CostMeasurement): CostRow {
  const names = new Set(m.rounds.flatMap((r) => Object.keys(r.byCommand)));
  return {
    name: m.name,
    outcome: m.outcome,
    scriptUs: median(m.rounds.map((r) => r.scriptUs)),
    serverCpuUs: median(m.rounds.map((r) => r.serverCpuUs)),
    commandsPerDecision: median(m.rounds.map((r) => r.commands)),
    byCommand: Object.fromEntries([...names].sort().map((n) => [n, median(m.rounds.map((r) => r.byCommand[n] ?? 0))])),
    rounds: m.rounds.length,
    roundScriptUs: m.rounds.map((r) => r.scriptUs),
  };
}

/** Starts a pinned private redis-server, measures every contender in a pinned child, stops the server. */
export async function runRedisCostBench(options: RedisCostBenchOptions = DEFAULT_REDIS_COST_OPTIONS): Promise<RedisCostReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const names = options.contenders ?? [...COST_CONTENDERS];
  const specs = COST_RATIOS.filter((s) => names.includes(s.contender) && names.includes(s.against));
  const server = await startRedisServer();
  let measured: RedisCostMeasurement;
  let placement: string;
  let version = "unknown";
  try {
    let clientCore: number | undefined;
    if (options.pin === false) placement = "not pinned (pin: false)";
    else if (cpus().length < 2) placement = `not pinned: this machine has ${cpus().length} core`;
    else if (!hasTaskset()) placement = "not pinned: taskset is not installed (util-linux), so clients may preempt a script";
    else {
      const failed = pin(server.pid as number, 0);
      if (failed === undefined) {
        placement = "pinned to core 0 (taskset)";
        clientCore = 1;
      } else placement = `not pinned: taskset failed (${failed})`;
    }
    const admin = new IORedis(server.url, { lazyConnect: true });
    await admin.connect();
    version = /\r\nredis_version:([^\r]+)\r\n/.exec(await admin.info("server"))?.[1] ?? "unknown";
    admin.disconnect();
    log(`In Redis: redis-server ${version} ${placement}; ${names.length} contenders, ${options.rounds}–${options.maxRounds} rounds of ${options.decisionsPerRound} decisions (load ${loadAvgNow()}) ...`);
    const { log: _log, pin: _pin, ...childOptions } = options;
    measured = await runInChild<RedisCostMeasurement>(CONTENDERS_URL, "measureRedisCost", [
      server.url,
      { ...childOptions, contenders: names, pairs: specs.map((s) => [s.contender, s.against]), ...(clientCore !== undefined ? { clientCore } : {}) },
    ]);
  } finally {
    await server.stop();
  }
  const rows = measured.contenders.map(rowOf);
  const byName = new Map(rows.map((r) => [r.name, r]));
  const ratios = specs.map((s): CostRatio => {
    const stat = pairedStat((byName.get(s.contender) as CostRow).roundScriptUs, (byName.get(s.against) as CostRow).roundScriptUs);
    return { contender: s.contender, against: s.against, stat, ...(s.bound !== undefined ? { target: target(s.against, "<=", s.bound, stat.median) } : {}) };
  });
  const misses: string[] = [];
  let pass = 0;
  for (const r of ratios) {
    if (r.target === undefined) continue;
    if (r.target.pass && r.stat.stable) pass++;
    else misses.push(`${r.contender} ÷ ${r.against}: ${formatStat(r.stat)} of Redis time per decision (target ≤ ${r.target.bound}×)`);
  }
  const { log: _log, ...recorded } = options;
  return {
    benchmark: "redis-cost",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    server: { version, placement },
    client: measured.client,
    options: recorded,
    settled: measured.settled,
    rows,
    ratios,
    summary: { pass, miss: misses.length, misses },
  };
}

const us = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "–");

/** The table of contenders: script µs, server CPU µs and commands per decision. */
export function costTable(report: RedisCostReport): string {
  return markdownTable(
    ["contender", "decision", "script µs/decision", "redis-server CPU µs/decision", "commands/decision", "commands"],
    report.rows.map((r) => [
      r.name,
      r.outcome,
      us(r.scriptUs),
      us(r.serverCpuUs),
      r.commandsPerDecision.toFixed(2),
      Object.entries(r.byCommand)
        .filter(([, n]) => n >= 0.005)
        .map(([c, n]) => `${c} ${n.toFixed(2)}`)
        .join(", "),
    ]),
    ["l", "l", "r", "r", "r", "l"],
  );
}

/** The table of ratios of script µs per decision, with the targets. */
export function costRatioTable(report: RedisCostReport, previous?: (r: CostRatio) => string): string {
  return markdownTable(
    ["Redis time per decision", "ratio (95% interval)", ...(previous ? ["previous run"] : []), "target"],
    report.ratios.map((r) => [
      `${r.contender} ÷ ${r.against}`,
      formatStat(r.stat),
      ...(previous ? [previous(r)] : []),
      r.target === undefined ? "" : `${!r.stat.stable ? "unstable" : r.target.pass ? "met" : "missed"} (≤ ${r.target.bound}×)`,
    ]),
    ["l", "r", ...(previous ? (["r"] as const) : []), "l"],
  );
}

/** The report as printed. */
export function formatRedisCostReport(report: RedisCostReport): string {
  const m = report.machine;
  return [
    "# Inside Redis: script time, server CPU and commands per decision",
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; load ${m.loadAvgStart} → ${m.loadAvgEnd ?? "?"}. redis-server ${report.server.version} ${report.server.placement}; clients ${report.client}.`,
    `Ceiling: \`${CEILING_SCRIPT}\`. ${report.rows[0]?.rounds ?? 0} rounds of ${report.options.decisionsPerRound} decisions per contender, ${report.options.inFlight} in flight, over ${report.options.keyCount} keys${report.settled ? "" : "; the target ratios were not all stable when the time budget ran out"}.`,
    "",
    costTable(report),
    "",
    costRatioTable(report),
    "",
    ...summaryLines(report.summary),
  ].join("\n");
}

/** Where `bench:redis-cost` writes its figures. */
export const RESULTS_FILE = new URL("../results/redis-cost.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runRedisCostBench({ ...DEFAULT_REDIS_COST_OPTIONS, log }), formatRedisCostReport);
