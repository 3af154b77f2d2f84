/**
 * What `pnpm bench` publishes: every ratio of a run as a flat list of {@link Figure}s (the JSON for
 * machines, and what the next run compares itself with), `docs/benchmarks.md` (the tables, the
 * machine, Node, the date, the load, the command to reproduce, the targets) and
 * `docs/benchmarks.svg` (a bar chart of the headline ratios, drawn by hand: no chart library).
 *
 * @module
 */
import type { DoBenchReport } from "./durable-object.js";
import { CEILING as DO_CEILING } from "./durable-object.js";
import { BARE, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME, SLUICE_DEFAULT, SLUICE_DENIED, SLUICE_IETF, STATIC_HEADERS } from "./http-apps.js";
import type { HttpBenchReport } from "./http.js";
import { formatRate, markdownTable, type MachineInfo, type Target } from "./lib/report.js";
import { type RatioStat, STABLE_SPREAD, agrees, formatStat } from "./lib/stats.js";
import type { MemoryBenchReport } from "./memory.js";
import { CLOCK_FLOOR, FLOOR, RLF } from "./memory-contenders.js";
import { type RedisBenchReport, coldBurstSection } from "./redis.js";
import { type RedisCostReport, costRatioTable, costTable } from "./redis-cost.js";
import { APP_SCENARIO, type AppCostReport, appRatioTable, appTable } from "./app-cost.js";
import { CEILING_SCRIPT as COST_CEILING_SCRIPT } from "./redis-cost-contenders.js";
import { CEILING as REDIS_CEILING, RLF as REDIS_RLF } from "./redis-contenders.js";
import type { ReservationsReport } from "./reservations.js";
import { admittedTable, coldTable, latencyTable, methodLines, specTitle, storeCallsTable } from "./reservations-report.js";

/** Everything one `pnpm bench` run measured. */
export interface BenchRun {
  readonly date: string;
  readonly command: string;
  readonly machine: MachineInfo;
  readonly durationS: number;
  /** Inside Redis: script time, server CPU and commands per decision. */
  readonly redisCost?: RedisCostReport;
  /** Inside the app: the middleware's own cost per request, in process. */
  readonly app?: AppCostReport;
  readonly memory?: MemoryBenchReport;
  readonly redis?: RedisBenchReport;
  readonly http?: HttpBenchReport;
  readonly durableObject?: DoBenchReport;
  /** Reservations: store calls, latency far away, admitted at 120%, a cold key's cost. */
  readonly reservations?: ReservationsReport;
}

/** One published ratio. */
export interface Figure {
  /** Stable across runs: `section / scenario / contender / against`. */
  readonly id: string;
  readonly section: "redis-cost" | "app" | "http" | "memory" | "redis" | "durable-object" | "reservations";
  readonly scenario: string;
  readonly contender: string;
  readonly against: string;
  readonly stat: RatioStat;
  /** The target this ratio is reported against (met or missed), if it has one. */
  readonly target?: Target;
  /** Drawn in the chart. */
  readonly headline: boolean;
}

/** A figure with the previous run's value of the same id. */
export interface ComparedFigure extends Figure {
  readonly previous?: RatioStat;
  /** Both runs stable and within ±5% of each other. */
  readonly agrees: boolean;
  /**
   * Stable in at least one of the two runs, and the two medians within ±5% of each other: what
   * a reader who reruns the bench gets for a figure one run printed as stable. `undefined` when
   * neither run printed it as stable (or there is no previous run).
   */
  readonly reproduced?: boolean;
}

function fig(section: Figure["section"], scenario: string, contender: string, against: string, stat: RatioStat, headline: boolean, t?: Target): Figure {
  return { id: `${section} / ${scenario} / ${contender} / ${against}`, section, scenario, contender, against, stat, headline, ...(t ? { target: t } : {}) };
}

/** The cold burst's figure: its time over the warm burst's (lower is better). */
const COLD_BURST_SCENARIO = "cold burst (one node)";
const COLD_BURST = "3,200 decisions after SCRIPT FLUSH";
const WARM_BURST = "the same burst warm";

/** The scenario of every in-Redis figure. */
export const REDIS_COST_SCENARIO = "Redis time per decision";

const HEADLINE_MEMORY = new Set(["tokenBucket", "fixedWindow", "slidingWindow"]);
const HEADLINE_HTTP = new Set([
  "no-op async middleware",
  STATIC_HEADERS,
  SLUICE_IETF,
  "@sluice/hono, IETF + legacy headers",
  "@sluice/hono, headers off",
  HONO_RATE_LIMITER,
  HONO_RATE_LIMITER_SAME,
  "@sluice/hono + RedisStore, IETF headers",
]);

