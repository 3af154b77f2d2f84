/**
 * `pnpm --filter @sluice/bench bench:http`: requests per second through a Hono app on
 * `@hono/node-server`, measured from outside with autocannon on loopback, for each middleware in
 * {@link HTTP_CONTENDERS}, as ratios to the bare app (req/s and server CPU per request; p99 latency in ms), with 10 and 100
 * connections.
 *
 * Setup (2 cores): each contender's app runs in its own child process (bundled like the published
 * build, no tsx loader; see `lib/bundle.ts`), all started up front and idle until their turn; the
 * load generator, autocannon, runs in this process. So the server and the load generator never
 * share an event loop, and on a 2-core machine each can have a core. Every round alternates the
 * bare app with each other app — bare, A, bare, B, bare, … — in short autocannon runs (the others'
 * order rotating by round), and an app's per-round ratio is its run against the mean of the bare
 * runs just before and after it, so the load of that moment hits both (a run's req/s is its median
 * 50 ms bin, see {@link medianBinRate}); a ratio is the median of
 * the per-round ratios, with the 95% confidence interval of that median (order statistics, `lib/stats.ts`), and is
 * printed as unstable when the interval leaves ±5% of the median; while an app's ratio is unstable the scenario adds
 * rounds (up to `maxRounds`, within `extraSeconds`). The server's own CPU time per request (user + system, read over IPC around
 * each round, outside it) is reported beside: with both cores busy, req/s goes as the inverse of
 * the total CPU per request, and the server's part is what a middleware adds.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import autocannon from "autocannon";
import { startRedisServer } from "@sluice/testing/redis-server";
import { bundleEntry } from "./lib/bundle.js";
import { allCores, cannotPin, pin } from "./lib/pin.js";
import { median } from "./lib/harness.js";
import { type MachineInfo, type Target, loadAvgNow, machineInfo, runIfMain, summaryLines, markdownTable, target, verdict } from "./lib/report.js";
import { type RatioStat, formatStat, perRoundRatios, ratioStat } from "./lib/stats.js";
import { BARE, DENYING, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME, HTTP_CONTENDERS, NEEDS_REDIS, SLUICE_DEFAULT, SLUICE_IETF, STATIC_HEADERS } from "./http-apps.js";

export interface HttpBenchOptions {
  /** Connections of each scenario (one scenario per count). */
  connections: number[];
  /** Measured rounds per scenario (every contender runs once per round). */
  rounds: number;
  /** Length of one autocannon run, in seconds. */
  roundSeconds: number;
  /** Warm-up run per contender and scenario, in seconds. */
  warmupSeconds: number;
  /**
   * The first scenario's warm-up run per server process, in seconds (later scenarios use
   * `warmupSeconds`): until V8 has optimized a server's request path its req/s climbs from run to
   * run, and rounds measured on that climb widen every ratio's interval. @default warmupSeconds
   */
  firstWarmupSeconds?: number;
  /**
   * Adaptive rounds: after `rounds`, rounds are added while any app's req/s ratio to the bare app is
   * unstable (see `lib/stats.ts`), up to this many rounds in all.
   * @default rounds
   */
  maxRounds?: number;
  /** The time the added rounds of one scenario may take, in seconds: none starts after it. @default 0 */
  extraSeconds?: number;
  /** Contenders (default: all of {@link HTTP_CONTENDERS}); the bare app is always measured. */
  contenders?: string[];
  /**
   * Pin every app server to core 0 and this process (autocannon) to core 1 with `taskset` (when
   * there are two cores and `taskset`; the report says where they ran). Off by default: on a
   * virtual CPU that the host shares with a busy neighbour a pinned server cannot move away, and
   * in alternating runs pinned servers spread more than unpinned ones (see the README). @default false
   */
  pin?: boolean;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

// 10 rounds (the 2nd and 9th bound the median's 95% interval), up to 4 more while a ratio is
// unstable: the whole bench, with the in-Redis and in-app sections ahead of this one, stays under
// 10 minutes on 2 cores
export const DEFAULT_HTTP_OPTIONS: HttpBenchOptions = {
  connections: [10, 100],
  rounds: 10,
  roundSeconds: 0.4,
  warmupSeconds: 0.4,
  firstWarmupSeconds: 1,
  maxRounds: 14,
  extraSeconds: 6,
  // the IETF pair alone is left to the in-process tools (profile:http): nine apps keep the whole bench within its 10 minutes
  contenders: HTTP_CONTENDERS.filter((name) => name !== SLUICE_IETF),
};

