/**
 * `pnpm --filter @sluice/bench bench:reservations`: what the limiter's `reserve` option buys and
 * costs, against one private redis-server that the benchmark starts and stops:
 *
 * - **store calls per 1,000 decisions** on a hot key: 4 instances, together half of the limit, in
 *   simulated time with the store 50 ms away (and 2 ms), counted by Redis (`INFO commandstats`)
 *   and by the Upstash-REST bridge; `@upstash/ratelimit`'s commands per 1,000 on the same bridge;
 * - **`limit()` latency with the store 50 ms away** (delaying proxies), in real time, beside Sluice
 *   without reservations and `@upstash/ratelimit`;
 * - **what is admitted at 120% of the limit** across 4 instances, with reservations ÷ without;
 * - **what a cold key pays**: decisions per second with `reserve` on ÷ off, on Redis and in memory
 *   (behind a wrapper: over a `MemoryStore` itself the option is a no-op, the very same code runs),
 *   interleaved round by round (a ratio in one run).
 *
 * Writes every figure to `results/reservations.json`.
 *
 * @module
 */
import { startRedisServer } from "@sluice/testing/redis-server";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import IORedis from "ioredis";
import { runInChild } from "./lib/child.js";
import { startDelayProxy } from "./lib/delay-proxy.js";
import { type ThroughputOptions, type ThroughputResult, median } from "./lib/harness.js";
import { type MachineInfo, type Target, loadAvgNow, machineInfo, runIfMain, target } from "./lib/report.js";
import { type RatioStat, pairedStat } from "./lib/stats.js";
import { type ColdMeasurement, RESERVE_OFF, RESERVE_ON } from "./reservations-cold.js";
import type { AdmittedRow, LimitSpec, SimOptions, StoreCallsRow, UpstashRatelimitRow } from "./reservations-contenders.js";
import type { FarStore, LatencyOptions, LatencyRow } from "./reservations-latency.js";
import { formatReservationsReport, specTitle } from "./reservations-report.js";

export interface ReservationsBenchOptions {
  /** The hot key's limits whose store calls are counted (targets apply). */
  readonly hotSpecs: readonly LimitSpec[];
  /** Limits counted for information: a short window and a bucket that fills in a second. */
  readonly shortSpecs: readonly LimitSpec[];
  /** The simulated load of the counted runs (with the store far away). */
  readonly hotLoad: SimOptions;
  /** The store near: the hot specs counted again on Redis with this simulated round trip. */
  readonly nearLatencyMs: number;
  /** `@upstash/ratelimit`'s decisions per algorithm. */
  readonly upstashDecisions: number;
  /** At 120% of the limit: the limits and the simulated load. */
  readonly admittedSpecs: readonly LimitSpec[];
  readonly admittedLoad: SimOptions;
  readonly latency: LatencyOptions;
  /** The cold-key pairs: in memory, and on Redis with `inFlight` callers. */
  readonly coldMemory: ThroughputOptions;
  readonly coldRedis: ThroughputOptions & { readonly inFlight: number };
  /** Progress lines (default: none). */
  readonly log?: (line: string) => void;
}

/** 30 s into a minute: a minute's window ends halfway through a 60 s run. */
const START_MS = Date.UTC(2026, 0, 1, 0, 0, 30);

export const DEFAULT_RESERVATIONS_OPTIONS: ReservationsBenchOptions = {
  hotSpecs: [
    { algorithm: "fixedWindow", perSecond: 2000, windowS: 60 },
    { algorithm: "slidingWindow", perSecond: 2000, windowS: 60 },
    { algorithm: "tokenBucket", perSecond: 2000, windowS: 10 },
  ],
  shortSpecs: [
    { algorithm: "fixedWindow", perSecond: 2000, windowS: 1 },
    { algorithm: "tokenBucket", perSecond: 2000, windowS: 1 },
  ],
  hotLoad: { instances: 4, offered: 0.5, durationMs: 60_000, startMs: START_MS, latencyMs: 50 },
  nearLatencyMs: 2,
  upstashDecisions: 1000,
  admittedSpecs: [
    { algorithm: "fixedWindow", perSecond: 1000, windowS: 1 },
    { algorithm: "slidingWindow", perSecond: 1000, windowS: 1 },
    { algorithm: "tokenBucket", perSecond: 1000, windowS: 1 },
  ],
  admittedLoad: { instances: 4, offered: 1.2, durationMs: 30_000, startMs: START_MS, latencyMs: 50 },
  latency: {
    spec: { algorithm: "tokenBucket", perSecond: 2000, windowS: 10 },
    instances: 4,
    ratePerS: 1000,
    roundTripMs: 50,
    warmupMs: 500,
    primeMs: 1000,
    measureMs: 1500,
    passes: 2,
  },
  coldMemory: { rounds: 7, warmupMs: 120, targetRoundMs: 80, slices: 5, roundFigure: "median", stableAgainst: [RESERVE_OFF], maxRounds: 20, budgetMs: 2500 },
  coldRedis: { rounds: 11, warmupMs: 500, targetRoundMs: 1000, slices: 8, roundFigure: "median", stableAgainst: [RESERVE_OFF], maxRounds: 30, budgetMs: 30_000, inFlight: 50 },
};

