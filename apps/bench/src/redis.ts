/**
 * `pnpm --filter @sluice/bench bench:redis`: Sluice's Redis stores against one private
 * redis-server that the benchmark starts (on a free port) and stops:
 *
 * - `RedisStore` + ioredis decisions per second with 50 callers in flight, for one limit and for a
 *   three-limit tier, with 1 key and 10,000 keys — beside the ceiling (a raw `EVALSHA` of a one-key
 *   `INCR` script) and rate-limiter-flexible's `RateLimiterRedis`, all in one child process,
 *   interleaved round by round, printed as ratios with the targets (PASS/MISS; a miss never fails
 *   the process), with where each round's CPU time went (Node, redis-server, the script);
 * - `UpstashStore` through the Upstash-REST bridge with the real `@upstash/redis` client: HTTP
 *   requests per decision, sequential and with 100 callers in flight;
 * - the cold burst (`redis-cold.ts`): 3,200 concurrent decisions right after `SCRIPT FLUSH`
 *   against the same burst warm, and the script loads it took.
 *
 * Writes every figure to `results/redis.json`.
 *
 * @module
 */
import { startRedisServer } from "@sluice/testing/redis-server";
import IORedis from "ioredis";
import { runInChild } from "./lib/child.js";
import { type ThroughputOptions, type ThroughputResult, median } from "./lib/harness.js";
import { type RatioStat, formatStat, pairedStat, ratioStat } from "./lib/stats.js";
import type { ColdBurstMeasurement, ColdBurstOptions } from "./redis-cold.js";
import {
  type MachineInfo,
  type Target,
  formatRate,
  formatRatio,
  loadAvgNow,
  machineInfo,
  markdownTable,
  target,
  verdict,
  runIfMain,
  summaryLines,
} from "./lib/report.js";
import {
  CEILING,
  CEILING_SCRIPT,
  RLF,
  type RoundProfile,
  SLUICE_KIND,
  TCP_CONTENDERS,
  type TcpOptions,
  type TcpScenarioMeasurement,
  type UpstashMeasurement,
  type UpstashOptions,
} from "./redis-contenders.js";