/** Every ratio of a run, in report order. */
export function figures(run: BenchRun): Figure[] {
  const out: Figure[] = [];
  if (run.redisCost !== undefined) {
    for (const r of run.redisCost.ratios) out.push(fig("redis-cost", REDIS_COST_SCENARIO, r.contender, r.against, r.stat, r.target !== undefined, r.target));
  }
  if (run.app !== undefined) {
    for (const r of run.app.ratios) {
      const headline = r.contender === SLUICE_DEFAULT || r.contender === SLUICE_IETF || r.contender === SLUICE_DENIED;
      out.push(fig("app", APP_SCENARIO, r.contender, r.against, r.stat, headline, r.target));
    }
  }
  if (run.http !== undefined) {
    for (const s of run.http.scenarios) {
      const scenario = `${s.connections} connections`;
      for (const r of s.rows) {
        if (r.name === BARE) continue;
        const target = r.targets.find((t) => t.against === BARE);
        out.push(fig("http", scenario, r.name, "bare app req/s", r.rpsVsBare, HEADLINE_HTTP.has(r.name), target));
        out.push(fig("http", scenario, r.name, "bare app server CPU/request", r.cpuVsBare, HEADLINE_HTTP.has(r.name)));
        for (const peer of [HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME]) {
          const vs = r.stats[`vs ${peer}`];
          if (vs !== undefined) out.push(fig("http", scenario, r.name, `${peer} req/s`, vs, false, r.targets.find((t) => t.against === peer)));
        }
      }
    }
  }
  if (run.memory !== undefined) {
    for (const s of run.memory.scenarios) {
      for (const r of s.rows) {
        if (r.name === RLF) {
          out.push(fig("memory", s.title, r.name, FLOOR, r.stats.vsFloor, false));
          continue;
        }
        if (r.name === FLOOR || r.name === CLOCK_FLOOR) continue;
        const [vsRlf, vsFloor] = r.targets;
        out.push(fig("memory", s.title, r.name, RLF, r.stats.vsRlf, HEADLINE_MEMORY.has(r.name), vsRlf));
        out.push(fig("memory", s.title, r.name, FLOOR, r.stats.vsFloor, false, vsFloor));
      }
    }
  }
  if (run.redis !== undefined) {
    for (const s of run.redis.scenarios) {
      const scenario = s.keys === 1 ? "1 key" : `${s.keys.toLocaleString("en-US")} keys`;
      for (const r of s.rows) {
        if (r.name === REDIS_CEILING) continue;
        const [vsCeiling, vsRlf] = r.targets;
        out.push(fig("redis", scenario, r.name, REDIS_CEILING, r.stats.vsCeiling, true, vsCeiling));
        if (r.name !== REDIS_RLF) out.push(fig("redis", scenario, r.name, REDIS_RLF, r.stats.vsRlf, false, vsRlf));
      }
    }
  }
  if (run.redis?.coldBurst !== undefined) {
    const c = run.redis.coldBurst;
    out.push(fig("redis", COLD_BURST_SCENARIO, COLD_BURST, WARM_BURST, c.stat, true, c.targets[0]));
  }
  if (run.durableObject !== undefined) {
    for (const s of run.durableObject.scenarios) {
      for (const r of s.rows) if (r.name !== DO_CEILING) out.push(fig("durable-object", s.title, r.name, DO_CEILING, r.vsCeiling, true, r.targets[0]));
    }
  }
  if (run.reservations !== undefined) {
    // a cold key's time per decision, reserve on ÷ off: the one figure of the section that is a ratio of rounds
    for (const r of run.reservations.cold) out.push(fig("reservations", `cold key, ${r.store}`, "reserve on", "reserve off (time per decision)", r.cost, false, r.target));
  }
  return out;
}

/**
 * A previous run's figure as this version reads it. A figure written before the interval of the
 * median existed (no `low`/`high`: its stability was decided by another rule, every round within
 * ±10%) keeps its median and shows its min–max, but counts as unstable: it was never shown stable
 * by the rule this run applies.
 */
export function previousFigure(f: Figure): Figure {
  const s = f.stat as Partial<RatioStat> & Pick<RatioStat, "median" | "min" | "max" | "rounds">;
  if (typeof s.low === "number" && typeof s.high === "number") return f;
  return { ...f, stat: { median: s.median, low: s.min, high: s.max, confidence: 0, min: s.min, max: s.max, rounds: s.rounds, stable: false } };
}

