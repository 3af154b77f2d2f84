/**
 * The throughput harness shared by every benchmark file: sequential decisions (one `await` at a
 * time, like a request handler), warm-up, a fixed number of operations per round calibrated during
 * warm-up, contenders interleaved across rounds, the median reported.
 *
 * @module
 */
import { median, pairStable } from "./stats.js";

export { median };

/** One competitor in a throughput scenario. */
export interface Contender {
  /** The row label, e.g. `"tokenBucket"` or `"rate-limiter-flexible"`. */
  readonly name: string;
  /** Every measured call must be allowed (`"allow"`) or denied (`"deny"`); anything else aborts the bench. */
  readonly expect: "allow" | "deny";
  /**
   * Makes `ops` decisions one at a time (each awaited before the next) over prebuilt keys and
   * returns how many were allowed. Every contender's loop has the same shape; only the call differs.
   */
  run(ops: number): Promise<number>;
  /**
   * Optional, called before every timed `run` and outside its timing (e.g. to reset a server's
   * statistics); `phase` says whether the run is part of the warm-up or a measured round.
   */
  beforeRun?(phase: RunPhase): Promise<void>;
  /** Optional, called after every timed `run` and outside its timing (e.g. to read CPU counters). */
  afterRun?(phase: RunPhase, ops: number, elapsedMs: number): Promise<void>;
}

/** Whether a run is part of the warm-up or a measured round. */
export type RunPhase = "warmup" | "round";

/** How long and how often to measure. */
export interface ThroughputOptions {
  /** Timed rounds per contender; the median is reported. */
  rounds: number;
  /** Warm-up time per contender before calibration, in ms (ignored when `warmupOps` is set). */
  warmupMs: number;
  /** Target duration of one round, in ms: each contender's fixed `opsPerRound` is sized from its warm-up rate. */
  targetRoundMs: number;
  /** Fixed warm-up operations instead of `warmupMs` (tests). */
  warmupOps?: number;
  /** Fixed operations per round instead of calibrating to `targetRoundMs` (tests). */
  opsPerRound?: number;
  /**
   * Slices per round: each round runs every contender in this many alternating slices (A B C A B
   * C …, the starting contender rotating), each of `opsPerRound / slices` operations, and a
   * contender's round figure sums its slices. Contenders then share the machine's load within a
   * round at a finer grain than one run each, which is what keeps per-round ratios steady on a
   * machine that other work keeps busy. A forced GC precedes each round (not each slice).
   * @default 1
   */
  slices?: number;
  /**
   * How a contender's round figure is made from its slices: `"sum"`, the round's operations over
   * the sum of its slices' times; or `"median"`, the median of its slices' rates, so a burst of
   * other work that slows one or two slices of a round (a shared machine's noise) moves neither
   * the round's figure nor the ratios paired with it. @default "sum"
   */
  roundFigure?: "sum" | "median";
  /**
   * Adaptive rounds: after `rounds` rounds, rounds are added one at a time until every contender's
   * per-round ratio to each of these contenders (by name) is stable (a 95% interval of the median
   * within ±5%, see `stats.ts`), or `maxRounds` or `budgetMs` is reached. Unset: exactly `rounds`.
   */
  stableAgainst?: readonly string[];
  /** The most rounds adaptive measuring may reach. @default rounds */
  maxRounds?: number;
  /**
   * Time budget of the added rounds, in ms, counted from the end of the first `rounds` rounds: no
   * round is added after it. @default Infinity
   */
  budgetMs?: number;
  /** The clock every run is timed with, in ms (tests give one that the contenders advance). @default performance.now */
  clock?: () => number;
}

/** One contender's result. */
export interface ThroughputResult {
  readonly name: string;
  /** Operations in each timed round (fixed for all rounds). */
  readonly opsPerRound: number;
  /** Decisions per second of each round, in the order run. */
  readonly roundOpsPerSec: number[];
  /** The median of `roundOpsPerSec`. */
  readonly opsPerSec: number;
  /**
   * With adaptive rounds: whether every ratio asked for was stable when the rounds stopped (false
   * when `maxRounds` or `budgetMs` stopped them first). Absent without adaptive rounds.
   */
  readonly settled?: boolean;
}

const collect: () => void = typeof globalThis.gc === "function" ? () => (globalThis.gc as () => void)() : () => {};

/** Whether a full garbage collection can be forced (`node --expose-gc`). */
export const canCollect = typeof globalThis.gc === "function";

/** Rounds to two significant digits, at least 1 (`123_456` → `120_000`). */
export function roundOps(ops: number): number {
  if (!(ops >= 1)) return 1;
  const magnitude = 10 ** Math.max(0, Math.floor(Math.log10(ops)) - 1);
  return Math.max(1, Math.round(ops / magnitude) * magnitude);
}

const wallClock = (): number => performance.now();

async function timed(contender: Contender, ops: number, phase: RunPhase, clock: () => number = wallClock): Promise<number> {
  if (contender.beforeRun !== undefined) await contender.beforeRun(phase);
  const start = clock();
  const allowed = await contender.run(ops);
  const elapsedMs = clock() - start;
  if (contender.afterRun !== undefined) await contender.afterRun(phase, ops, elapsedMs);
  const expected = contender.expect === "allow" ? ops : 0;
  if (allowed !== expected) {
    throw new Error(
      `${contender.name}: expected ${contender.expect === "allow" ? "every" : "no"} call of ${ops} to be allowed, but ${allowed} were: the scenario is misconfigured`,
    );
  }
  return elapsedMs;
}