/** Targets from the issue. */
export const TARGETS = {
  /** Store calls per 1,000 decisions on a hot key, at most. */
  callsPer1000: 20,
  /** `limit()` latency with reservations and the store 50 ms away, at most (ms). */
  p50Ms: 0.05,
  p99Ms: 1,
  /** Admitted with reservations ÷ without, at 120% of the limit, at least. */
  admitted: 0.98,
  /** Time per decision of a cold key, `reserve` on ÷ off, at most. */
  coldCost: 1.05,
} as const;

/** Where the cold-key pairs ran. */
export const COLD_WRAPPED = "MemoryStore behind a wrapper, 100,000 keys (its clock 100× real time)";
export const COLD_REDIS = "RedisStore, 60,000 keys (ioredis, 50 in flight)";

/** One cold-key pair: its two rows and the cost of `reserve` on, as time per decision on ÷ off. */
export interface ColdRow {
  readonly store: string;
  readonly off: ThroughputResult;
  readonly on: ThroughputResult;
  /** Medians over the rounds of CPU µs per decision (this process's, plus redis-server's on Redis). */
  readonly cpuUsOff: number;
  readonly cpuUsOn: number;
  /** Time per decision (decisions per second off ÷ on), paired by round: the figure, the one the rounds run until stable. */
  readonly cost: RatioStat;
  /** CPU time per decision, on ÷ off, paired by round: information (redis-server's CPU time is counted in scheduler ticks, too coarse for a slice). */
  readonly cpuCost: RatioStat;
  /** The target where the figure is the one it names (information otherwise). */
  readonly target?: Target;
}