export interface RedisBenchOptions extends ThroughputOptions {
  /** Concurrent callers of each TCP contender. */
  inFlight: number;
  /** One TCP scenario per key count. */
  keyCounts: number[];
  /** TCP contenders to measure (default: all). */
  contenders?: string[];
  /** The UpstashStore figures. */
  upstash: UpstashOptions;
  /** The cold burst (`redis-cold.ts`); left out when unset. */
  coldBurst?: ColdBurstOptions;
  /**
   * Child processes that measure the TCP contenders, one after the other, each running every
   * round; their rounds are pooled (the first process's, then the next one's). What differs between
   * two processes of the same code (how V8 compiled the client, where its objects landed) then
   * shows in a ratio's spread instead of only between two runs.
   * @default 1
   */
  processes?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export const DEFAULT_REDIS_OPTIONS: RedisBenchOptions = {
  rounds: 7,
  warmupMs: 400,
  targetRoundMs: 250,
  slices: 4,
  roundFigure: "median",
  processes: 2,
  // adaptive rounds: each process adds rounds (up to 11) until the ratios to the ceiling and to
  // rate-limiter-flexible are stable, within ~2 s of rounds per scenario
  stableAgainst: [CEILING, RLF],
  maxRounds: 11,
  budgetMs: 2_000,
  inFlight: 50,
  keyCounts: [1, 10_000],
  upstash: { sequentialDecisions: 500, concurrentDecisions: 10_000, concurrentCallers: 100, keyCount: 10_000 },
  coldBurst: { burst: 3200, rounds: 11, warmupBursts: 3 },
};

/** The section's targets, reported as met or missed on the benchmarks page. */
export const TARGETS = {
  /** Sluice ÷ the ceiling, by the kind of decision. */
  vsCeiling: { single: 0.9, tier: 0.8 },
  /** Sluice ÷ rate-limiter-flexible: strictly ahead. */
  vsRlf: 1,
  /** UpstashStore HTTP requests per decision, one caller: exactly one. */
  upstashSequential: 1,
  /** UpstashStore HTTP requests per decision, many callers in flight: fewer requests than decisions. */
  upstashConcurrent: 1,
  /** The cold burst's time ÷ the warm burst's, at most. */
  coldBurst: 2,
  /** Script loads of a cold burst per script on one node: exactly one. */
  loadsPerScript: 1,
} as const;

/** The cold burst, as reported. */
export interface ColdBurstReport extends ColdBurstMeasurement {
  /** Cold ÷ warm, per round. */
  readonly stat: RatioStat;
  /** `EVAL` calls per script of the cold bursts (the most in any round): the loads, on one node. */
  readonly loadsPerScript: number;
  readonly targets: Target[];
}

/** Medians over the measured rounds of a contender's {@link RoundProfile}s. */
export interface ProfileSummary {
  readonly nodeCpuUs: number;
  readonly redisCpuUs: number;
  /** `nodeCpuUs + redisCpuUs`: on a machine whose cores are all busy, throughput goes as its inverse. */
  readonly totalCpuUs: number;
  readonly evalshaUs: number;
  readonly redisCommandsPerDecision: number;
  /** Calls per decision of each command (from the last round). */
  readonly commands: Record<string, number>;
  /** Median µs per call of each command. */
  readonly usecPerCall: Record<string, number>;
}

export interface RedisRow {
  readonly name: string;
  readonly opsPerSec: number;
  /** ÷ the ceiling, paired by round (median). */
  readonly vsCeiling: number;
  /** ÷ rate-limiter-flexible, likewise. */
  readonly vsRlf: number;
  /** Empty for the baselines. */
  readonly targets: Target[];
  /** The ratios with their spread over rounds. */
  readonly stats: { readonly vsCeiling: RatioStat; readonly vsRlf: RatioStat };
  readonly profile: ProfileSummary;
  readonly run: ThroughputResult;
  readonly rounds: RoundProfile[];
}

export interface RedisScenario {
  readonly keys: number;
  readonly inFlight: number;
  readonly rows: RedisRow[];
}

export interface UpstashRow extends UpstashMeasurement {
  readonly targets: Target[];
}

export interface RedisBenchReport {
  readonly benchmark: "redis";
  readonly date: string;
  readonly machine: MachineInfo;
  /** The private redis-server the run started and stopped. */
  readonly server: { readonly version: string; readonly port: number };
  readonly options: Omit<RedisBenchOptions, "log">;
  readonly scenarios: RedisScenario[];
  readonly upstash: UpstashRow[];
  readonly coldBurst?: ColdBurstReport;
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

const CONTENDERS_URL = new URL("./redis-contenders.ts", import.meta.url).href;
const COLD_URL = new URL("./redis-cold.ts", import.meta.url).href;

/** The scripts of a cold burst (a fixed and a sliding window): each loaded once on the one node. */
const COLD_SCRIPTS = 2;

function coldBurstReport(m: ColdBurstMeasurement): ColdBurstReport {
  const stat = ratioStat(m.ratios);
  const loadsPerScript = Math.max(...m.evals) / COLD_SCRIPTS;
  return {
    ...m,
    stat,
    loadsPerScript,
    targets: [target("warm burst", "<=", TARGETS.coldBurst, stat.median), target("script loads per script", "=", TARGETS.loadsPerScript, loadsPerScript)],
  };
}

function medianOf(rounds: readonly RoundProfile[], pick: (r: RoundProfile) => number): number {
  return rounds.length === 0 ? NaN : median(rounds.map(pick));
}

function summarize(rounds: readonly RoundProfile[]): ProfileSummary {
  const nodeCpuUs = medianOf(rounds, (r) => r.nodeCpuUs);
  const redisCpuUs = medianOf(rounds, (r) => r.redisCpuUs);
  const names = new Set(rounds.flatMap((r) => Object.keys(r.usecPerCall)));
  return {
    nodeCpuUs,
    redisCpuUs,
    totalCpuUs: medianOf(rounds, (r) => r.nodeCpuUs + r.redisCpuUs),
    evalshaUs: medianOf(rounds, (r) => r.evalshaUs),
    redisCommandsPerDecision: medianOf(rounds, (r) => r.redisCommandsPerDecision),
    commands: rounds.at(-1)?.commands ?? {},
    usecPerCall: Object.fromEntries([...names].map((name) => [name, medianOf(rounds, (r) => r.usecPerCall[name] ?? 0)])),
  };
}

function scenarioReport(m: TcpScenarioMeasurement): RedisScenario {
  const byName = (name: string) => m.results.find((r) => r.name === name);
  const ceiling = byName(CEILING);
  const rlf = byName(RLF);
  const rows = m.results.map((run, i): RedisRow => {
    const nan: RatioStat = { median: NaN, low: NaN, high: NaN, confidence: 0, min: NaN, max: NaN, rounds: 0, stable: false };
    const stats = {
      vsCeiling: ceiling === undefined ? nan : pairedStat(run.roundOpsPerSec, ceiling.roundOpsPerSec),
      vsRlf: rlf === undefined ? nan : pairedStat(run.roundOpsPerSec, rlf.roundOpsPerSec),
    };
    const vsCeiling = stats.vsCeiling.median;
    const vsRlf = stats.vsRlf.median;
    const kind = SLUICE_KIND[run.name];
    const targets =
      kind === undefined
        ? []
        : [target(CEILING, ">=", TARGETS.vsCeiling[kind], vsCeiling), target(RLF, ">", TARGETS.vsRlf, vsRlf)];
    const rounds = m.profiles[i] ?? [];
    return { name: run.name, opsPerSec: run.opsPerSec, vsCeiling, vsRlf, targets, stats, profile: summarize(rounds), run, rounds };
  });
  return { keys: m.keys, inFlight: m.inFlight, rows };
}

/**
 * One measurement per scenario from several processes' measurements of the same scenarios: each
 * contender's rounds (and round profiles) concatenated in process order, its decisions/s the median
 * of them all. Every process runs the same rounds for every contender, so round `i` of two
 * contenders still pairs up.
 */
export function poolProcesses(perProcess: readonly TcpScenarioMeasurement[][]): TcpScenarioMeasurement[] {
  const [first, ...rest] = perProcess;
  if (first === undefined) return [];
  return first.map((scenario, s) => {
    const others = rest.map((p) => p[s] as TcpScenarioMeasurement);
    return {
      ...scenario,
      results: scenario.results.map((result, i) => {
        const roundOpsPerSec = [result, ...others.map((o) => o.results[i] as ThroughputResult)].flatMap((r) => r.roundOpsPerSec);
        return { ...result, roundOpsPerSec, opsPerSec: median(roundOpsPerSec) };
      }),
      profiles: scenario.profiles.map((rounds, i) => [...rounds, ...others.flatMap((o) => o.profiles[i] ?? [])]),
    };
  });
}

function keysTitle(keys: number): string {
  return keys === 1 ? "1 key" : `${keys.toLocaleString("en-US")} keys`;
}

/** The version of the redis-server at `url`. */
async function redisVersion(url: string): Promise<string> {
  const client = new IORedis(url, { lazyConnect: true });
  await client.connect();
  try {
    return /\r\nredis_version:([^\r]+)\r\n/.exec(await client.info("server"))?.[1] ?? "unknown";
  } finally {
    client.disconnect();
  }
}

/**
 * Starts a private redis-server, measures the TCP contenders in one child process and the
 * UpstashStore in another, stops the server, and returns every number.
 */
export async function runRedisBench(options: RedisBenchOptions = DEFAULT_REDIS_OPTIONS): Promise<RedisBenchReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const server = await startRedisServer();
  let measured: TcpScenarioMeasurement[];
  let upstash: UpstashMeasurement[];
  let cold: ColdBurstMeasurement | undefined;
  let version: string;
  try {
    version = await redisVersion(server.url);
    log(`redis-server ${version} on port ${server.port} (private to this run)`);
    const tcp: TcpOptions = {
      rounds: options.rounds,
      warmupMs: options.warmupMs,
      targetRoundMs: options.targetRoundMs,
      ...(options.warmupOps !== undefined ? { warmupOps: options.warmupOps } : {}),
      ...(options.opsPerRound !== undefined ? { opsPerRound: options.opsPerRound } : {}),
      ...(options.slices !== undefined ? { slices: options.slices } : {}),
      ...(options.stableAgainst !== undefined ? { stableAgainst: options.stableAgainst } : {}),
      ...(options.maxRounds !== undefined ? { maxRounds: options.maxRounds } : {}),
      ...(options.budgetMs !== undefined ? { budgetMs: options.budgetMs } : {}),
      inFlight: options.inFlight,
      keyCounts: options.keyCounts,
      ...(options.contenders !== undefined ? { contenders: options.contenders } : {}),
    };
    const processes = Math.max(1, Math.floor(options.processes ?? 1));
    const perProcess: TcpScenarioMeasurement[][] = [];
    for (let p = 0; p < processes; p++) {
      log(
        `TCP: ${(options.contenders ?? TCP_CONTENDERS).join(", ")}; ${options.inFlight} in flight; keys ${options.keyCounts.join(", ")}; child process ${p + 1} of ${processes} (load ${loadAvgNow()}) ...`,
      );
      perProcess.push(await runInChild<TcpScenarioMeasurement[]>(CONTENDERS_URL, "measureTcp", [server.url, tcp]));
    }
    measured = poolProcesses(perProcess);
    log(`Upstash: UpstashStore through the bridge, in a child process (load ${loadAvgNow()}) ...`);
    upstash = await runInChild<UpstashMeasurement[]>(CONTENDERS_URL, "measureUpstash", [server.url, options.upstash]);
    if (options.coldBurst !== undefined) {
      log(`Cold burst: ${options.coldBurst.burst} decisions after SCRIPT FLUSH against the same burst warm, ${options.coldBurst.rounds} rounds, in a child process (load ${loadAvgNow()}) ...`);
      cold = await runInChild<ColdBurstMeasurement>(COLD_URL, "measureColdBurst", [server.url, options.coldBurst]);
    }
  } finally {
    await server.stop();
  }
  const scenarios = measured.map(scenarioReport);
  const upstashRows: UpstashRow[] = upstash.map((u) => ({
    ...u,
    targets: !u.contender.startsWith("Sluice")
      ? []
      : u.callers === 1
        ? [target("requests per decision", "=", TARGETS.upstashSequential, u.requestsPerDecision)]
        : [target("requests per decision", "<", TARGETS.upstashConcurrent, u.requestsPerDecision)],
  }));

