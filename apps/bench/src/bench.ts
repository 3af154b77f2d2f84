/**
 * `pnpm bench`: every benchmark in one run — the cost of a decision inside Redis (`redis-cost.ts`)
 * and the middleware's own cost inside the app (`app-cost.ts`), first in the report; HTTP through Hono, in memory, Redis (TCP and the Upstash REST path), the
 * Durable Object and reservations (`reservations.ts`) — then the published figures:
 *
 * - `docs/benchmarks.md`: the tables, the machine, Node, the date, the load, the command to
 *   reproduce, the targets; each ratio beside the previous run's (read from `docs/benchmarks.json`);
 * - `docs/benchmarks.svg`: a bar chart of the headline ratios (the root README shows it);
 * - `docs/benchmarks.json`: every figure, for machines and for the next run's comparison.
 *
 * `pnpm bench --json` prints that JSON on stdout instead of the markdown (progress goes to stderr
 * either way). `--only http,memory` runs some sections and writes only `apps/bench/results/`
 * (never the published docs, which describe whole runs).
 *
 * @module
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { DEFAULT_DO_OPTIONS, runDoBench } from "./durable-object.js";
import { DEFAULT_HTTP_OPTIONS, runHttpBench } from "./http.js";
import { loadAvgNow, machineInfo, writeJson } from "./lib/report.js";
import { DEFAULT_MEMORY_OPTIONS, runMemoryBench } from "./memory.js";
import { type BenchRun, type ComparedFigure, type Figure, benchmarksMarkdown, benchmarksSvg, compare, figures } from "./publish.js";
import { DEFAULT_REDIS_OPTIONS, runRedisBench } from "./redis.js";
import { DEFAULT_REDIS_COST_OPTIONS, runRedisCostBench } from "./redis-cost.js";
import { DEFAULT_APP_COST_OPTIONS, runAppCostBench } from "./app-cost.js";
import { DEFAULT_RESERVATIONS_OPTIONS, runReservationsBench } from "./reservations.js";

export const SECTIONS = ["redis-cost", "app", "http", "memory", "redis", "durable-object", "reservations"] as const;
export type Section = (typeof SECTIONS)[number];

/** The repository's docs folder. */
export const DOCS_DIR = new URL("../../../docs/", import.meta.url);
const RESULTS_FILE = new URL("../results/bench.json", import.meta.url);

/** What `docs/benchmarks.json` holds. */
export interface PublishedRun {
  readonly date: string;
  readonly command: string;
  readonly machine: BenchRun["machine"];
  readonly durationS: number;
  readonly figures: ComparedFigure[];
  readonly previousDate?: string;
  readonly run: BenchRun;
}

function readPrevious(): { date: string; machine: BenchRun["machine"]; figures: Figure[] } | undefined {
  const file = new URL("benchmarks.json", DOCS_DIR);
  if (!existsSync(file)) return undefined;
  try {
    const data = JSON.parse(readFileSync(file, "utf8")) as PublishedRun;
    return { date: data.date, machine: data.machine, figures: data.figures };
  } catch {
    return undefined;
  }
}

