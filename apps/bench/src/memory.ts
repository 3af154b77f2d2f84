/**
 * `pnpm --filter @sluice/bench bench:memory`: in-memory decisions per second for each algorithm
 * with 1 hot key, with 100,000 keys and on the deny path, plus bytes per idle key over 1,000,000
 * keys — beside rate-limiter-flexible's `RateLimiterMemory` and a naive floor, all measured in the
 * same run and printed as ratios with the targets (PASS/MISS; a miss never fails the process).
 * Writes every figure to `results/memory.json`.
 *
 * Each algorithm is measured in its own child process together with the baselines (contenders
 * interleaved round by round in that process); each memory figure comes from its own child process.
 *
 * @module
 */
import { type ThroughputOptions, type ThroughputResult, median } from "./lib/harness.js";
import { type RatioStat, perRoundRatios, ratioStat } from "./lib/stats.js";
import { runInChild } from "./lib/child.js";
import type { HeapResult } from "./lib/heap.js";
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
  ALGORITHMS,
  type Algorithm,
  CLOCK_FLOOR,
  FLOOR,
  PEERS,
  RLF,
  SCENARIOS,
  type ScenarioId,
  type ScenarioMeasurement,
  heapSubjects,
} from "./memory-contenders.js";

export interface MemoryBenchOptions extends ThroughputOptions {
  /** Keys of the many-keys scenario. */
  manyKeys: number;
  /** Keys created for the bytes-per-idle-key figure. */
  heapKeys: number;
  /** Sluice algorithms to measure (default: all five). */
  algorithms?: readonly Algorithm[];
  /** Memory subjects to measure (default: all). */
  heapSubjects?: readonly string[];
  /**
   * Child processes per algorithm, each running every round, in passes over the algorithms (so
   * an algorithm's processes are spread over the section): a contender's per-round ratios are
   * pooled over them, so the difference between two processes (V8 compiles each one's loops its
   * own way) and what the machine does over minutes show in the spread instead of between two runs.
   * @default 1
   */
  processes?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export const DEFAULT_MEMORY_OPTIONS: MemoryBenchOptions = {
  rounds: 7,
  warmupMs: 120,
  targetRoundMs: 80,
  slices: 5,
  // a round's figure is the median of its 5 slices: a burst of other work that slows one slice moves nothing
  roundFigure: "median",
  processes: 3,
  // adaptive rounds: after its 7, each process adds rounds (up to 10) while a ratio to
  // rate-limiter-flexible or the floor is unstable, none starting 0.7 s after the 7th ended (a round
  // of a process with 7 contenders takes ~0.6 s; 15 processes × 3 scenarios: at most ~1 minute more)
  stableAgainst: [RLF, FLOOR],
  maxRounds: 10,
  budgetMs: 700,
  manyKeys: 100_000,
  heapKeys: 1_000_000,
};

/** The section's targets, reported as met or missed on the benchmarks page. */
export const TARGETS = {
  /** Sluice ÷ rate-limiter-flexible, per scenario. */
  vsRlf: { hot: 1.3, many: 2, deny: 10 } satisfies Record<ScenarioId, number>,
  /** Sluice ÷ the naive floor, in every scenario. */
  vsFloor: 0.7,
  /** Bytes per idle token-bucket key. */
  tokenBucketBytesPerKey: 80,
} as const;

/** The bytes-per-idle-key targets, by memory subject (a subject without one is reported without a target). */
const BYTES_PER_KEY_TARGETS: Readonly<Partial<Record<string, number>>> = { tokenBucket: TARGETS.tokenBucketBytesPerKey };

export interface ThroughputRow {
  readonly name: string;
  /** Median decisions per second (for a baseline: the median over the processes that measured it). */
  readonly opsPerSec: number;
  /** ÷ rate-limiter-flexible, paired by round within each process (median). */
  readonly vsRlf: number;
  /** ÷ the naive floor, likewise. */
  readonly vsFloor: number;
  /** ÷ the floor with a clock read, likewise. */
  readonly vsClockFloor: number;
  /** Empty for the baselines. */
  readonly targets: Target[];
  /** The same ratios with their spread over rounds (the 95% interval of the median, stable within ±5% or not). */
  readonly stats: { readonly vsRlf: RatioStat; readonly vsFloor: RatioStat; readonly vsClockFloor: RatioStat };
  /** Every process's raw result for this contender. */
  readonly runs: ThroughputResult[];
}

export interface ScenarioReport {
  readonly id: ScenarioId;
  readonly title: string;
  readonly keys: number;
  readonly expect: "allow" | "deny";
  readonly rows: ThroughputRow[];
}

export interface MemoryRow extends HeapResult {
  readonly vsFloor: number;
  readonly vsRlf: number;
  readonly targets: Target[];
}

export interface MemoryBenchReport {
  readonly benchmark: "memory";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly options: Omit<MemoryBenchOptions, "log">;
  readonly scenarios: ScenarioReport[];
  readonly memory: MemoryRow[];
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

const CONTENDERS_URL = new URL("./memory-contenders.ts", import.meta.url).href;

function find(results: readonly ThroughputResult[], name: string): ThroughputResult {
  const r = results.find((x) => x.name === name);
  if (r === undefined) throw new Error(`no result for ${name}`);
  return r;
}

/** Builds one scenario's rows from every algorithm's process. */
function scenarioReport(id: ScenarioId, perAlgorithm: ReadonlyMap<Algorithm, ScenarioMeasurement[]>): ScenarioReport {
  const measurements = [...perAlgorithm.values()].flat();
  const row = (name: string, pick: (m: ScenarioMeasurement) => ThroughputResult[]): ThroughputRow => {
    // every round's ratio, pooled over the processes that measured this contender
    const stat = (against: string) =>
      ratioStat(measurements.flatMap((m) => pick(m).flatMap((r) => perRoundRatios(r.roundOpsPerSec, find(m.results, against).roundOpsPerSec))));
    const runs = measurements.flatMap(pick);
    const stats = { vsRlf: stat(RLF), vsFloor: stat(FLOOR), vsClockFloor: stat(CLOCK_FLOOR) };
    return {
      name,
      opsPerSec: median(runs.map((r) => r.opsPerSec)),
      vsRlf: stats.vsRlf.median,
      vsFloor: stats.vsFloor.median,
      vsClockFloor: stats.vsClockFloor.median,
      targets: [],
      stats,
      runs,
    };
  };
  const rows = [RLF, FLOOR, CLOCK_FLOOR].map((name) => row(name, (m) => [find(m.results, name)]));
  for (const [algorithm, ms] of perAlgorithm) {
    const r = row(algorithm, (x) => (ms.includes(x) ? [find(x.results, algorithm)] : []));
    rows.push({ ...r, targets: [target(RLF, ">=", TARGETS.vsRlf[id], r.vsRlf), target(FLOOR, ">=", TARGETS.vsFloor, r.vsFloor)] });
  }
  // the other peers, each from the process of the algorithm it implements
  const peers = new Set([...perAlgorithm.keys()].flatMap((a) => PEERS[a] ?? []));
  for (const peer of peers) rows.push(row(peer, (m) => m.results.filter((r) => r.name === peer)));
  const scenario = SCENARIOS[id];
  const keys = measurements[0]?.keys ?? 0;
  return { id, title: id === "many" ? `${keys.toLocaleString("en-US")} keys` : scenario.title, keys, expect: scenario.expect, rows };
}

/** Runs every throughput scenario and memory figure (each in child processes) and returns every number. */
export async function runMemoryBench(options: MemoryBenchOptions = DEFAULT_MEMORY_OPTIONS): Promise<MemoryBenchReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const throughputOptions: ThroughputOptions = {
    rounds: options.rounds,
    warmupMs: options.warmupMs,
    targetRoundMs: options.targetRoundMs,
    ...(options.warmupOps !== undefined ? { warmupOps: options.warmupOps } : {}),
    ...(options.opsPerRound !== undefined ? { opsPerRound: options.opsPerRound } : {}),
    ...(options.slices !== undefined ? { slices: options.slices } : {}),
    ...(options.roundFigure !== undefined ? { roundFigure: options.roundFigure } : {}),
    ...(options.stableAgainst !== undefined ? { stableAgainst: options.stableAgainst } : {}),
    ...(options.maxRounds !== undefined ? { maxRounds: options.maxRounds } : {}),
    ...(options.budgetMs !== undefined ? { budgetMs: options.budgetMs } : {}),
  };

