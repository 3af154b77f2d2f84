/**
 * `pnpm --filter @sluice/bench bench:app`: the middleware's own cost per request **inside the
 * app**, measured in process: each Hono app of `http-apps.ts` driven by `app.fetch(request)` in a
 * loop (no socket, no HTTP parser, no load generator sharing the cores), so the difference between
 * two contenders is the middleware's work per request, its headers written through Hono included.
 * `@sluice/hono` (memory store, fixed window, its default headers: IETF + legacy) beside a no-op
 * middleware, the same no-op writing those five headers as constants (the least a middleware writing
 * them through `c.header()` can cost), the bare app and hono-rate-limiter (its `MemoryStore`) twice:
 * as its users configure it (draft-6 headers) and writing the same header set as `@sluice/hono`;
 * with every request allowed and with every request denied (a quota of 100 per day, spent before the
 * rounds).
 *
 * Each app runs in its own child process (bundled like the published build), as in a deployment;
 * this process drives them in alternating slices within interleaved rounds (`lib/harness.ts`), each
 * slice timed by the app's process itself (the loop alone); `processes` passes with fresh
 * processes, their rounds pooled; rounds are
 * added while a ratio to the no-op or to hono-rate-limiter is unstable. Ratios are of **time per
 * request** (lower is cheaper), paired by round; a middleware's **own cost** is its time per
 * request less the bare app's in the same round.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { bundleEntry } from "./lib/bundle.js";
import { type Contender, type ThroughputOptions, type ThroughputResult, measureThroughput } from "./lib/harness.js";
import { type MachineInfo, type Target, loadAvgNow, machineInfo, markdownTable, runIfMain, target, verdict } from "./lib/report.js";
import { type RatioStat, formatStat, median, ratioStat } from "./lib/stats.js";
import { APP_CONTENDERS, APP_DENIED, type AppDriver, type AppRunReply } from "./app-cost-contenders.js";
import { BARE, HONO_RATE_LIMITER, HONO_RATE_LIMITER_DENIED, HONO_RATE_LIMITER_SAME, NOOP, SLUICE_DEFAULT, SLUICE_DENIED, STATIC_HEADERS } from "./http-apps.js";

export interface AppCostOptions extends ThroughputOptions {
  /**
   * How requests reach each app: `app.fetch(request)` (the section of `pnpm bench`), or
   * `@hono/node-server`'s request listener over a socket that discards what is written
   * (`bench:app --node-server`: a Node server's own work per request, its header conversion
   * included, without the kernel and the load generator). @default "app.fetch"
   */
  driver?: AppDriver;
  /** Child processes measuring every contender in turn, their rounds pooled. @default 1 */
  processes?: number;
  /** Contenders (default: all of {@link APP_CONTENDERS}). */
  contenders?: string[];
  log?: (line: string) => void;
}

export const DEFAULT_APP_COST_OPTIONS: AppCostOptions = {
  rounds: 11,
  warmupMs: 300,
  targetRoundMs: 100,
  slices: 8,
  // a round's figure is the median of its 8 slices (a burst of other work slows one, not the round)
  roundFigure: "median",
  processes: 2,
  stableAgainst: [NOOP, STATIC_HEADERS, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME, HONO_RATE_LIMITER_DENIED],
  maxRounds: 31,
  budgetMs: 5_000,
};

/** The scenario of every in-app figure. */
export const APP_SCENARIO = "in process (app.fetch)";

/** A middleware's own cost, as the `against` of a figure: `"own cost ÷ <name>'s own cost"`. */
export const OWN = (name: string) => `${name}'s own cost`;

/** The ratios of time per request: `[contender, against]`; `OWN(x)` compares own costs (less the bare app). */
export const APP_RATIOS: readonly (readonly [string, string])[] = [
  [SLUICE_DEFAULT, NOOP],
  [SLUICE_DEFAULT, HONO_RATE_LIMITER],
  [SLUICE_DEFAULT, OWN(HONO_RATE_LIMITER)],
  [SLUICE_DEFAULT, HONO_RATE_LIMITER_SAME],
  [SLUICE_DEFAULT, OWN(HONO_RATE_LIMITER_SAME)],
  [SLUICE_DEFAULT, STATIC_HEADERS],
  [STATIC_HEADERS, HONO_RATE_LIMITER],
  [STATIC_HEADERS, NOOP],
  [HONO_RATE_LIMITER, NOOP],
  [HONO_RATE_LIMITER_SAME, NOOP],
  [SLUICE_DENIED, NOOP],
  [SLUICE_DENIED, HONO_RATE_LIMITER_DENIED],
  [SLUICE_DENIED, OWN(HONO_RATE_LIMITER_DENIED)],
  [HONO_RATE_LIMITER_DENIED, NOOP],
  [NOOP, BARE],
];