/** Runs the sections and returns the run (progress through `log`). */
export async function runAll(sections: readonly Section[], log: (line: string) => void): Promise<BenchRun> {
  const started = performance.now();
  const machine = machineInfo();
  log(`pnpm bench: ${sections.join(", ")} on ${machine.cores} × ${machine.cpu}, Node ${machine.node}, load ${machine.loadAvgStart}`);
  const has = (s: Section) => sections.includes(s);
  const redisCost = has("redis-cost") ? await runRedisCostBench({ ...DEFAULT_REDIS_COST_OPTIONS, log }) : undefined;
  const app = has("app") ? await runAppCostBench({ ...DEFAULT_APP_COST_OPTIONS, log }) : undefined;
  const http = has("http") ? await runHttpBench({ ...DEFAULT_HTTP_OPTIONS, log }) : undefined;
  const memory = has("memory") ? await runMemoryBench({ ...DEFAULT_MEMORY_OPTIONS, log }) : undefined;
  const redis = has("redis") ? await runRedisBench({ ...DEFAULT_REDIS_OPTIONS, log }) : undefined;
  const durableObject = has("durable-object") ? await runDoBench({ ...DEFAULT_DO_OPTIONS, log }) : undefined;
  const reservations = has("reservations") ? await runReservationsBench({ ...DEFAULT_RESERVATIONS_OPTIONS, log }) : undefined;
  return {
    date: new Date().toISOString(),
    command: "pnpm bench",
    machine: { ...machine, loadAvgEnd: loadAvgNow() },
    durationS: (performance.now() - started) / 1000,
    ...(redisCost ? { redisCost } : {}),
    ...(app ? { app } : {}),
    ...(memory ? { memory } : {}),
    ...(redis ? { redis } : {}),
    ...(http ? { http } : {}),
    ...(durableObject ? { durableObject } : {}),
    ...(reservations ? { reservations } : {}),
  };
}

/** Writes the published files for a whole run; returns what `--json` prints. */
export function publish(run: BenchRun, docsDir: URL = DOCS_DIR): PublishedRun {
  const previous = readPrevious();
  const figs = compare(figures(run), previous?.figures);
  const published: PublishedRun = {
    date: run.date,
    command: run.command,
    machine: run.machine,
    durationS: run.durationS,
    figures: figs,
    ...(previous ? { previousDate: previous.date } : {}),
    run,
  };
  mkdirSync(docsDir, { recursive: true });
  writeFileSync(new URL("benchmarks.md", docsDir), benchmarksMarkdown(run, figs, previous?.date, previous?.machine));
  writeFileSync(new URL("benchmarks.svg", docsDir), benchmarksSvg(run, figs));
  writeFileSync(new URL("benchmarks.json", docsDir), `${JSON.stringify(published, null, 1)}\n`);
  return published;
}

function parseArgs(argv: readonly string[]): { json: boolean; only: Section[] | undefined } {
  let json = false;
  let only: Section[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--json") json = true;
    else if (arg === "--only" || arg.startsWith("--only=")) {
      const value = arg === "--only" ? argv[++i] : arg.slice("--only=".length);
      only = (value ?? "").split(",").map((s) => s.trim()) as Section[];
      for (const s of only) if (!(SECTIONS as readonly string[]).includes(s)) throw new Error(`--only: unknown section ${JSON.stringify(s)}; have ${SECTIONS.join(", ")}`);
    } else if (arg !== "--") throw new Error(`unknown argument ${JSON.stringify(arg)}: use --json and/or --only ${SECTIONS.join(",")}`);
  }
  return { json, only };
}

async function main(): Promise<void> {
  const { json, only } = parseArgs(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const run = await runAll(only ?? SECTIONS, log);
  writeJson(RESULTS_FILE, run);
  if (only !== undefined) {
    const figs = compare(figures(run), readPrevious()?.figures);
    if (json) process.stdout.write(`${JSON.stringify({ ...run, figures: figs }, null, 1)}\n`);
    else process.stdout.write(`${benchmarksMarkdown(run, figs, undefined)}\nPartial run (--only): docs/ not written; figures in ${fileURLToPath(RESULTS_FILE)}\n`);
    return;
  }
  const published = publish(run);
  if (json) process.stdout.write(`${JSON.stringify(published, null, 1)}\n`);
  else {
    process.stdout.write(readFileSync(new URL("benchmarks.md", DOCS_DIR), "utf8"));
    process.stdout.write(`\nWritten: docs/benchmarks.md, docs/benchmarks.svg, docs/benchmarks.json (${Math.round(run.durationS)} s)\n`);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  process.exit(0); // some peers hold timers (unref'd or not)
}