export interface ReservationsReport {
  readonly benchmark: "reservations";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly server: { readonly version: string; readonly port: number };
  readonly options: Omit<ReservationsBenchOptions, "log">;
  readonly storeCalls: (StoreCallsRow & { readonly target?: Target })[];
  readonly upstashRatelimit: UpstashRatelimitRow[];
  readonly admitted: (AdmittedRow & { readonly target: Target })[];
  readonly latency: (LatencyRow & { readonly targets: Target[] })[];
  readonly cold: ColdRow[];
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

const CONTENDERS_URL = new URL("./reservations-contenders.ts", import.meta.url).href;
const LATENCY_URL = new URL("./reservations-latency.ts", import.meta.url).href;
const COLD_URL = new URL("./reservations-cold.ts", import.meta.url).href;

async function redisVersion(url: string): Promise<string> {
  const client = new IORedis(url, { lazyConnect: true });
  await client.connect();
  try {
    return /\r\nredis_version:([^\r]+)\r\n/.exec(await client.info("server"))?.[1] ?? "unknown";
  } finally {
    client.disconnect();
  }
}

/** The cold-key pairs, each in its own child process. */
async function measureCold(url: string, options: ReservationsBenchOptions): Promise<ColdRow[]> {
  const pairs: [string, string, unknown[]][] = [
    [COLD_WRAPPED, "measureColdMemory", [options.coldMemory]],
    [COLD_REDIS, "measureColdRedis", [url, options.coldRedis.inFlight, options.coldRedis]],
  ];
  const rows: ColdRow[] = [];
  for (const [store, entry, args] of pairs) {
    const { results, cpuUsPerDecision } = await runInChild<ColdMeasurement>(COLD_URL, entry, args);
    const off = results.find((r) => r.name === RESERVE_OFF) as ThroughputResult;
    const on = results.find((r) => r.name === RESERVE_ON) as ThroughputResult;
    const cpuOff = cpuUsPerDecision[RESERVE_OFF] ?? [];
    const cpuOn = cpuUsPerDecision[RESERVE_ON] ?? [];
    // time per decision on ÷ off is decisions per second off ÷ on, round by round
    const cost = pairedStat(off.roundOpsPerSec, on.roundOpsPerSec);
    const cpuCost = pairedStat(cpuOn, cpuOff);
    // the figure the issue names (in memory, over the memory section's own store, reserve is a no-op)
    const targeted = store === COLD_REDIS;
    rows.push({ store, off, on, cpuUsOff: median(cpuOff), cpuUsOn: median(cpuOn), cost, cpuCost, ...(targeted ? { target: target(RESERVE_OFF, "<=", TARGETS.coldCost, cost.median) } : {}) });
  }
  return rows;
}

/** The latency child, with the bridge and the delaying proxies running here (see `measureLatency`). */
async function measureFar(url: string, port: number, options: LatencyOptions): Promise<LatencyRow[]> {
  const bridge = await startUpstashBridge({ redisUrl: url });
  const redisProxy = await startDelayProxy(port, options.roundTripMs);
  const upstashProxy = await startDelayProxy(bridge.port, options.roundTripMs);
  try {
    const far: FarStore = { redisPort: redisProxy.port, upstashPort: upstashProxy.port, upstashToken: bridge.token };
    return await runInChild<LatencyRow[]>(LATENCY_URL, "measureLatency", [far, options]);
  } finally {
    await Promise.all([redisProxy.close(), upstashProxy.close()]);
    await bridge.close();
  }
}

/** Every target checked, as the summary counts them; a ratio that is not stable is not a pass. */
function summarize(report: Omit<ReservationsReport, "summary">): ReservationsReport["summary"] {
  const misses: string[] = [];
  let pass = 0;
  const check = (t: Target | undefined, what: string, stable = true) => {
    if (t === undefined) return;
    if (t.pass && stable) pass++;
    else misses.push(`${what}: ${t.value.toFixed(3)} (target ${t.op} ${t.bound})${stable ? "" : ", unstable"}`);
  };
  for (const r of report.storeCalls) check(r.target, `store calls per 1,000, ${r.store}, ${specTitle(r.spec)}, ${r.latencyMs} ms away`);
  for (const r of report.admitted) check(r.target, `admitted at 120%, ${specTitle(r.spec)}`);
  for (const r of report.latency) for (const t of r.targets) check(t, `${r.contender} ${t.against}`);
  for (const r of report.cold) check(r.target, `cold key, ${r.store}, reserve on ÷ off`, r.cost.stable);
  return { pass, miss: misses.length, misses };
}

/** Starts a private redis-server, runs every measurement in its own child process, stops the server. */
export async function runReservationsBench(options: ReservationsBenchOptions = DEFAULT_RESERVATIONS_OPTIONS): Promise<ReservationsReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const server = await startRedisServer();
  try {
    const version = await redisVersion(server.url);
    log(`reservations: store calls on a hot key, simulated time (load ${loadAvgNow()}) ...`);
    const far = await runInChild<StoreCallsRow[]>(CONTENDERS_URL, "measureStoreCalls", [server.url, [...options.hotSpecs, ...options.shortSpecs], options.hotLoad]);
    const near = await runInChild<StoreCallsRow[]>(CONTENDERS_URL, "measureStoreCalls", [server.url, options.hotSpecs, { ...options.hotLoad, latencyMs: options.nearLatencyMs }, false]);
    const hot = (spec: LimitSpec) => options.hotSpecs.some((s) => s.algorithm === spec.algorithm && s.windowS === spec.windowS && s.perSecond === spec.perSecond);
    const storeCalls = [...far, ...near].map((r) => (hot(r.spec) ? { ...r, target: target("calls per 1,000", "<=", TARGETS.callsPer1000, r.callsPer1000) } : r));
    log(`reservations: @upstash/ratelimit's commands per 1,000 (load ${loadAvgNow()}) ...`);
    const upstashRatelimit = await runInChild<UpstashRatelimitRow[]>(CONTENDERS_URL, "measureUpstashRatelimit", [server.url, options.hotSpecs, options.hotLoad.instances, options.upstashDecisions]);
    log(`reservations: admitted at 120% of the limit (load ${loadAvgNow()}) ...`);
    const admitted = (await runInChild<AdmittedRow[]>(CONTENDERS_URL, "measureAdmitted", [server.url, options.admittedSpecs, options.admittedLoad])).map((r) => ({
      ...r,
      target: target("per-decision limiting", ">=", TARGETS.admitted, r.ratio),
    }));
    log(`reservations: latency ${options.latency.roundTripMs} ms away, real time (load ${loadAvgNow()}) ...`);
    const latency = (await measureFar(server.url, server.port, options.latency)).map((r) => ({
      ...r,
      targets: r.contender.startsWith("Sluice + reserve") ? [target("p50 ms", "<=", TARGETS.p50Ms, r.p50Ms), target("p99 ms", "<=", TARGETS.p99Ms, r.p99Ms)] : [],
    }));
    log(`reservations: a cold key, reserve on ÷ off (load ${loadAvgNow()}) ...`);
    const cold = await measureCold(server.url, options);
    const { log: _log, ...recorded } = options;
    const report = {
      benchmark: "reservations" as const,
      date: new Date().toISOString(),
      machine: { ...machine, loadAvgEnd: loadAvgNow() },
      server: { version, port: server.port },
      options: recorded,
      storeCalls,
      upstashRatelimit,
      admitted,
      latency,
      cold,
    };
    return { ...report, summary: summarize(report) };
  } finally {
    await server.stop();
  }
}

/** Where `bench:reservations` writes its figures. */
export const RESULTS_FILE = new URL("../results/reservations.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runReservationsBench({ ...DEFAULT_RESERVATIONS_OPTIONS, log }), formatReservationsReport);