  const misses: string[] = [];
  let pass = 0;
  for (const s of scenarios) {
    for (const row of s.rows) {
      for (const t of row.targets) {
        if (t.pass) pass++;
        else misses.push(`${keysTitle(s.keys)}: ${row.name} is ${formatRatio(t.value)} ${t.against} (target ${t.op} ${t.bound}x)`);
      }
    }
  }
  for (const row of upstashRows) {
    for (const t of row.targets) {
      if (t.pass) pass++;
      else misses.push(`${row.contender}, ${row.callers} in flight: ${row.requestsPerDecision.toFixed(2)} HTTP requests per decision (target ${t.op} ${t.bound})`);
    }
  }
  const coldBurst = cold === undefined ? undefined : coldBurstReport(cold);
  for (const t of coldBurst?.targets ?? []) {
    if (t.pass) pass++;
    else misses.push(`cold burst: ${formatRatio(t.value)} ${t.against} (target ${t.op} ${t.bound})`);
  }
  const { log: _log, ...recorded } = options;
  return {
    benchmark: "redis",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    server: { version, port: server.port },
    options: recorded,
    scenarios,
    upstash: upstashRows,
    ...(coldBurst === undefined ? {} : { coldBurst }),
    summary: { pass, miss: misses.length, misses },
  };
}

const us = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "–");