  const byScenario = new Map<ScenarioId, Map<Algorithm, ScenarioMeasurement[]>>();
  const processes = Math.max(1, options.processes ?? 1);
  // passes over the algorithms, one process per algorithm each (fixedWindow, slidingWindow, …,
  // then again): an algorithm's processes are spread over the whole section rather than run back
  // to back, so its pooled rounds sample the machine over minutes, not seconds
  for (let p = 0; p < processes; p++) {
    for (const algorithm of options.algorithms ?? ALGORITHMS) {
      log(`throughput: ${algorithm} beside ${RLF}, the floors and its peers, child process ${p + 1} of ${processes} (load ${loadAvgNow()}) ...`);
      const measured = await runInChild<ScenarioMeasurement[]>(CONTENDERS_URL, "measureAlgorithm", [algorithm, options.manyKeys, throughputOptions]);
      for (const m of measured) {
        let perAlgorithm = byScenario.get(m.scenario);
        if (perAlgorithm === undefined) byScenario.set(m.scenario, (perAlgorithm = new Map()));
        perAlgorithm.set(algorithm, [...(perAlgorithm.get(algorithm) ?? []), m]);
      }
    }
  }
  const scenarios = [...byScenario].map(([id, perAlgorithm]) => scenarioReport(id, perAlgorithm));