/** The figures of `run` beside those of the previous run (matched by id). */
export function compare(current: readonly Figure[], previous: readonly Figure[] | undefined): ComparedFigure[] {
  const before = new Map((previous ?? []).map((f) => [f.id, previousFigure(f).stat]));
  return current.map((f) => {
    const prev = before.get(f.id);
    const either = prev !== undefined && (prev.stable || f.stat.stable);
    return {
      ...f,
      ...(prev ? { previous: prev } : {}),
      agrees: agrees(prev, f.stat),
      ...(either ? { reproduced: Math.abs(f.stat.median / prev.median - 1) <= STABLE_SPREAD } : {}),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// markdown

function loadLine(label: string, m: MachineInfo | undefined): string {
  return m === undefined ? "" : `${label} ${m.loadAvgStart} → ${m.loadAvgEnd ?? "?"}`;
}

function verdictCell(t: Target | undefined, stat: RatioStat): string {
  if (t === undefined) return "";
  const sym = t.op === ">=" ? "≥" : t.op === ">" ? ">" : t.op === "<=" ? "≤" : t.op;
  const status = !stat.stable ? "unstable" : t.pass ? "met" : "missed";
  return `${status} (${sym} ${t.bound}×)`;
}

function medianText(s: RatioStat): string {
  return `${s.median.toFixed(s.median >= 10 ? 0 : 2)}×`;
}

function prevCell(f: ComparedFigure | undefined): string {
  if (f === undefined || f.previous === undefined) return "–";
  return `${formatStat(f.previous)}${f.agrees ? " ✓" : ""}`;
}

/**
 * A note when the previous run was made on another machine (CPU model, cores or Node version):
 * its figures are still shown beside this run's, but a ratio need not carry over between machines.
 */
function otherMachine(m: MachineInfo, previous: MachineInfo | undefined): string {
  if (previous === undefined || (previous.cpu === m.cpu && previous.cores === m.cores && previous.node === m.node)) return "";
  return ` The previous run was on another machine (${previous.cores} × ${previous.cpu}, Node ${previous.node}), so its ratios need not carry over to this one.`;
}

/** `docs/benchmarks.md`. */
export function benchmarksMarkdown(run: BenchRun, figs: readonly ComparedFigure[], previousDate: string | undefined, previousMachine?: MachineInfo): string {
  const byId = new Map(figs.map((f) => [f.id, f]));
  const get = (section: Figure["section"], scenario: string, contender: string, against: string) => byId.get(`${section} / ${scenario} / ${contender} / ${against}`);
  const m = run.machine;
  const stable = figs.filter((f) => f.stat.stable);
  const agreeing = figs.filter((f) => f.agrees);
  const compared = figs.filter((f) => f.previous !== undefined && f.previous.stable && f.stat.stable);
  const either = figs.filter((f) => f.reproduced !== undefined);
  const notReproduced = either.filter((f) => f.reproduced === false);
  const out: string[] = [
    "# Benchmarks",
    "",
    "Written by `pnpm bench` (apps/bench); do not edit by hand. Figures are **ratios measured in the same run**: every",
    "comparison runs its contenders in alternating short rounds in one process (ABAB…, the starting contender rotating,",
    "at least 7 rounds after a warm-up), and a ratio is the **median of the per-round ratios**, shown with a",
    "distribution-free 95% confidence interval of that median (two order statistics of the rounds: for 14 rounds the 3rd",
    `and 12th). A ratio is **stable** when that interval lies within ±${STABLE_SPREAD * 100}% of its median; while one is not, the bench adds rounds`,
    "(within each section's time budget). An unstable ratio is printed as such, with its interval, and is not a figure to quote.",
    `The previous run's value stands beside each ratio; ✓ marks a ratio stable in both runs and within ±${STABLE_SPREAD * 100}% of it.`,
    "",
    `- Date: ${run.date}; the whole run took ${Math.round(run.durationS)} s.`,
    `- Machine: ${m.cores} × ${m.cpu}, Node ${m.node}; shared with other work, so the 1-minute load average is recorded: ${[
      loadLine("whole run", m),
      loadLine("in Redis", run.redisCost?.machine),
      loadLine("in the app", run.app?.machine),
      loadLine("HTTP", run.http?.machine),
      loadLine("memory", run.memory?.machine),
      loadLine("Redis", run.redis?.machine),
      loadLine("Durable Object", run.durableObject?.machine),
      loadLine("reservations", run.reservations?.machine),
    ]
      .filter(Boolean)
      .join("; ")}.`,
    `- Reproduce: \`${run.command}\` from a clone, after \`pnpm install\`, with \`redis-server\` on the PATH (the bench starts its own on a free port and never touches another Redis). \`pnpm -s bench --json\` prints every figure as JSON.`,
    `- Stability: ${stable.length} of ${figs.length} ratios stable in this run; ${
      previousDate === undefined
        ? "no previous run to compare with"
        : `${agreeing.length} of the ${compared.length} stable in both this run and the previous one (${previousDate}) agree within ±5% (✓); of the ${either.length} stable in either run, ${
            either.length - notReproduced.length
          } came out within ±5% of the other run's median${notReproduced.length === 0 ? "" : ` and ${notReproduced.length} did not: ${notReproduced.map((f) => `${f.id} (${formatStat(f.previous as RatioStat)} then ${formatStat(f.stat)}, medians ${medianText(f.previous as RatioStat)} then ${medianText(f.stat)})`).join("; ")}`}`
    }.${otherMachine(m, previousMachine)}`,
    "",
  ];

  if (run.redisCost !== undefined) {
    const c = run.redisCost;
    out.push(
      "## Inside Redis: time per decision",
      "",
      "What a decision costs Redis — the figure a Redis bill goes by — for every Sluice algorithm, the three-limit tier",
      "(token bucket + sliding window per minute + fixed window per day), a denial (deny cache off, so Redis decides it) and",
      "a refund, beside rate-limiter-flexible's `RateLimiterRedis` (`consume`, a denied `consume`, `reward`), `@upstash/ratelimit` 2",
      `(\`@upstash/redis\` through the Upstash-REST bridge of \`@sluice/testing\`) and a ceiling script (\`${COST_CEILING_SCRIPT}\`).`,
      `One private redis-server ${c.server.version}, ${c.server.placement}; the clients in one process, ${c.client}. Each round runs`,
      `every contender's ${c.options.decisionsPerRound.toLocaleString("en-US")} decisions in turn (${c.options.inFlight} in flight, over ${c.options.keyCount.toLocaleString("en-US")} keys; the order rotating), in ${c.options.parts ?? 1} part(s), each with`,
      "a full collection of Redis's Lua heap first (the heap is shared by every script: without it a contender paid for the",
      "garbage of the one before, which had made `@upstash/ratelimit`'s scripts look a third dearer), then `CONFIG RESETSTAT`",
      "before and `INFO commandstats` / `INFO cpu` after, outside any client timing. **Script µs**: the `usec` of `EVALSHA`/`EVAL`,",
      "the time Redis's one thread spent in the contender's scripts (the commands they call included), the median part's",
      "in each round (a burst of other work on Redis's core during one part moves nothing): the ratios below are of this",
      "figure, round by round, lower is cheaper. **redis-server CPU µs**: the scripts plus reading and answering the",
      "requests (an HTTP-bridged client's requests arrive pipelined, so this part is not comparable between the two kinds).",
      "The sliding log has a 100 ms window, shorter than the time between two calls on a key: its figure is a log's fixed",
      "cost per decision, and each entry a key holds adds to it.",
      `${c.rows[0]?.rounds ?? 0} rounds${c.settled ? "; every ratio was stable when they stopped." : `; not every ratio was stable when the ${Math.round(c.options.budgetMs / 1000)} s budget for added rounds ran out.`}`,
      "",
      costRatioTable(c, (r) => prevCell(get("redis-cost", REDIS_COST_SCENARIO, r.contender, r.against))),
      "",
      costTable(c),
      "",
    );
  }

  if (run.app !== undefined) {
    const a = run.app;
    out.push(
      "## Inside the app: the middleware's own cost per request",
      "",
      "The Hono apps of the HTTP section driven in process by `app.fetch(request)` in a loop — no socket, no HTTP parser,",
      "no load generator sharing the cores; one process per app, each slice timed by the app's own process — so what",
      "differs is the middleware's own work per request, its headers",
      "written through Hono included: `@sluice/hono` (memory store, fixed window, its default IETF + legacy headers) beside",
      "a no-op `async` middleware, the no-op writing those five headers as constants (the least a middleware writing them",
      "through `c.header()` can cost), the bare app and hono-rate-limiter (its `MemoryStore`) twice, with its draft-6 headers",
      "and wrapped to write the same header set; every request allowed, and",
      "every request denied (a quota of 100 per day, spent first: the 429 and its body each time). Ratios are of **time",
      "per request**, lower is cheaper; a middleware's **own cost** is its time less the bare app's in the same round.",
      `${a.rows[0]?.rounds ?? 0} rounds of ~${a.options.targetRoundMs} ms pooled over ${a.options.processes ?? 1} pass(es) with fresh processes${a.settled ? "" : "; not every ratio was stable when the time budget ran out"}.`,
      "",
      appRatioTable(a, (r) => prevCell(get("app", APP_SCENARIO, r.contender, r.against))),
      "",
      appTable(a),
      "",
    );
  }

  if (run.http !== undefined) {
    out.push(
      "## HTTP: requests per second through Hono",
      "",
      "One Hono app on `@hono/node-server` per contender, each in its own Node process (bundled like the published",
      "build), all serving `GET /` with a 2-byte text body; autocannon in the bench process on loopback, with 10 and 100",
      "connections, every request carrying the same `x-api-key` (the limiters' key). On 2 cores the server and the load",
      "generator each get about one core, so req/s ratios include the load generator's own cost per response (it parses",
      "the extra header bytes too); the server's CPU time per request, read around each round, is beside them. Limits",
      "never run out except in the \"most denied\" app (100 per day, then 429s). Every limiter writes its headers through",
      "Hono's `c.header()` (a Fetch `Headers` object per response, which `@hono/node-server` converts again); \"no-op + the",
      "5 default headers, static\" writes `@sluice/hono`'s default fields with constant values that way and nothing else: the",
      "least any middleware writing them through Hono can cost. hono-rate-limiter runs as its users configure it (draft-6)",
      "and wrapped to write `@sluice/hono`'s default header set. A run's req/s is its median 50 ms bin after the first 100 ms, so a burst of other work that stalls",
      "a bin or two moves nothing. p99 is given in ms for",
      "information, not as a ratio: a tail over 0.4 s runs on a shared machine moved by half from run to run.",
      "`pnpm --filter @sluice/bench profile:http [app]` profiles one app's server.",
      "",
    );
    for (const s of run.http.scenarios) {
      const scenario = `${s.connections} connections`;
      out.push(
        `### ${scenario}`,
        "",
        markdownTable(
          ["app", "req/s", "÷ bare app", "previous run", "p99 ms", "server CPU µs/req", "÷ bare", "target"],
          s.rows.map((r) => {
            const f = get("http", scenario, r.name, "bare app req/s");
            const vsPeers = [HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME].map((peer) => [peer, get("http", scenario, r.name, `${peer} req/s`)] as const);
            const targets = [
              f?.target ? `${verdictCell(f.target, f.stat)} vs bare` : "",
              ...vsPeers.map(([peer, vs]) => (vs === undefined ? "" : `${vs.target ? `${verdictCell(vs.target, vs.stat)} ` : ""}vs ${peer}: ${formatStat(vs.stat)}`)),
            ].filter(Boolean);
            return [
              r.name,
              r.rps.toFixed(0),
              r.name === BARE ? "1" : formatStat(r.rpsVsBare),
              r.name === BARE ? "" : prevCell(f),
              r.p99Ms.toFixed(2),
              r.cpuUsPerRequest.toFixed(1),
              r.name === BARE ? "1" : formatStat(r.cpuVsBare),
              targets.join("; "),
            ];
          }),
          ["l", "r", "r", "r", "r", "r", "r", "l"],
        ),
        "",
      );
    }
  }

  if (run.memory !== undefined) {
    const mem = run.memory;
    out.push(
      "## In memory: decisions per second",
      "",
      `Sequential awaited decisions (\`await limiter.limit(key)\` in a loop). Each Sluice algorithm runs in its own Node`,
      `process beside ${RLF} \`RateLimiterMemory\`, a naive floor (an async \`Map\` of one integer) and the floor plus one`,
      "`Date.now()`; express-rate-limit's and hono-rate-limiter's `MemoryStore`s (fixed windows) run in the fixedWindow",
      `process, \`limiter\` (a token bucket per key in a \`Map\`) in the tokenBucket one. ${mem.options.rounds} rounds of ~${mem.options.targetRoundMs} ms`,
      `in each of ${mem.options.processes ?? 1} such process(es) per algorithm, their rounds pooled (the baseline rows pool every process).`,
      "",
    );
    for (const s of mem.scenarios) {
      out.push(
        `### ${s.title}`,
        "",
        markdownTable(
          ["contender", "decisions/s", `÷ ${RLF}`, "previous run", "÷ naive floor", "target"],
          s.rows
            .filter((r) => r.name !== CLOCK_FLOOR)
            .map((r) => {
              const f = get("memory", s.title, r.name, RLF);
              const fl = get("memory", s.title, r.name, FLOOR);
              return [
                r.name,
                formatRate(r.opsPerSec),
                r.name === RLF ? "1" : formatStat(r.stats.vsRlf),
                r.name === RLF || r.name === FLOOR ? "" : prevCell(f),
                r.name === FLOOR ? "1" : formatStat(r.stats.vsFloor),
                [f?.target ? `${verdictCell(f.target, f.stat)} vs ${RLF}` : "", fl?.target ? `${verdictCell(fl.target, fl.stat)} vs floor` : ""].filter(Boolean).join("; "),
              ];
            }),
          ["l", "r", "r", "r", "r", "l"],
        ),
        "",
      );
    }
    out.push(
      `### Bytes per idle key (${mem.options.heapKeys.toLocaleString("en-US")} keys, V8 heap + ArrayBuffers after a full GC, each in its own process)`,
      "",
      markdownTable(
        ["contender", "bytes/key", "target"],
        mem.memory.map((r) => [r.subject, r.bytesPerKey.toFixed(1), r.targets[0] ? `${r.targets[0].pass ? "met" : "missed"} (≤ ${r.targets[0].bound} B)` : ""]),
        ["l", "r", "l"],
      ),
      "",
    );
  }

  if (run.redis !== undefined) {
    const r = run.redis;
    out.push(
      "## Redis: decisions per second over TCP",
      "",
      `One private redis-server ${r.server.version} (no persistence) started by the run; ioredis, auto-pipelining off, one`,
      `connection per contender, ${r.options.inFlight} callers in flight each awaiting one decision at a time; ${r.options.rounds} interleaved rounds of`,
      `~${r.options.targetRoundMs} ms in each of ${r.options.processes ?? 1} child process(es) in turn, their rounds pooled. The ceiling is a raw \`EVALSHA\` of a one-key \`INCR\` script. Quotas never run out.`,
      "",
    );
    for (const s of r.scenarios) {
      const scenario = s.keys === 1 ? "1 key" : `${s.keys.toLocaleString("en-US")} keys`;
      out.push(
        `### ${scenario}`,
        "",
        markdownTable(
          ["contender", "decisions/s", "÷ ceiling", "previous run", `÷ ${REDIS_RLF}`, "CPU µs/decision (Node + Redis)", "Redis commands", "target"],
          s.rows.map((row) => {
            const f = get("redis", scenario, row.name, REDIS_CEILING);
            const fr = get("redis", scenario, row.name, REDIS_RLF);
            return [
              row.name,
              formatRate(row.opsPerSec),
              row.name === REDIS_CEILING ? "1" : formatStat(row.stats.vsCeiling),
              row.name === REDIS_CEILING ? "" : prevCell(f),
              row.name === REDIS_RLF ? "1" : row.name === REDIS_CEILING ? "" : formatStat(row.stats.vsRlf),
              `${row.profile.nodeCpuUs.toFixed(1)} + ${row.profile.redisCpuUs.toFixed(1)}`,
              row.profile.redisCommandsPerDecision.toFixed(2),
              [f?.target ? `${verdictCell(f.target, f.stat)} vs ceiling` : "", fr?.target ? `${verdictCell(fr.target, fr.stat)} vs ${REDIS_RLF}` : ""].filter(Boolean).join("; "),
            ];
          }),
          ["l", "r", "r", "r", "r", "r", "r", "l"],
        ),
        "",
      );
    }
    out.push(
      "### Over HTTP: Sluice's UpstashStore and @upstash/ratelimit through the Upstash-REST bridge",
      "",
      "The real `@upstash/redis` client (auto-pipelining on, its default) against the bridge of `@sluice/testing`, which",
      "forwards to the same redis-server and counts HTTP requests and the Redis commands they carry. Every decision allowed.",
      "decisions/s is information only (the bridge runs in the client's process).",
      "",
      markdownTable(
        ["contender", "callers in flight", "decisions", "HTTP requests/decision", "Redis commands/decision", "decisions/s (info)"],
        r.upstash.map((u) => [
          u.contender,
          String(u.callers),
          u.decisions.toLocaleString("en-US"),
          u.requestsPerDecision.toFixed(2),
          u.commandsPerDecision.toFixed(2),
          formatRate(u.opsPerSec),
        ]),
        ["l", "r", "r", "r", "r", "r"],
      ),
      "",
    );
    if (r.coldBurst !== undefined) {
      const f = get("redis", COLD_BURST_SCENARIO, COLD_BURST, WARM_BURST);
      out.push(`#${coldBurstSection(r.coldBurst)}`, "", `Previous run: ${prevCell(f) || "none"}.`, "");
    }
  }

  if (run.durableObject !== undefined) {
    const d = run.durableObject;
    out.push(
      "## Durable Object: decisions per second in workerd (Miniflare)",
      "",
      `A Worker in Miniflare (\`cf: false\`, SQLite storage on tmpfs) makes the decisions, ${d.options.inFlight} in flight, each awaited:`,
      "Sluice's `DurableObjectStore` (the `SluiceLimiter` object, a fixed window) against a trivial counter object (one RPC",
      "that adds one to an integer in its storage), addressed alike: one object, one object per key, or keys over shards.",
      "",
      markdownTable(
        ["keys", "contender", "decisions/s", "÷ ceiling", "previous run"],
        d.scenarios.flatMap((s) =>
          s.rows.map((row) => [
            s.title,
            row.name,
            formatRate(row.opsPerSec),
            row.name === DO_CEILING ? "1" : formatStat(row.vsCeiling),
            row.name === DO_CEILING ? "" : prevCell(get("durable-object", s.title, row.name, DO_CEILING)),
          ]),
        ),
        ["l", "l", "r", "r", "r"],
      ),
      "",
    );
  }

  if (run.reservations !== undefined) out.push(...reservationsSection(run.reservations));

  out.push("## Targets", "", "Each target of the issue, with this run's ratio: met, missed, or unstable (not decided by this run).", "");
  for (const f of figs) {
    if (f.target === undefined) continue;
    const status = !f.stat.stable ? "UNSTABLE" : f.target.pass ? "MET" : "MISSED";
    out.push(`- ${status}: ${f.section}, ${f.scenario}: ${f.contender} ÷ ${f.against} = ${formatStat(f.stat)}, target ${f.target.op} ${f.target.bound}×`);
  }
  const memTargets = run.memory?.memory.flatMap((r) => r.targets.map((t) => `- ${t.pass ? "MET" : "MISSED"}: memory: ${r.subject} ${r.bytesPerKey.toFixed(1)} bytes per idle key, target ≤ ${t.bound}`)) ?? [];
  const upTargets =
    run.redis?.upstash.flatMap((u) =>
      u.targets.map((t) => `- ${t.pass ? "MET" : "MISSED"}: ${u.contender}, ${u.callers} in flight: ${u.requestsPerDecision.toFixed(2)} HTTP requests per decision, target ${t.op} ${t.bound}`),
    ) ?? [];
  const res = run.reservations;
  const resTargets = res === undefined ? [] : reservationsTargets(res);
  out.push(...memTargets, ...upTargets, ...resTargets, "");
  out.push("![Ratios of this run](benchmarks.svg)", "");
  return out.join("\n");
}

/** The reservations section of `docs/benchmarks.md`. */
function reservationsSection(r: ReservationsReport): string[] {
  return [
    "## Reservations: decisions without a round trip",
    "",
    ...methodLines(r),
    "",
    "### Store calls per 1,000 decisions on a hot key",
    "",
    storeCallsTable(r),
    "",
    `### \`limit()\` latency, the store ${r.options.latency.roundTripMs} ms away`,
    "",
    latencyTable(r),
    "",
    "### Admitted at 120% of the limit",
    "",
    admittedTable(r),
    "",
    "### A cold key: reserve on ÷ off",
    "",
    coldTable(r),
    "",
  ];
}

/** The reservations section's targets that are not ratios of rounds (counts, latencies, the admitted share). */
function reservationsTargets(r: ReservationsReport): string[] {
  const line = (t: Target, what: string) => `- ${t.pass ? "MET" : "MISSED"}: reservations, ${what}: ${t.value.toFixed(t.value < 1 ? 4 : 1)}, target ${t.op} ${t.bound}`;
  return [
    ...r.storeCalls.flatMap((c) => (c.target ? [line(c.target, `${specTitle(c.spec)}, ${c.store}, ${c.latencyMs} ms away: store calls per 1,000 decisions`)] : [])),
    ...r.latency.flatMap((l) => l.targets.map((t) => line(t, `${l.contender}, ${r.options.latency.roundTripMs} ms away: ${t.against}`))),
    ...r.admitted.map((a) => line(a.target, `${specTitle(a.spec)} at 120%: admitted ÷ per-decision limiting`)),
  ];
}

// ---------------------------------------------------------------------------------------------
// SVG

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** How a section is named in a label. */
const SECTION_LABEL: Record<Figure["section"], string> = {
  "redis-cost": "in Redis",
  app: "in the app",
  http: "HTTP",
  memory: "memory",
  redis: "Redis",
  "durable-object": "Durable Object",
  reservations: "reservations",
};

/**
 * `docs/benchmarks.svg`: horizontal bars on a log scale, 1× marked. First, when there are any, the
 * ratios stable in this run and the previous one and within ±5% of it (✓: the figures the README
 * may quote), each labelled with its scenario and baseline; then one panel per section with its
 * headline ratios, an unstable one grey and labelled with its interval only.
 */
export function benchmarksSvg(run: BenchRun, figs: readonly (Figure & { readonly agrees?: boolean })[]): string {
  const panels: { title: string; items: Figure[]; label: (f: Figure) => string }[] = [];
  const add = (title: string, items: Figure[], label = (f: Figure) => (f.section === "durable-object" ? f.scenario : f.contender)) => {
    if (items.length > 0) panels.push({ title, items, label });
  };
  add(
    "Stable in this run and the previous one, within ±5% of it (✓)",
    figs.filter((f) => f.agrees === true),
    (f) => `${SECTION_LABEL[f.section]}, ${f.scenario}: ${f.contender} ÷ ${f.against}`,
  );
  const headline = figs.filter((f) => f.headline);
  add("Inside Redis: script time per decision ÷ the peer's (lower is cheaper)", headline.filter((f) => f.section === "redis-cost"), (f) => `${f.contender} ÷ ${f.against}`);
  add("Inside the app (app.fetch): time per request ÷ the other's (lower is cheaper)", headline.filter((f) => f.section === "app"), (f) => `${f.contender} ÷ ${f.against}`);
  for (const s of run.http?.scenarios ?? []) {
    const inScenario = headline.filter((f) => f.section === "http" && f.scenario === `${s.connections} connections`);
    add(`HTTP, Hono on Node.js, ${s.connections} connections: req/s ÷ the bare app`, inScenario.filter((f) => f.against === "bare app req/s"));
    add(`HTTP, ${s.connections} connections: the server's CPU time per request ÷ the bare app's (lower is better)`, inScenario.filter((f) => f.against === "bare app server CPU/request"));
  }
  for (const s of run.memory?.scenarios ?? []) add(`In memory, ${s.title}: decisions/s ÷ ${RLF}`, headline.filter((f) => f.section === "memory" && f.scenario === s.title));
  for (const s of run.redis?.scenarios ?? []) {
    const scenario = s.keys === 1 ? "1 key" : `${s.keys.toLocaleString("en-US")} keys`;
    add(`Redis (TCP, 50 in flight), ${scenario}: decisions/s ÷ raw EVALSHA`, headline.filter((f) => f.section === "redis" && f.scenario === scenario));
  }
  add("Durable Object (workerd): decisions/s ÷ a counter object", headline.filter((f) => f.section === "durable-object"));

  // labels are right-aligned at labelW: wide enough for the longest (about 6.3 px per character)
  const labelW = Math.max(330, ...panels.flatMap((p) => p.items.map((f) => Math.ceil(p.label(f).length * 6.3) + 10)));
  const width = labelW + 530;
  const barX = labelW + 10;
  const barW = width - barX - 150;
  const rowH = 18;
  const lo = Math.log10(0.1);
  const hi = Math.log10(30);
  const x = (v: number) => barX + ((Math.log10(Math.min(30, Math.max(0.1, v))) - lo) / (hi - lo)) * barW;
  const parts: string[] = [];
  let y = 46;
  for (const p of panels) {
    parts.push(`<text x="10" y="${y}" class="h">${esc(p.title)}</text>`);
    y += 8;
    const top = y;
    for (const f of p.items) {
      const label = p.label(f);
      const cy = y + rowH / 2;
      parts.push(`<text x="${labelW}" y="${cy + 4}" class="l" text-anchor="end">${esc(label)}</text>`);
      const x0 = x(0.1);
      const xv = x(f.stat.median);
      parts.push(`<rect x="${x0}" y="${y + 3}" width="${Math.max(1, xv - x0)}" height="${rowH - 6}" class="${f.stat.stable ? (f.stat.median >= 1 ? "up" : "down") : "unstable"}"/>`);
      parts.push(`<line x1="${x(f.stat.low)}" x2="${x(f.stat.high)}" y1="${cy}" y2="${cy}" class="w"/>`);
      const text = f.stat.stable ? `${f.stat.median.toFixed(2)}×` : `unstable (${f.stat.low.toFixed(2)}–${f.stat.high.toFixed(2)})`;
      parts.push(`<text x="${Math.max(xv, x(f.stat.high)) + 6}" y="${cy + 4}" class="v">${esc(text)}</text>`);
      y += rowH;
    }
    parts.push(`<line x1="${x(1)}" x2="${x(1)}" y1="${top}" y2="${y}" class="one"/>`);
    y += 22;
  }
  const axis = [0.1, 0.25, 0.5, 1, 2, 5, 10, 25]
    .map((v) => `<text x="${x(v)}" y="${y - 4}" class="a" text-anchor="middle">${v}×</text><line x1="${x(v)}" x2="${x(v)}" y1="34" y2="${y - 16}" class="g"/>`)
    .join("");
  const height = y + 10;
  const m = run.machine;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">`,
    "<style>.h{font-size:13px;font-weight:600;fill:#222}.l{font-size:12px;fill:#333}.v{font-size:11px;fill:#333}.a{font-size:10px;fill:#666}.g{stroke:#eee}.one{stroke:#444;stroke-dasharray:3 2}.up{fill:#2f7d4f}.down{fill:#4a78b5}.unstable{fill:#ccc}.w{stroke:#111;stroke-width:1}</style>",
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" class="h">Sluice benchmarks: ratios in the same run (median of interleaved rounds, whiskers: its 95% interval; grey = unstable, interval beyond ±5%)</text>`,
    `<text x="10" y="34" class="a">${esc(`${run.date.slice(0, 10)}, ${m.cores} × ${m.cpu}, Node ${m.node}, load ${m.loadAvgStart} → ${m.loadAvgEnd ?? "?"}; log scale, dashed line = 1×`)}</text>`,
    axis,
    ...parts,
    "</svg>",
    "",
  ].join("\n");
}