/**
 * The section's targets, reported as met or missed on the benchmarks page: `@sluice/hono` with its
 * default headers (`["ietf", "legacy"]`), allowed path, against the bare app, hono-rate-limiter as
 * its users configure it (draft-6), and hono-rate-limiter writing the same header set.
 */
export const TARGETS = { vsBare: 0.8, vsHonoRateLimiter: 1.15, vsSameHeaders: 1.25 } as const;

/**
 * The rows compared with both hono-rate-limiter apps round by round: the default headers (the
 * targets), the IETF pair, and the static default headers (the most a middleware writing them
 * through `c.header()` can reach).
 */
const VS_HONO_RATE_LIMITER: ReadonlySet<string> = new Set([SLUICE_DEFAULT, SLUICE_IETF, STATIC_HEADERS]);

/** One contender in one scenario. */
export interface HttpRow {
  readonly name: string;
  /** Requests per second of each round, in round order. */
  readonly roundRps: number[];
  /** p99 latency (ms) of each round. */
  readonly roundP99: number[];
  /** Server CPU µs per request of each round. */
  readonly roundCpuUs: number[];
  /** Medians. */
  readonly rps: number;
  readonly p99Ms: number;
  readonly cpuUsPerRequest: number;
  /** Per-round ratios to the bare app. */
  readonly rpsVsBare: RatioStat;
  readonly cpuVsBare: RatioStat;
  /** Status codes seen over the measured rounds. */
  readonly statusCodes: Record<string, number>;
  readonly targets: Target[];
  readonly stats: Record<string, RatioStat>;
}

export interface HttpScenario {
  readonly connections: number;
  readonly rows: HttpRow[];
}

export interface HttpBenchReport {
  readonly benchmark: "http";
  readonly date: string;
  readonly machine: MachineInfo;
  readonly options: Omit<HttpBenchOptions, "log">;
  readonly scenarios: HttpScenario[];
  /** Where the servers and the load generator ran: `"servers on core 0, autocannon on core 1 (taskset)"`, or why not pinned. */
  readonly placement?: string;
  readonly summary: { readonly pass: number; readonly miss: number; readonly misses: string[] };
}

interface Server {
  readonly name: string;
  readonly port: number;
  readonly child: ChildProcess;
  cpuUs(): Promise<number>;
  stop(): Promise<void>;
}

const SERVER_ENTRY = new URL("./http-server.ts", import.meta.url);

/** Starts one contender's server from the bundle; resolves once it listens. */
function startServer(bundle: string, name: string, options: object): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundle, name, JSON.stringify(options)], { stdio: ["pipe", "pipe", "pipe", "ipc"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += String(chunk);
    });
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const fail = (why: string) => reject(new Error(`HTTP server ${JSON.stringify(name)} ${why}\n${stderr}`));
    child.once("exit", (code) => fail(`exited with ${code} before listening`));
    child.once("error", (error) => fail(error.message));
    lines.once("line", (line) => {
      child.removeAllListeners("exit");
      const { port } = JSON.parse(line) as { port: number };
      const exited = new Promise<void>((done) => child.once("exit", () => done()));
      resolve({
        name,
        port,
        child,
        cpuUs: () =>
          new Promise((done) => {
            child.once("message", (m: { cpu: NodeJS.CpuUsage }) => done(m.cpu.user + m.cpu.system));
            child.send("cpu");
          }),
        stop: async () => {
          child.stdin?.end();
          const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
          await exited;
          clearTimeout(timer);
        },
      });
    });
  });
}

interface Run {
  rps: number;
  p99: number;
  cpuUs: number;
  codes: Record<string, number>;
}

/** The length of the bins a run's throughput is taken over, and the start-up left out before the first, in ms. */
export const BIN_MS = 50;
export const SKIP_MS = 100;

/**
 * A run's throughput, robust to a burst of other work: the responses counted in consecutive
 * {@link BIN_MS} bins from {@link SKIP_MS} after the start (connections opened, the first requests
 * answered) to the last response, and the median bin's rate (responses per second). A burst that
 * takes the core for a few ms slows one or two bins; the median bin is the run's steady rate. On
 * this machine a 0.4 s run's whole-run rate varied ±8% between identical servers, its median bin
 * ±4%. `times` are response times (ms, ascending); NaN when the run is shorter than one bin.
 *
 * @example
 * ```ts
 * medianBinRate([0, 110, 120, 160, 170, 180, 220], 0); // bins [100,150) 2, [150,200) 3: (2+3)/2 per 50 ms = 50 per second
 * ```
 */