/**
 * The section's targets, reported as met or missed on the benchmarks page: `@sluice/hono`'s time
 * per request (its default headers) at most hono-rate-limiter's, as its users configure it and with
 * the same header set.
 */
export const APP_TARGETS: ReadonlyMap<string, number> = new Map([
  [`${SLUICE_DEFAULT} ÷ ${HONO_RATE_LIMITER}`, 1],
  [`${SLUICE_DEFAULT} ÷ ${HONO_RATE_LIMITER_SAME}`, 1],
]);

export interface AppRow {
  readonly name: string;
  /** Median over the pooled rounds of µs per request. */
  readonly usPerRequest: number;
  /** Median over rounds of (µs per request − the bare app's in the same round); 0 for the bare app. */
  readonly ownUs: number;
  readonly rounds: number;
}

export interface AppRatio {
  readonly contender: string;
  readonly against: string;
  readonly stat: RatioStat;
  /** Its target (from {@link APP_TARGETS}), if it has one. */
  readonly target?: Target;
}

export interface AppCostReport {
  readonly benchmark: "app";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly options: Omit<AppCostOptions, "log">;
  /** Whether every process's ratios were stable when its rounds stopped. */
  readonly settled: boolean;
  readonly rows: AppRow[];
  readonly ratios: AppRatio[];
}

const CHILD_ENTRY = new URL("./app-cost-contenders.ts", import.meta.url);

/** One app's process: `run(ops)` has it send `ops` requests and answers the 200s and the time it took. */
interface AppProcess {
  run(ops: number): Promise<AppRunReply>;
  stop(): void;
}

function startApp(bundle: string, name: string, driver: AppDriver): Promise<AppProcess> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [bundle, name, driver], { stdio: ["ignore", "ignore", "pipe", "ipc"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += String(chunk);
    });
    child.once("exit", (code) => reject(new Error(`in-app contender ${JSON.stringify(name)} exited with ${code}\n${stderr}`)));
    child.once("message", () => {
      child.removeAllListeners("exit");
      resolve({
        run: (ops) =>
          new Promise((done, fail) => {
            child.once("message", (reply: AppRunReply) => (reply.error === undefined ? done(reply) : fail(new Error(reply.error))));
            child.send({ ops });
          }),
        stop: () => child.kill(),
      });
    });
  });
}

/**
 * Every contender in its own process, interleaved round by round from here: a contender's run is
 * timed by its own process (the loop alone, no IPC), and that time advances the clock the harness
 * measures with, so the figures are the apps' own.
 */
async function measureApps(bundle: string, names: readonly string[], driver: AppDriver, options: ThroughputOptions): Promise<ThroughputResult[]> {
  const apps: AppProcess[] = [];
  try {
    for (const name of names) apps.push(await startApp(bundle, name, driver));
    let measuredMs = 0;
    const contenders = names.map(
      (name, i): Contender => ({
        name,
        expect: APP_DENIED.has(name) ? "deny" : "allow",
        async run(ops) {
          const reply = await (apps[i] as AppProcess).run(ops);
          measuredMs += reply.elapsedMs;
          return reply.ok;
        },
      }),
    );
    return await measureThroughput(contenders, { ...options, clock: () => measuredMs });
  } finally {
    for (const app of apps) app.stop();
  }
}

/** µs per request of each round, pooled over processes (process order, so rounds stay paired). */
function pooledUs(perProcess: readonly ThroughputResult[][], name: string): number[] {
  return perProcess.flatMap((results) => (results.find((r) => r.name === name)?.roundOpsPerSec ?? []).map((ops) => 1e6 / ops));
}