/** Warms a contender up and returns its calibrated operations per round. */
async function warmUp(contender: Contender, options: ThroughputOptions): Promise<number> {
  if (options.warmupOps !== undefined) {
    await timed(contender, options.warmupOps, "warmup", options.clock);
    return options.opsPerRound ?? options.warmupOps;
  }
  let ops = 1_000;
  let spentMs = 0;
  let rate = 0;
  // doubling chunks until the warm-up time is spent; the last chunk (the most optimized code) sets the rate
  while (spentMs < options.warmupMs) {
    const elapsedMs = await timed(contender, ops, "warmup", options.clock);
    spentMs += elapsedMs;
    rate = (ops * 1000) / Math.max(elapsedMs, 0.001); // decisions per second
    if (elapsedMs < options.warmupMs / 4) ops *= 2;
  }
  return options.opsPerRound ?? roundOps((rate * options.targetRoundMs) / 1000);
}

/**
 * Whether every contender's per-round figures are stable against each named baseline
 * (`stableAgainst`), by the rule of `stats.ts`. A name that is not a contender is ignored.
 */
export function allStable(names: readonly string[], rounds: readonly (readonly number[])[], stableAgainst: readonly string[]): boolean {
  for (const baseline of stableAgainst) {
    const b = names.indexOf(baseline);
    if (b < 0) continue;
    for (let i = 0; i < names.length; i++) {
      if (i !== b && !pairStable(rounds[i] as number[], rounds[b] as number[])) return false;
    }
  }
  return true;
}

/**
 * Measures every contender: warm-up and calibration first, then `rounds` rounds in which each
 * contender runs its fixed number of operations, in `slices` alternating slices. The starting
 * contender rotates every round and slice, so machine noise is spread over all of them. A full GC
 * (when exposed) precedes every round. With `stableAgainst`, rounds are added until the ratios to
 * those contenders are stable or `maxRounds`/`budgetMs` says stop (see {@link ThroughputOptions}).
 * Rejects if a contender allows a call it should deny or the reverse.
 */
export async function measureThroughput(contenders: readonly Contender[], options: ThroughputOptions): Promise<ThroughputResult[]> {
  const opsPerRound: number[] = [];
  for (const contender of contenders) opsPerRound.push(await warmUp(contender, options));
  const slices = Math.max(1, Math.floor(options.slices ?? 1));
  const sliceOps = opsPerRound.map((ops) => Math.max(1, Math.ceil(ops / slices)));
  const rounds: number[][] = contenders.map(() => []);
  const names = contenders.map((c) => c.name);
  const adaptive = options.stableAgainst !== undefined && options.stableAgainst.length > 0;
  const maxRounds = adaptive ? Math.max(options.rounds, options.maxRounds ?? options.rounds) : options.rounds;
  const clock = options.clock ?? wallClock;
  const medianOfSlices = options.roundFigure === "median";
  let deadline = Infinity;
  let settled = false;
  for (let round = 0; round < maxRounds; round++) {
    if (round === options.rounds) deadline = clock() + (options.budgetMs ?? Infinity);
    if (round >= options.rounds) {
      settled = allStable(names, rounds, options.stableAgainst ?? []);
      if (settled || clock() >= deadline) break;
    }
    const elapsed = contenders.map(() => 0);
    const sliceRates: number[][] = contenders.map(() => []);
    collect();
    for (let slice = 0; slice < slices; slice++) {
      for (let k = 0; k < contenders.length; k++) {
        const i = (round + slice + k) % contenders.length;
        const ms = await timed(contenders[i] as Contender, sliceOps[i] as number, "round", clock);
        elapsed[i] = (elapsed[i] as number) + ms;
        (sliceRates[i] as number[]).push(((sliceOps[i] as number) * 1000) / ms);
      }
    }
    for (let i = 0; i < contenders.length; i++) {
      (rounds[i] as number[]).push(medianOfSlices ? median(sliceRates[i] as number[]) : ((sliceOps[i] as number) * slices * 1000) / (elapsed[i] as number));
    }
  }
  if (adaptive && !settled) settled = allStable(names, rounds, options.stableAgainst ?? []);
  return contenders.map((contender, i) => ({
    name: contender.name,
    opsPerRound: (sliceOps[i] as number) * slices,
    roundOpsPerSec: rounds[i] as number[],
    opsPerSec: median(rounds[i] as number[]),
    ...(adaptive ? { settled } : {}),
  }));
}

/** A deterministic shuffle (mulberry32), so every contender sees the same key order. */
export function shuffled<T>(items: readonly T[], seed = 0x5eed): T[] {
  const out = [...items];
  let state = seed >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const j = Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * (i + 1));
    const tmp = out[i] as T;
    out[i] = out[j] as T;
    out[j] = tmp;
  }
  return out;
}

/** `count` distinct short keys (`"user:0"`, `"user:1"`, ...), flat strings built up front. */
export function buildKeys(count: number, prefix = "user:"): string[] {
  const keys: string[] = new Array(count);
  for (let i = 0; i < count; i++) keys[i] = prefix + i;
  return keys;
}

/**
 * `a` relative to `b`, measured in the same rounds: the median over rounds of `a[i] / b[i]`.
 * Pairing by round cancels load that drifts during a run (other processes on the machine).
 */
export function pairedRatio(a: ThroughputResult, b: ThroughputResult): number {
  const n = Math.min(a.roundOpsPerSec.length, b.roundOpsPerSec.length);
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) ratios.push((a.roundOpsPerSec[i] as number) / (b.roundOpsPerSec[i] as number));
  return median(ratios);
}
