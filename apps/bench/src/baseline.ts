/**
 * `pnpm --filter @sluice/bench bench:baseline -- --baseline <another checkout>`: this checkout's
 * in-memory decisions beside another checkout's (a worktree of an earlier commit, say), for each
 * algorithm with 1 hot key, with 100,000 keys and on the deny path: the A/B a change to the hot
 * path is judged by. Both sides run the built core (`pnpm --filter @sluice/core build` in each
 * checkout first), each algorithm in its own child process with the two interleaved round by round
 * and slice by slice, so the machine's load falls on both alike. Prints, per algorithm and
 * scenario, this checkout's time per decision over the other's (below 1: faster) as the median of
 * the per-round ratios with its 95% interval; writes them to `results/baseline.json`. The baseline
 * is recorded by its commit, never by its path.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { BENCH_ALGORITHMS, type BenchAlgorithmId, MEASURED_ALGORITHMS } from "./algorithms/index.js";
import { type Contender, type ThroughputOptions, buildKeys, measureThroughput, shuffled } from "./lib/harness.js";
import { runInChild } from "./lib/child.js";
import { loadAvgNow, runIfMain } from "./lib/report.js";
import { type RatioStat, formatStat, ratioStat } from "./lib/stats.js";

const SCENARIOS = { hot: "allow", many: "allow", deny: "deny" } as const;
type Scenario = keyof typeof SCENARIOS;

const CURRENT = "this checkout";
const BASELINE = "baseline";

/** What a built core exports that the A/B needs. */
interface Core {
  RateLimiter: new (options: { store: unknown; limits: unknown }) => { limit(key: string): Promise<{ allowed: boolean }> };
  MemoryStore: new (options: { maxKeys: number }) => unknown;
}

const OPTIONS: ThroughputOptions = {
  rounds: 9,
  warmupMs: 150,
  targetRoundMs: 80,
  slices: 5,
  roundFigure: "median",
  stableAgainst: [BASELINE],
  maxRounds: 15,
  budgetMs: 2000,
};

/** This checkout's contender: its own loop, so that no call site sees both cores' classes. */
function currentContender(limiter: InstanceType<Core["RateLimiter"]>, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name: CURRENT,
    expect,
    async run(ops) {
      let allowed = 0;
      for (let i = 0; i < ops; i++) if ((await limiter.limit(keys[i % n] as string)).allowed) allowed++;
      return allowed;
    },
  };
}

/** The baseline's contender: the same loop, written out again. */
function baselineContender(limiter: InstanceType<Core["RateLimiter"]>, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name: BASELINE,
    expect,
    async run(ops) {
      let allowed = 0;
      for (let i = 0; i < ops; i++) if ((await limiter.limit(keys[i % n] as string)).allowed) allowed++;
      return allowed;
    },
  };
}

/** Child-process entry: one algorithm's scenarios, both cores in this process; per scenario, every round's time ratio (this / baseline). */
export async function measureBaselineAlgorithm(algorithm: BenchAlgorithmId, currentUrl: string, baselineUrl: string, manyKeys: number): Promise<Record<Scenario, number[]>> {
  const current = (await import(currentUrl)) as Core;
  const baseline = (await import(baselineUrl)) as Core;
  const out = {} as Record<Scenario, number[]>;
  for (const scenario of Object.keys(SCENARIOS) as Scenario[]) {
    const expect = SCENARIOS[scenario];
    const keys = scenario === "many" ? shuffled(buildKeys(manyKeys)) : buildKeys(1);
    const policy = expect === "allow" ? BENCH_ALGORITHMS[algorithm].allow() : BENCH_ALGORITHMS[algorithm].deny(Date.now());
    const mine = new current.RateLimiter({ store: new current.MemoryStore({ maxKeys: keys.length }), limits: policy });
    const theirs = new baseline.RateLimiter({ store: new baseline.MemoryStore({ maxKeys: keys.length }), limits: policy });
    if (expect === "deny") for (const key of keys) await Promise.all([mine.limit(key), theirs.limit(key)]);
    const [a, b] = await measureThroughput([currentContender(mine, keys, expect), baselineContender(theirs, keys, expect)], OPTIONS);
    // time per decision, this checkout over the baseline: the baseline's rate over this one's
    out[scenario] = (b as { roundOpsPerSec: number[] }).roundOpsPerSec.map((rate, i) => rate / ((a as { roundOpsPerSec: number[] }).roundOpsPerSec[i] as number));
  }
  return out;
}

/** The built core of a checkout, as a file URL; throws with the command that builds it. */
function builtCore(checkout: string): string {
  const file = join(checkout, "packages/core/dist/index.js");
  if (!existsSync(file)) throw new Error(`${file} is missing: run \`pnpm --filter @sluice/core build\` in ${checkout}`);
  return pathToFileURL(file).href;
}

/** The A/B's figures: per algorithm and scenario, the statistics of the per-round time ratios. */
export interface BaselineReport {
  readonly date: string;
  /** The baseline checkout's commit, when it is a git checkout (its path is not recorded). */
  readonly baseline: string;
  readonly stats: Record<string, Record<Scenario, RatioStat>>;
}

/** Runs the A/B against the checkout given by `--baseline`. */
async function run(log: (line: string) => void): Promise<BaselineReport> {
  const args = process.argv.slice(2).filter((a) => a !== "--");
  const at = args.indexOf("--baseline");
  const other = at >= 0 ? args[at + 1] : undefined;
  if (other === undefined) throw new Error("usage: bench:baseline -- --baseline <path of another checkout, its core built>");
  const here = fileURLToPath(new URL("../../../", import.meta.url));
  const [currentUrl, baselineUrl] = [builtCore(here), builtCore(resolve(other))];
  const ratios: Record<string, Record<Scenario, number[]>> = {};
  // two passes over the algorithms, each in a fresh process: an algorithm's rounds pool two processes
  for (let pass = 0; pass < 2; pass++) {
    for (const algorithm of MEASURED_ALGORITHMS) {
      log(`${algorithm}, process ${pass + 1} of 2 (load ${loadAvgNow()}) ...`);
      const measured = await runInChild<Record<Scenario, number[]>>(import.meta.url, "measureBaselineAlgorithm", [algorithm, currentUrl, baselineUrl, 100_000]);
      const into = (ratios[algorithm] ??= { hot: [], many: [], deny: [] });
      for (const s of Object.keys(SCENARIOS) as Scenario[]) into[s].push(...measured[s]);
    }
  }
  const stats = Object.fromEntries(Object.entries(ratios).map(([a, per]) => [a, { hot: ratioStat(per.hot), many: ratioStat(per.many), deny: ratioStat(per.deny) }]));
  return { date: new Date().toISOString(), baseline: commitOf(resolve(other)), stats };
}

/** The commit a checkout is at (`HEAD`), or `"unknown"`. */
function commitOf(dir: string): string {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: dir, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

/** The report as a table: time per decision, this checkout over the baseline. */
function format(report: BaselineReport): string {
  const rows = Object.entries(report.stats).map(([a, s]) => `| ${a} | ${formatStat(s.hot)} | ${formatStat(s.many)} | ${formatStat(s.deny)} |`);
  return [
    `Time per decision, this checkout / baseline (${report.baseline}): the median of the per-round ratios (95% interval); below 1 is faster.`,
    "",
    "| algorithm | 1 hot key | 100,000 keys | deny path |",
    "|---|---|---|---|",
    ...rows,
  ].join("\n");
}

runIfMain(import.meta.url, new URL("../results/baseline.json", import.meta.url), run, format);