/** The report as printed: throughput and ratios, where the time went, the Upstash requests, the misses. */
export function formatRedisReport(report: RedisBenchReport): string {
  const m = report.machine;
  const o = report.options;
  const out: string[] = [
    `# Redis: Sluice vs ${RLF} vs a raw EVALSHA ceiling`,
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; 1-minute load average ${m.loadAvgStart} at start, ${m.loadAvgEnd ?? "?"} at end.`,
    `One private redis-server ${report.server.version} (no persistence) started by the run. TCP contenders: ioredis, auto-pipelining off,`,
    `one connection each, ${o.inFlight} callers in flight each awaiting one decision at a time; in one Node process at a time (${o.processes ?? 1} in turn, rounds pooled), interleaved over`,
    `${o.rounds} rounds of ~${o.targetRoundMs} ms each in each process. decisions/s is the median round; ratios the median of per-round ratios.`,
    `Ceiling: EVALSHA of \`${CEILING_SCRIPT}\`. Sluice: RedisStore, tokenBucket or slidingWindow alone, or the tier`,
    "tokenBucket + slidingWindow (1 min) + fixedWindow (1 day); quotas that never deny.",
    "",
    `## Decisions per second, ${o.inFlight} in flight (RedisStore + ioredis)`,
    "",
  ];
  const rows: string[][] = [];
  for (const s of report.scenarios) {
    for (const r of s.rows) {
      const [vsCeiling, vsRlf] = r.targets;
      const note = r.name === CEILING || r.name === RLF ? "baseline" : "";
      rows.push([
        keysTitle(s.keys),
        r.name,
        formatRate(r.opsPerSec),
        r.name === CEILING ? "1" : formatStat(r.stats.vsCeiling),
        vsCeiling ? verdict(vsCeiling) : note,
        r.name === RLF ? "1" : r.name === CEILING ? formatRatio(r.vsRlf) : formatStat(r.stats.vsRlf),
        vsRlf ? verdict(vsRlf) : note,
      ]);
    }
  }
  out.push(
    markdownTable(["keys", "contender", "decisions/s", "÷ ceiling", "target", `÷ ${RLF}`, "target"], rows, ["l", "l", "r", "r", "l", "r", "l"]),
    "",
    "## Where the time goes (per decision; medians over the measured rounds)",
    "",
    markdownTable(
      ["keys", "contender", "Node CPU µs", "redis-server CPU µs", "total CPU µs", "EVALSHA µs (in Redis)", "Redis commands"],
      report.scenarios.flatMap((s) =>
        s.rows.map((r) => [
          keysTitle(s.keys),
          r.name,
          us(r.profile.nodeCpuUs),
          us(r.profile.redisCpuUs),
          us(r.profile.totalCpuUs),
          r.profile.evalshaUs.toFixed(2),
          r.profile.redisCommandsPerDecision.toFixed(2),
        ]),
      ),
      ["l", "l", "r", "r", "r", "r", "r"],
    ),
    "",
    "CPU µs: the Node process and redis-server (user + system) per decision during the round; with every core of the machine",
    "busy, decisions/s goes as the inverse of the total. EVALSHA µs: `usec_per_call` in `INFO commandstats`, the script's run",
    "time inside Redis including the commands it calls. Redis commands: sent by the client plus those called by the script.",
    "",
    `## Over HTTP: UpstashStore and @upstash/ratelimit (@upstash/redis, auto-pipelining on, through the Upstash-REST bridge)`,
    "",
    markdownTable(
      ["contender", "callers in flight", "decisions", "HTTP requests", "requests/decision", "target", "Redis commands/decision", "decisions/s (info)"],
      report.upstash.map((u) => [
        u.contender,
        String(u.callers),
        u.decisions.toLocaleString("en-US"),
        u.requests.toLocaleString("en-US"),
        u.requestsPerDecision.toFixed(2),
        u.targets[0] ? verdict(u.targets[0], "") : "",
        u.commandsPerDecision.toFixed(2),
        formatRate(u.opsPerSec),
      ]),
      ["l", "r", "r", "r", "r", "l", "r", "r"],
    ),
    "",
    "decisions/s over HTTP is information only: the bridge runs in the client's process.",
    "",
    ...(report.coldBurst === undefined ? [] : [coldBurstSection(report.coldBurst), ""]),
    ...summaryLines(report.summary),
  );
  return out.join("\n");
}