  const heap: HeapResult[] = [];
  for (const subject of options.heapSubjects ?? Object.keys(heapSubjects)) {
    log(`memory: ${subject}, ${options.heapKeys.toLocaleString("en-US")} keys, in a child process ...`);
    heap.push(await runInChild<HeapResult>(CONTENDERS_URL, "measureHeap", [subject, options.heapKeys]));
  }
  const floorBytes = heap.find((h) => h.subject === FLOOR)?.bytesPerKey ?? NaN;
  const rlfBytes = heap.find((h) => h.subject === RLF)?.bytesPerKey ?? NaN;
  const memory: MemoryRow[] = heap.map((h) => {
    const bound = BYTES_PER_KEY_TARGETS[h.subject];
    return {
      ...h,
      vsFloor: h.bytesPerKey / floorBytes,
      vsRlf: h.bytesPerKey / rlfBytes,
      targets: bound === undefined ? [] : [target("bytes per idle key", "<=", bound, h.bytesPerKey)],
    };
  });

  const misses: string[] = [];
  let pass = 0;
  for (const s of scenarios) {
    for (const row of s.rows) {
      for (const t of row.targets) {
        if (t.pass) pass++;
        else misses.push(`${s.title}: ${row.name} is ${formatRatio(t.value)} ${t.against} (target ${t.op} ${t.bound}x)`);
      }
    }
  }
  for (const row of memory) {
    for (const t of row.targets) {
      if (t.pass) pass++;
      else misses.push(`memory: ${row.subject} takes ${row.bytesPerKey.toFixed(1)} bytes per idle key (target ${t.op} ${t.bound})`);
    }
  }
  const { log: _log, ...recorded } = options;
  return {
    benchmark: "memory",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    options: recorded,
    scenarios,
    memory,
    summary: { pass, miss: misses.length, misses },
  };
}

/** The report as printed: the throughput table, the memory table, the misses. */
export function formatMemoryReport(report: MemoryBenchReport): string {
  const m = report.machine;
  const o = report.options;
  const algorithms = o.algorithms ?? ALGORITHMS;
  const out: string[] = [
    `# In-memory rate limiting: Sluice vs ${RLF} vs a naive floor`,
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; 1-minute load average ${m.loadAvgStart} at start, ${m.loadAvgEnd ?? "?"} at end.`,
    `Sequential awaited decisions. Each algorithm ran in its own process beside ${RLF} and the floors, interleaved over`,
    `${o.rounds} rounds of ~${o.targetRoundMs} ms each in each of ${o.processes ?? 1} process(es) per algorithm; decisions/s is the median round,`,
    `ratios the median of the per-round ratios pooled over the processes. Baseline rows: over the ${algorithms.length * (o.processes ?? 1)} processes that measured them.`,
    "",
    "## Decisions per second",
    "",
  ];
  const rows: string[][] = [];
  for (const s of report.scenarios) {
    for (const r of s.rows) {
      const [vsRlf, vsFloor] = r.targets;
      const note = r.name === RLF || r.name === FLOOR ? "baseline" : r.name === CLOCK_FLOOR ? "info" : "";
      rows.push([
        s.title,
        r.name,
        formatRate(r.opsPerSec),
        formatRatio(r.vsRlf),
        vsRlf ? verdict(vsRlf) : note,
        formatRatio(r.vsFloor),
        vsFloor ? verdict(vsFloor) : note,
        formatRatio(r.vsClockFloor),
      ]);
    }
  }
  out.push(
    markdownTable(
      ["scenario", "contender", "decisions/s", `÷ ${RLF}`, "target", "÷ floor", "target", `÷ ${CLOCK_FLOOR}`],
      rows,
      ["l", "l", "r", "r", "l", "r", "l", "r"],
    ),
    "",
    `"${CLOCK_FLOOR}" is the floor plus one clock read per decision: no target, it shows what reading the clock alone costs.`,
    "",
    `## Bytes per idle key (${o.heapKeys.toLocaleString("en-US")} keys; V8 heap + ArrayBuffers after a full GC; each in its own process)`,
    "",
    markdownTable(
      ["contender", "bytes/key", "heap bytes", "ArrayBuffer bytes", "÷ floor", `÷ ${RLF}`, "target"],
      report.memory.map((r) => [
        r.subject,
        r.bytesPerKey.toFixed(1),
        r.heapBytes.toLocaleString("en-US"),
        r.arrayBufferBytes.toLocaleString("en-US"),
        formatRatio(r.vsFloor),
        formatRatio(r.vsRlf),
        r.targets[0] ? verdict(r.targets[0], " B") : "",
      ]),
      ["l", "r", "r", "r", "r", "r", "l"],
    ),
    "",
    ...summaryLines(report.summary),
  );
  return out.join("\n");
}

/** Where `bench:memory` writes its figures. */
export const RESULTS_FILE = new URL("../results/memory.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runMemoryBench({ ...DEFAULT_MEMORY_OPTIONS, log }), formatMemoryReport);
