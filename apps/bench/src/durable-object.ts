/**
 * `pnpm --filter @sluice/bench bench:do`: decisions per second through the `SluiceLimiter` Durable
 * Object in workerd (Miniflare, `cf: false`, SQLite storage on tmpfs where there is one), against
 * a trivial counter object — the ceiling — addressed the same way, with one key, with one object
 * per key, and with keys sharded over a few objects. The decisions are made by a Worker inside
 * workerd (`worker/do-worker.ts`): 50 callers in flight, each awaiting one decision at a time, the way
 * concurrent requests of one Worker isolate call the objects. Contenders alternate in rounds
 * (`lib/harness.ts`); ratios are medians of per-round ratios with the 95% interval of the median (`lib/stats.ts`).
 *
 * @module
 */
import { constants } from "node:fs";
import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { type Contender, type ThroughputOptions, type ThroughputResult, measureThroughput } from "./lib/harness.js";
import { type MachineInfo, type Target, formatRate, loadAvgNow, machineInfo, markdownTable, runIfMain, summaryLines, target } from "./lib/report.js";
import { type RatioStat, formatStat, pairedStat } from "./lib/stats.js";

export const CEILING = "ceiling: counter object";
export const SLUICE = "Sluice DurableObjectStore";

/** The section's target: Sluice's object at least 0.8× the counter object's decisions/s (one hot object, per key, sharded). */
export const TARGET_VS_CEILING = 0.8;

export interface DoScenarioSpec {
  readonly keys: number;
  /** 0: one object per key. */
  readonly shards: number;
}

export interface DoBenchOptions extends ThroughputOptions {
  inFlight: number;
  scenarios: DoScenarioSpec[];
  log?: (line: string) => void;
}

export const DEFAULT_DO_OPTIONS: DoBenchOptions = {
  // 14 rounds of ~200 ms rather than 7 of ~400 ms: the same time, and more rounds for the interval
  // of the median to stand on (as in the HTTP section)
  rounds: 14,
  warmupMs: 500,
  targetRoundMs: 200,
  slices: 2,
  // adaptive rounds: up to 20 while the ratio to the counter object is unstable, ~2 s of rounds
  stableAgainst: [CEILING],
  maxRounds: 20,
  budgetMs: 2_000,
  inFlight: 50,
  scenarios: [
    { keys: 1, shards: 0 },
    { keys: 1000, shards: 0 },
    { keys: 1000, shards: 16 },
  ],
};

/** One contender in one scenario; Sluice's row carries the target against the counter object. */
export interface DoRow {
  readonly name: string;
  readonly opsPerSec: number;
  readonly vsCeiling: RatioStat;
  readonly run: ThroughputResult;
  readonly targets: Target[];
}

export interface DoScenario extends DoScenarioSpec {
  readonly title: string;
  readonly rows: DoRow[];
}

export interface DoBenchReport {
  readonly benchmark: "durable-object";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly options: Omit<DoBenchOptions, "log">;
  readonly scenarios: DoScenario[];
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

/** A fresh directory for the objects' SQLite files, on tmpfs where there is one. */
export async function storageDir(): Promise<string> {
  let base = tmpdir();
  try {
    await access("/dev/shm", constants.W_OK);
    base = "/dev/shm"; // workerd syncs SQLite on every write: tmpfs keeps disk speed out of the figure
  } catch {
    // no tmpfs
  }
  return mkdtemp(join(base, "sluice-bench-do-"));
}

/** The benchmark's Worker (`worker/do-worker.ts`), bundled for workerd. */
async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL("../worker/do-worker.ts", import.meta.url))],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["@sluice/source", "workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    logLevel: "silent",
  });
  return (result.outputFiles[0] as { text: string }).text;
}

export function scenarioTitle(s: DoScenarioSpec): string {
  if (s.keys === 1) return "1 key (one object)";
  const keys = `${s.keys.toLocaleString("en-US")} keys`;
  return s.shards === 0 ? `${keys}, one object per key` : `${keys} over ${s.shards} shards`;
}

/**
 * Miniflare running the benchmark's Worker (the `SLUICE` and `COUNTER` objects on SQLite storage
 * in `persist`); `inspectorPort` turns workerd's inspector on (for `profile:do`).
 */