/** The cold burst's table and how it was measured. */
export function coldBurstSection(c: ColdBurstReport): string {
  const [vsWarm, loads] = c.targets;
  return [
    `## The cold burst: ${c.burst.toLocaleString("en-US")} concurrent decisions after SCRIPT FLUSH (RedisStore + ioredis, one node)`,
    "",
    markdownTable(
      ["warm burst ms", "cold burst ms", "cold ÷ warm (95% interval)", "target", "script loads per script", "target", "EVALSHA per cold burst"],
      [
        [
          median(c.warmMs).toFixed(0),
          median(c.coldMs).toFixed(0),
          formatStat(c.stat),
          vsWarm ? (c.stat.stable ? verdict(vsWarm) : `unstable (≤ ${vsWarm.bound}x)`) : "",
          String(c.loadsPerScript),
          loads ? verdict(loads, "") : "",
          String(median(c.evalshas)),
        ],
      ],
      ["r", "r", "r", "l", "r", "l", "r"],
    ),
    "",
    `Two limiters (a fixed and a sliding window: two scripts) share each burst. ${c.ratios.length} rounds: a warm burst, SCRIPT FLUSH, the cold burst,`,
    "a warm burst; a round's ratio is the cold burst over the mean of the two warm ones. Script loads: `EVAL` calls of a cold burst per script.",
  ].join("\n");
}

/** Where `bench:redis` writes its figures. */
export const RESULTS_FILE = new URL("../results/redis.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runRedisBench({ ...DEFAULT_REDIS_OPTIONS, log }), formatRedisReport);