/** Runs the in-app section and returns every number. */
export async function runAppCostBench(options: AppCostOptions = DEFAULT_APP_COST_OPTIONS): Promise<AppCostReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const names = options.contenders ?? [...APP_CONTENDERS];
  const { log: _log, processes: _p, contenders: _c, driver: _d, ...throughput } = options;
  const driver = options.driver ?? "app.fetch";
  const processes = Math.max(1, Math.floor(options.processes ?? 1));
  for (const name of names) {
    if (!(APP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown in-app contender ${JSON.stringify(name)}; have ${APP_CONTENDERS.join(", ")}`);
  }
  const bundle = await bundleEntry(CHILD_ENTRY, "app-cost-contenders");
  const perProcess: ThroughputResult[][] = [];
  for (let p = 0; p < processes; p++) {
    log(`In the app: ${names.join(", ")} through ${driver}, one process each, pass ${p + 1} of ${processes} (load ${loadAvgNow()}) ...`);
    perProcess.push(await measureApps(bundle, names, driver, throughput));
  }
  const us = new Map(names.map((n) => [n, pooledUs(perProcess, n)]));
  const bare = us.get(BARE);
  const own = (name: string) => {
    const t = us.get(name) ?? [];
    return bare === undefined ? [] : t.map((x, i) => x - (bare[i] as number));
  };
  const rows = names.map((name): AppRow => {
    const t = us.get(name) ?? [];
    const o = own(name);
    return { name, usPerRequest: median(t), ownUs: name === BARE || o.length === 0 ? 0 : median(o), rounds: t.length };
  });
  const ratios: AppRatio[] = [];
  for (const [contender, against] of APP_RATIOS) {
    const ownOf = names.find((n) => OWN(n) === against);
    if (!names.includes(contender) || (ownOf === undefined && !names.includes(against)) || (ownOf !== undefined && bare === undefined)) continue;
    const a = ownOf === undefined ? (us.get(contender) as number[]) : own(contender);
    const b = ownOf === undefined ? (us.get(against) as number[]) : own(ownOf);
    const stat = ratioStat(a.map((x, i) => x / (b[i] as number)));
    const bound = APP_TARGETS.get(`${contender} ÷ ${against}`);
    ratios.push({ contender, against, stat, ...(bound === undefined ? {} : { target: target(against, "<=", bound, stat.median) }) });
  }
  return {
    benchmark: "app",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    options: { ...throughput, processes, driver, ...(options.contenders ? { contenders: options.contenders } : {}) },
    settled: perProcess.every((results) => results.every((r) => r.settled !== false)),
    rows,
    ratios,
  };
}

/** The table of contenders. */
export function appTable(report: AppCostReport): string {
  return markdownTable(
    ["app (in process)", "µs/request", "own µs/request (less the bare app)"],
    report.rows.map((r) => [r.name, r.usPerRequest.toFixed(2), r.name === BARE ? "" : r.ownUs.toFixed(2)]),
    ["l", "r", "r"],
  );
}

/** The table of ratios of time per request (lower is cheaper). */
export function appRatioTable(report: AppCostReport, previous?: (r: AppRatio) => string): string {
  return markdownTable(
    ["time per request", "ratio (95% interval)", "target", ...(previous ? ["previous run"] : [])],
    report.ratios.map((r) => [
      `${r.against.endsWith("'s own cost") ? `${r.contender}'s own cost` : r.contender} ÷ ${r.against}`,
      formatStat(r.stat),
      r.target === undefined ? "" : r.stat.stable ? verdict(r.target) : `unstable (≤ ${r.target.bound}x)`,
      ...(previous ? [previous(r)] : []),
    ]),
    ["l", "r", "l", ...(previous ? (["r"] as const) : [])],
  );
}

/** The report as printed. */
export function formatAppCostReport(report: AppCostReport): string {
  const m = report.machine;
  return [
    `# Inside the app: the middleware's own cost per request (${report.options.driver === "node-server" ? "@hono/node-server's listener, no socket" : "app.fetch"} in a loop)`,
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; load ${m.loadAvgStart} → ${m.loadAvgEnd ?? "?"}. ${report.rows[0]?.rounds ?? 0} rounds pooled over ${report.options.processes ?? 1} process(es)${report.settled ? "" : "; not every ratio was stable when the time budget ran out"}.`,
    "",
    appTable(report),
    "",
    appRatioTable(report),
  ].join("\n");
}

/** Where `bench:app` writes its figures. */
export const RESULTS_FILE = new URL("../results/app.json", import.meta.url);

/** Where `bench:app --node-server` writes its figures. */
export const NODE_SERVER_RESULTS_FILE = new URL("../results/app-node-server.json", import.meta.url);

const viaNodeServer = process.argv.includes("--node-server");
await runIfMain(
  import.meta.url,
  viaNodeServer ? NODE_SERVER_RESULTS_FILE : RESULTS_FILE,
  (log) => runAppCostBench({ ...DEFAULT_APP_COST_OPTIONS, ...(viaNodeServer ? { driver: "node-server" as const } : {}), log }),
  formatAppCostReport,
);