export function medianBinRate(times: ArrayLike<number>, startMs: number, binMs = BIN_MS, skipMs = SKIP_MS): number {
  const from = startMs + skipMs;
  const to = times.length === 0 ? from : (times[times.length - 1] as number);
  const bins: number[] = [];
  let i = 0;
  while (i < times.length && (times[i] as number) < from) i++;
  for (let b = from; b + binMs <= to; b += binMs) {
    let n = 0;
    while (i < times.length && (times[i] as number) < b + binMs) {
      n++;
      i++;
    }
    bins.push((n * 1000) / binMs);
  }
  return bins.length === 0 ? NaN : median(bins);
}

/** One autocannon run; every response's latency (ms, fractional) and time (ms, `performance.now`) is recorded here, 429s included. */
function cannon(port: number, connections: number, seconds: number): Promise<{ result: autocannon.Result; latencies: Float64Array; times: Float64Array; startMs: number }> {
  return new Promise((resolve, reject) => {
    let latencies = new Float64Array(1 << 16);
    let times = new Float64Array(1 << 16);
    let n = 0;
    const startMs = performance.now();
    const instance = autocannon(
      // sampleInt: autocannon stops at the first sample tick after `duration`; with its default
      // tick (1 s) a shorter run lasts a whole second anyway, so the tick is 100 ms
      { url: `http://127.0.0.1:${port}/`, connections, duration: seconds, sampleInt: 100, headers: { "x-api-key": "bench" } },
      (error, result) => (error ? reject(error) : resolve({ result, latencies: latencies.subarray(0, n), times: times.subarray(0, n), startMs })),
    );
    instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
      if (n === latencies.length) {
        const grown = new Float64Array(n * 2);
        grown.set(latencies);
        latencies = grown;
        const grownTimes = new Float64Array(n * 2);
        grownTimes.set(times);
        times = grownTimes;
      }
      times[n] = performance.now();
      latencies[n++] = responseTime;
    });
  });
}

/** The p-th percentile (0 < p < 1) of a list of latencies (sorts it in place). */
export function percentile(values: Float64Array, p: number): number {
  if (values.length === 0) return NaN;
  values.sort();
  return values[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)] as number;
}

/** One autocannon run against `server`, with its CPU time read around it; checks every answer. */
async function measure(server: Server, connections: number, seconds: number): Promise<Run> {
  const before = await server.cpuUs();
  const { result: r, latencies, times, startMs } = await cannon(server.port, connections, seconds);
  const after = await server.cpuUs();
  const total = r.requests.total;
  const codes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries((r as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {})) {
    codes[code] = count;
  }
  if (r.errors > 0 || r.timeouts > 0 || total === 0) {
    throw new Error(`${server.name}: ${r.errors} errors, ${r.timeouts} timeouts, ${total} requests in ${seconds} s`);
  }
  // every answer must be what the scenario is about: 200s, or 429s for the denying contender
  const expected = DENYING.has(server.name) ? "429" : "200";
  const others = Object.entries(codes).filter(([code]) => code !== expected).reduce((n, [, c]) => n + c, 0);
  const allowedOthers = DENYING.has(server.name) ? 100 : 0; // the denying app's quota lets its first requests through
  if (others > allowedOthers) throw new Error(`${server.name}: ${others} answers were not ${expected}: ${JSON.stringify(codes)}`);
  const steady = medianBinRate(times, startMs);
  return { rps: Number.isFinite(steady) ? steady : total / r.duration, p99: percentile(latencies, 0.99), cpuUs: (after - before) / total, codes };
}

/** The mean of some runs' figures (status codes summed). */
function averageRuns(list: readonly Run[]): Run {
  const codes: Record<string, number> = {};
  for (const r of list) for (const [code, n] of Object.entries(r.codes)) codes[code] = (codes[code] ?? 0) + n;
  const avg = (f: (r: Run) => number) => list.reduce((sum, r) => sum + f(r), 0) / list.length;
  return { rps: avg((r) => r.rps), p99: avg((r) => r.p99), cpuUs: avg((r) => r.cpuUs), codes };
}

/** The mean of two runs. */
function meanRun(a: Run, b: Run): Run {
  return averageRuns([a, b]);
}