export async function benchMiniflare(persist: string, inspectorPort?: number): Promise<Miniflare> {
  return new Miniflare({
    name: "sluice-bench",
    cf: false,
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: "2026-07-01",
    durableObjects: {
      SLUICE: { className: "SluiceLimiter", useSQLite: true },
      COUNTER: { className: "Counter", useSQLite: true },
    },
    durableObjectsPersist: persist,
    ...(inspectorPort === undefined ? {} : { inspectorPort }),
  });
}

/** Starts Miniflare, measures every scenario, stops it. */
export async function runDoBench(options: DoBenchOptions = DEFAULT_DO_OPTIONS): Promise<DoBenchReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const dir = await storageDir();
  const mf = await benchMiniflare(dir);
  const scenarios: DoScenario[] = [];
  try {
    const base = (await mf.ready).toString();
    const contender = (name: string, kind: string, spec: DoScenarioSpec): Contender => ({
      name,
      expect: "allow",
      async run(ops: number): Promise<number> {
        const url = `${base}run?contender=${kind}&ops=${ops}&inFlight=${options.inFlight}&keys=${spec.keys}&shards=${spec.shards}`;
        const response = await mf.dispatchFetch(url);
        const body = (await response.json()) as { allowed?: number; error?: string };
        if (body.error !== undefined) throw new Error(`${name}: ${body.error}`);
        return body.allowed ?? -1;
      },
    });
    for (const spec of options.scenarios) {
      log(`Durable Object: ${scenarioTitle(spec)}, ${options.inFlight} in flight, in workerd (load ${loadAvgNow()}) ...`);
      const results = await measureThroughput([contender(CEILING, "ceiling", spec), contender(SLUICE, "sluice", spec)], options);
      const ceiling = results[0] as ThroughputResult;
      const rows = results.map((run): DoRow => ({
        name: run.name,
        opsPerSec: run.opsPerSec,
        vsCeiling: pairedStat(run.roundOpsPerSec, ceiling.roundOpsPerSec),
        run,
        targets: run.name === SLUICE ? [target(CEILING, ">=", TARGET_VS_CEILING, pairedStat(run.roundOpsPerSec, ceiling.roundOpsPerSec).median)] : [],
      }));
      scenarios.push({ ...spec, title: scenarioTitle(spec), rows });
    }
  } finally {
    await mf.dispose();
    await rm(dir, { recursive: true, force: true });
  }
  const misses: string[] = [];
  let pass = 0;
  for (const s of scenarios) {
    for (const r of s.rows) {
      for (const t of r.targets) {
        if (t.pass && r.vsCeiling.stable) pass++;
        else misses.push(`${s.title}: ${r.name} is ${formatStat(r.vsCeiling)} ${t.against} (target ${t.op} ${t.bound}x)`);
      }
    }
  }
  const { log: _log, ...recorded } = options;
  return {
    benchmark: "durable-object",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    options: recorded,
    scenarios,
    summary: { pass, miss: misses.length, misses },
  };
}

/** One table: every scenario's rows. */
export function doTable(report: DoBenchReport): string {
  return markdownTable(
    ["keys", "contender", "decisions/s", "÷ ceiling"],
    report.scenarios.flatMap((s) => s.rows.map((r) => [s.title, r.name, formatRate(r.opsPerSec), r.name === CEILING ? "1" : formatStat(r.vsCeiling)])),
    ["l", "l", "r", "r"],
  );
}

export function formatDoReport(report: DoBenchReport): string {
  const m = report.machine;
  return [
    "# Durable Object: SluiceLimiter vs a counter object, in workerd (Miniflare)",
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; 1-minute load average ${m.loadAvgStart} at start, ${m.loadAvgEnd ?? "?"} at end.`,
    `${report.options.inFlight} callers in flight inside the Worker; ${report.options.rounds} interleaved rounds.`,
    "",
    doTable(report),
    "",
    ...summaryLines(report.summary),
  ].join("\n");
}





export const RESULTS_FILE = new URL("../results/durable-object.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runDoBench({ ...DEFAULT_DO_OPTIONS, log }), formatDoReport);