/** Runs every contender in every scenario and returns every number. */
export async function runHttpBench(options: HttpBenchOptions = DEFAULT_HTTP_OPTIONS): Promise<HttpBenchReport> {
  const log = options.log ?? (() => {});
  const machine = machineInfo();
  const names = [BARE, ...(options.contenders ?? HTTP_CONTENDERS).filter((n) => n !== BARE)];
  for (const name of names) {
    if (!(HTTP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown HTTP contender ${JSON.stringify(name)}`);
  }
  const bundle = await bundleEntry(SERVER_ENTRY, "http-server");
  const redis = names.some((n) => NEEDS_REDIS.has(n)) ? await startRedisServer() : undefined;
  // two server processes per app, used in alternate rounds: what differs between two processes of
  // the same app (how V8 compiled each) shows in the spread rather than between two runs
  const servers: Server[][] = [];
  const scenarios: HttpScenario[] = [];
  let placement = "not pinned";
  let pinnedSelf = false;
  try {
    for (const name of names) {
      const options2 = redis === undefined ? {} : { redisUrl: redis.url };
      servers.push([await startServer(bundle, name, options2), await startServer(bundle, name, options2)]);
    }
    if (options.pin === true) {
      // the servers on core 0 (the Redis server too, for the Redis-backed app), the load generator on core 1
      const why = cannotPin();
      const pids = [...servers.flat().map((s) => s.child.pid as number), ...(redis?.pid !== undefined ? [redis.pid] : [])];
      const failed = why ?? pids.map((pid) => pin(pid, 0)).find((f) => f !== undefined) ?? pin(process.pid, 1);
      if (failed === undefined) {
        placement = "servers on core 0, autocannon on core 1 (taskset)";
        pinnedSelf = true;
      } else placement = `not pinned: ${failed}`;
    }
    log(`HTTP: ${placement}`);
    for (const connections of options.connections) {
      log(`HTTP: ${names.length} apps (2 processes each), ${connections} connections, ${options.rounds} rounds of ${options.roundSeconds} s (load ${loadAvgNow()}) ...`);
      const warmup = scenarios.length === 0 ? (options.firstWarmupSeconds ?? options.warmupSeconds) : options.warmupSeconds;
      for (const pair of servers) for (const server of pair) await measure(server, connections, warmup);
      // each round: bare, A, bare, B, bare, … , bare — every app's figure is compared with the
      // bare app's runs just before and just after it (the others' order rotating by round)
      const runs: Run[][] = servers.map(() => []);
      const bareAround: Run[][] = servers.map(() => []);
      const settledNow = () =>
        servers.every((_, i) => i === 0 || ratioStat(perRoundRatios((runs[i] as Run[]).map((r) => r.rps), (bareAround[i] as Run[]).map((r) => r.rps))).stable);
      const maxRounds = Math.max(options.rounds, options.maxRounds ?? options.rounds);
      let deadline = Infinity;
      for (let round = 0; round < maxRounds; round++) {
        if (round === options.rounds) deadline = performance.now() + (options.extraSeconds ?? 0) * 1000;
        if (round >= options.rounds && (settledNow() || performance.now() >= deadline)) break;
        const at = (i: number) => (servers[i] as Server[])[round % 2] as Server;
        const bare = at(0);
        const roundBare: Run[] = [];
        let before = await measure(bare, connections, options.roundSeconds);
        roundBare.push(before);
        for (let k = 1; k < servers.length; k++) {
          const i = 1 + ((round + k - 1) % (servers.length - 1));
          const run = await measure(at(i), connections, options.roundSeconds);
          const after = await measure(bare, connections, options.roundSeconds);
          roundBare.push(after);
          (runs[i] as Run[]).push(run);
          (bareAround[i] as Run[]).push(meanRun(before, after));
          before = after;
        }
        const bareMean = averageRuns(roundBare);
        (runs[0] as Run[]).push(bareMean);
        (bareAround[0] as Run[]).push(bareMean);
      }
      scenarios.push(scenarioReport(connections, names, runs, bareAround));
    }
  } finally {
    if (pinnedSelf) pin(process.pid, allCores());
    await Promise.all(servers.flat().map((s) => s.stop()));
    await redis?.stop();
  }
  const misses: string[] = [];
  let pass = 0;
  for (const s of scenarios) {
    for (const row of s.rows) {
      for (const t of row.targets) {
        if (t.pass) pass++;
        else misses.push(`${s.connections} connections: ${row.name} is ${t.value.toFixed(2)}x ${t.against} (target ${t.op} ${t.bound}x)`);
      }
    }
  }
  const { log: _log, ...recorded } = options;
  return {
    benchmark: "http",
    date: new Date().toISOString(),
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    options: recorded,
    scenarios,
    placement,
    summary: { pass, miss: misses.length, misses },
  };
}

function scenarioReport(connections: number, names: readonly string[], runs: readonly Run[][], bareAround: readonly Run[][]): HttpScenario {
  const pick = (rs: readonly Run[], f: (r: Run) => number) => rs.map(f);
  // per-round ratios to the bare app's runs around each run
  const vsBare = (i: number, f: (r: Run) => number) => perRoundRatios(pick(runs[i] as Run[], f), pick(bareAround[i] as Run[], f));
  const rows = names.map((name, i): HttpRow => {
    const rs = runs[i] as Run[];
    const rpsRatios = vsBare(i, (r) => r.rps);
    const rpsVsBare = i === 0 ? ratioStat(rs.map(() => 1)) : ratioStat(rpsRatios);
    const stats: Record<string, RatioStat> = {};
    const targets: Target[] = [];
    if (name === SLUICE_DEFAULT) targets.push(target(BARE, ">=", TARGETS.vsBare, rpsVsBare.median));
    if (VS_HONO_RATE_LIMITER.has(name)) {
      for (const [peer, bound] of [
        [HONO_RATE_LIMITER, TARGETS.vsHonoRateLimiter],
        [HONO_RATE_LIMITER_SAME, TARGETS.vsSameHeaders],
      ] as const) {
        const p = names.indexOf(peer);
        if (p < 0) continue;
        // each one's ratio to its own neighbouring bare runs, divided round by round
        const vs = ratioStat(perRoundRatios(rpsRatios, vsBare(p, (r) => r.rps)));
        stats[`vs ${peer}`] = vs;
        if (name === SLUICE_DEFAULT) targets.push(target(peer, ">=", bound, vs.median));
      }
    }
    const statusCodes: Record<string, number> = {};
    for (const r of rs) for (const [code, n] of Object.entries(r.codes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
    return {
      name,
      roundRps: pick(rs, (r) => r.rps),
      roundP99: pick(rs, (r) => r.p99),
      roundCpuUs: pick(rs, (r) => r.cpuUs),
      rps: median(pick(rs, (r) => r.rps)),
      p99Ms: median(pick(rs, (r) => r.p99)),
      cpuUsPerRequest: median(pick(rs, (r) => r.cpuUs)),
      rpsVsBare,
      cpuVsBare: i === 0 ? rpsVsBare : ratioStat(vsBare(i, (r) => r.cpuUs)),
      statusCodes,
      targets,
      stats,
    };
  });
  return { connections, rows };
}

/** The report as printed. */
export function formatHttpReport(report: HttpBenchReport): string {
  const m = report.machine;
  const o = report.options;
  const out: string[] = [
    "# HTTP: a Hono app on @hono/node-server, autocannon on loopback",
    "",
    `Node ${m.node}, ${m.cores} × ${m.cpu}; 1-minute load average ${m.loadAvgStart} at start, ${m.loadAvgEnd ?? "?"} at end.`,
    `Each app in its own process; autocannon in the bench process. ${o.rounds} rounds of ${o.roundSeconds} s per app and scenario,`,
    "interleaved (more while a ratio is unstable); ratios are medians of per-round ratios to the bare app (95% interval of the median); an interval beyond ±5% prints as unstable.",
    "",
  ];
  for (const s of report.scenarios) out.push(`## ${s.connections} connections`, "", httpTable(s), "");
  out.push(...summaryLines(report.summary));
  return out.join("\n");
}

/** One scenario's table. */
export function httpTable(s: HttpScenario): string {
  return markdownTable(
    ["app", "req/s", "÷ bare app", "p99 ms", "server CPU µs/req", "÷ bare", "target"],
    s.rows.map((r) => [
      r.name,
      r.rps.toFixed(0),
      r.name === BARE ? "1" : formatStat(r.rpsVsBare),
      r.p99Ms.toFixed(2),
      r.cpuUsPerRequest.toFixed(1),
      r.name === BARE ? "1" : formatStat(r.cpuVsBare),
      [
        ...r.targets.map((t) => `${verdict(t)} ${t.against === BARE ? "vs bare" : `vs ${t.against}: ${formatStat(r.stats[`vs ${t.against}`] as RatioStat)}`}`),
        ...Object.entries(r.stats)
          .filter(([against]) => !r.targets.some((t) => `vs ${t.against}` === against))
          .map(([against, stat]) => `${against}: ${formatStat(stat)}`),
      ].join("; "),
    ]),
    ["l", "r", "r", "r", "r", "r", "l"],
  );
}

/** Where `bench:http` writes its figures. */
export const RESULTS_FILE = new URL("../results/http.json", import.meta.url);

await runIfMain(import.meta.url, RESULTS_FILE, (log) => runHttpBench({ ...DEFAULT_HTTP_OPTIONS, log }), formatHttpReport);
