/**
 * The contenders of the in-Redis cost section (`redis-cost.ts`), measured in one child process
 * against one private redis-server: what each decision costs **inside Redis** — the run time of
 * its scripts (`INFO commandstats`: the `usec` of `EVALSHA`/`EVAL`) and the commands it makes —
 * read around each contender's slice of every round, outside the client's timing. Client noise
 * barely touches it: a script runs to completion on Redis's one thread whatever the client does,
 * and with redis-server pinned to its own core no client preempts it mid-script.
 *
 * Contenders (each with its own connection, the same keys, `inFlight` callers):
 *
 * - the ceiling: `EVALSHA` of `INCR` + `PEXPIRE` on a new key — the least a fixed window can run;
 * - rate-limiter-flexible's `RateLimiterRedis` (`consume`, a denied `consume`, `reward`);
 * - `@upstash/ratelimit` 2 (fixed window, sliding window, token bucket) with `@upstash/redis`
 *   through the Upstash-REST bridge of `@sluice/testing`, which forwards to the same redis-server;
 * - Sluice's `RateLimiter` over `RedisStore` (ioredis): every algorithm alone, the three-limit tier,
 *   a denial (deny cache off: the denial is decided by Redis) and a refund.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import {
  type Decision,
  type Policy,
  RateLimiter,
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import { RedisStore } from "@sluice/redis";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import type IORedis from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { allStable, buildKeys, median, shuffled } from "./lib/harness.js";
import { connectIORedis } from "./redis-contenders.js";

export const CEILING = "ceiling: INCR + PEXPIRE script";
export const RLF = "rate-limiter-flexible";
export const RLF_DENIED = "rate-limiter-flexible, denied";
export const RLF_REWARD = "rate-limiter-flexible reward (refund)";
export const URL_FIXED = "@upstash/ratelimit fixedWindow";
export const URL_SLIDING = "@upstash/ratelimit slidingWindow";
export const URL_BUCKET = "@upstash/ratelimit tokenBucket";
export const FIXED = "Sluice fixedWindow";
export const SLIDING = "Sluice slidingWindow";
export const LOG = "Sluice slidingLog";
export const BUCKET = "Sluice tokenBucket";
export const LEAKY = "Sluice leakyBucket";
export const CONCURRENCY = "Sluice concurrency (acquire + release)";
export const TIER = "Sluice tier (3 limits)";
export const FIXED_DENIED = "Sluice fixedWindow, denied";
export const REFUND = "Sluice fixedWindow refund";

/** Every contender, in table order. */
export const COST_CONTENDERS = [
  CEILING,
  RLF,
  URL_FIXED,
  URL_SLIDING,
  URL_BUCKET,
  FIXED,
  SLIDING,
  LOG,
  BUCKET,
  LEAKY,
  CONCURRENCY,
  TIER,
  FIXED_DENIED,
  RLF_DENIED,
  REFUND,
  RLF_REWARD,
] as const;

/** The ceiling's script: a fixed window's least work, a count and its expiry. */
export const CEILING_SCRIPT = "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n";

/** A quota no run comes near. */
const NEVER = 1_000_000_000;

/** What one contender's decision must come out as: the bench stops on anything else. */
type Outcome = "allowed" | "denied" | "refunded";

interface CostContender {
  readonly name: string;
  readonly outcome: Outcome;
  /** One decision for `key`; resolves whether it came out as {@link CostContender.outcome}. */
  once(key: string): Promise<boolean>;
  close(): void;
}

/** Sluice's limiter over `RedisStore`, deny cache off (every decision is Redis's), store errors fatal. */
function sluiceLimiter(client: IORedis, limits: Policy | Policy[], prefix: string): { limiter: RateLimiter; failed: () => unknown } {
  let failure: unknown;
  const limiter = new RateLimiter({
    store: new RedisStore(client),
    limits,
    prefix,
    denyCache: false,
    onStoreError: "deny",
    onStoreFailure: (error) => {
      failure ??= error;
    },
  });
  return { limiter, failed: () => failure };
}

const okAllowed = (d: Decision) => d.allowed && d.reason === "ok";

async function build(name: string, url: string, bridge: { url: string; token: string }, keys: readonly string[]): Promise<CostContender> {
  const client = await connectIORedis(url);
  const close = () => client.disconnect();
  const sluice = async (limits: Policy | Policy[], prefix: string, outcome: Outcome = "allowed"): Promise<CostContender> => {
    const { limiter, failed } = sluiceLimiter(client, limits, prefix);
    return {
      name,
      outcome,
      async once(key) {
        const d = await limiter.limit(key);
        if (failed() !== undefined) throw new Error(`${name}: the store failed`, { cause: failed() });
        return outcome === "allowed" ? okAllowed(d) : !d.allowed && d.reason === "limit";
      },
      close,
    };
  };
  const rlf = (points: number, prefix: string) => new RateLimiterRedis({ storeClient: client, useRedisPackage: false, keyPrefix: prefix, points, duration: 3600 });
  const consume = async (limiter: RateLimiterRedis, key: string): Promise<boolean> => {
    try {
      await limiter.consume(key);
      return true;
    } catch (error) {
      if (error instanceof RateLimiterRes) return false;
      throw error;
    }
  };
  const upstash = (limiter: ConstructorParameters<typeof Ratelimit>[0]["limiter"], prefix: string): CostContender => {
    const ratelimit = new Ratelimit({
      redis: new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }),
      limiter,
      prefix,
      analytics: false,
      ephemeralCache: false,
    });
    return {
      name,
      outcome: "allowed",
      async once(key) {
        const r = await ratelimit.limit(key);
        await r.pending;
        return r.success;
      },
      close,
    };
  };
  switch (name) {
    case CEILING: {
      const sha = (await client.script("LOAD", CEILING_SCRIPT)) as string;
      return {
        name,
        outcome: "allowed",
        async once(key) {
          const n = await client.evalsha(sha, 1, `cost-ceiling:${key}`, 3_600_000);
          return typeof n === "number" && n > 0;
        },
        close,
      };
    }
    case RLF: {
      const limiter = rlf(NEVER, "cost-rlf");
      return { name, outcome: "allowed", once: (key) => consume(limiter, key), close };
    }
    case RLF_DENIED: {
      const limiter = rlf(1, "cost-rlf-denied");
      for (const key of keys) await consume(limiter, key); // spends each key's one point
      return { name, outcome: "denied", once: async (key) => !(await consume(limiter, key)), close };
    }
    case RLF_REWARD: {
      const limiter = rlf(NEVER, "cost-rlf-reward");
      return {
        name,
        outcome: "refunded",
        async once(key) {
          await limiter.reward(key, 1);
          return true;
        },
        close,
      };
    }
    case URL_FIXED:
      return upstash(Ratelimit.fixedWindow(NEVER, "1 h"), "cost-url-fw");
    case URL_SLIDING:
      return upstash(Ratelimit.slidingWindow(NEVER, "1 m"), "cost-url-sw");
    case URL_BUCKET:
      return upstash(Ratelimit.tokenBucket(NEVER, "1 s", NEVER), "cost-url-tb");
    case FIXED:
      return sluice(fixedWindow({ limit: NEVER, window: "1h" }), "cost-fw");
    case SLIDING:
      return sluice(slidingWindow({ limit: NEVER, window: "1m" }), "cost-sw");
    case LOG:
      // a 100 ms window, shorter than the time between two calls on a key: each call finds one
      // expired entry, drops it and adds its own, so the figure is a log's fixed cost per decision
      // (every entry a key holds adds to it). With a minute the log grew for the whole run and so
      // did its cost (9 µs in the first round, 16 µs in the 31st); with 2 s its length followed
      // how long each round took
      return sluice(slidingLog({ limit: 1000, window: "100ms" }), "cost-log");
    case BUCKET:
      return sluice(tokenBucket({ capacity: NEVER, refillRate: NEVER }), "cost-tb");
    case LEAKY:
      return sluice(leakyBucket({ rate: NEVER, period: "1s", burst: NEVER }), "cost-lb");
    case CONCURRENCY: {
      const { limiter, failed } = sluiceLimiter(client, concurrency({ limit: NEVER, lease: "1m" }), "cost-cc");
      return {
        name,
        outcome: "allowed",
        async once(key) {
          const d = await limiter.limit(key);
          const released = await limiter.release(key, d);
          if (failed() !== undefined) throw new Error(`${name}: the store failed`, { cause: failed() });
          return okAllowed(d) && released.reason === "ok";
        },
        close,
      };
    }
    case TIER:
      // the demo's plan shape (burst, per minute, per day), with quotas that never deny
      return sluice(
        [
          tokenBucket({ capacity: NEVER, refillRate: NEVER, interval: "1m", name: "burst" }),
          slidingWindow({ limit: NEVER, window: "1m", name: "per-minute" }),
          fixedWindow({ limit: NEVER, window: "1d", name: "per-day" }),
        ],
        "cost-tier",
      );
    case FIXED_DENIED: {
      const c = await sluice(fixedWindow({ limit: 1, window: "1d" }), "cost-fw-denied", "denied");
      const { limiter } = sluiceLimiter(client, fixedWindow({ limit: 1, window: "1d" }), "cost-fw-denied");
      for (const key of keys) await limiter.limit(key); // spends each key's one request
      return c;
    }
    case REFUND: {
      // each key is charged far more than the run refunds (a day's window), so every refund
      // gives a unit back: the script does its whole work every time
      const { limiter, failed } = sluiceLimiter(client, fixedWindow({ limit: NEVER, window: "1d" }), "cost-refund");
      for (const key of keys) await limiter.limit(key, { cost: 100_000 });
      return {
        name,
        outcome: "refunded",
        async once(key) {
          const d = await limiter.refund(key, { cost: 1 });
          if (failed() !== undefined) throw new Error(`${name}: the store failed`, { cause: failed() });
          return d.reason === "ok";
        },
        close,
      };
    }
    default:
      close();
      throw new Error(`unknown in-Redis contender ${JSON.stringify(name)}; have ${COST_CONTENDERS.join(", ")}`);
  }
}

/** What one contender cost inside Redis in one round, per decision. */
export interface CostRound {
  /** µs in scripts (`usec` of EVALSHA, EVAL and their `_RO` forms in `INFO commandstats`). */
  readonly scriptUs: number;
  /** redis-server's CPU time (`INFO cpu`, user + system): scripts plus reading and answering the commands. */
  readonly serverCpuUs: number;
  /** Commands Redis ran: those sent and those the scripts called. */
  readonly commands: number;
  /** Calls of each command (lower case). */
  readonly byCommand: Record<string, number>;
}

/** Every round of one contender. */
export interface CostMeasurement {
  readonly name: string;
  readonly outcome: Outcome;
  readonly decisionsPerRound: number;
  readonly rounds: CostRound[];
}

/** Options of {@link measureRedisCost}. */
export interface RedisCostOptions {
  /** Rounds every contender runs (each round: every contender once, the order rotating). */
  rounds: number;
  /** Rounds may be added up to this many while a ratio of `pairs` is unstable. */
  maxRounds: number;
  /** Time the added rounds may take, in ms, from the end of the first `rounds`: no round is added after it. */
  budgetMs: number;
  /** Decisions per contender and round. */
  decisionsPerRound: number;
  /**
   * Parts each contender's decisions of a round are split into, each bracketed by its own
   * `CONFIG RESETSTAT` and `INFO commandstats`: the round's script µs is the median part's, so a
   * burst of other work on Redis's core during one part (the thread preempted inside a script, its
   * time counted as the script's) does not move the round's figure. @default 1
   */
  parts?: number;
  /** Decisions per contender before the first round (scripts loaded, code compiled). */
  warmupDecisions: number;
  /** Callers in flight per contender, each awaiting one decision at a time. */
  inFlight: number;
  /** Keys the decisions cycle through. */
  keyCount: number;
  /** Contenders (default: all of {@link COST_CONTENDERS}). */
  contenders?: string[];
  /** `[contender, against]` pairs whose ratio of script µs must be stable before rounds stop being added. */
  pairs: readonly (readonly [string, string])[];
  /** A core to pin this process (all its threads) to with `taskset`, or none. */
  clientCore?: number;
}

/** The child's answer. */
export interface RedisCostMeasurement {
  readonly contenders: CostMeasurement[];
  /** Whether every ratio of `pairs` was stable when the rounds stopped. */
  readonly settled: boolean;
  /** How this process was placed: `"pinned to core 1"`, or why not. */
  readonly client: string;
}

function infoFields(info: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of info.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

const SCRIPT_COMMANDS = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"]);
/** The profiler's own commands, left out of every count. */
const OWN_COMMANDS = new Set(["info", "config", "config|resetstat"]);

async function serverCpuSeconds(admin: IORedis): Promise<number> {
  const cpu = infoFields(await admin.info("cpu"));
  return Number(cpu.get("used_cpu_user")) + Number(cpu.get("used_cpu_sys"));
}

async function commandStats(admin: IORedis): Promise<Map<string, { calls: number; usec: number }>> {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const [field, value] of infoFields(await admin.info("commandstats"))) {
    if (!field.startsWith("cmdstat_")) continue;
    const name = field.slice("cmdstat_".length);
    if (OWN_COMMANDS.has(name)) continue;
    stats.set(name, { calls: Number(/(?:^|,)calls=(\d+)/.exec(value)?.[1] ?? 0), usec: Number(/(?:^|,)usec=(\d+)/.exec(value)?.[1] ?? 0) });
  }
  return stats;
}

/** `decisions` decisions by `inFlight` callers over `keys`, starting at key `offset`; throws on an unexpected outcome. */
async function decide(c: CostContender, keys: readonly string[], decisions: number, inFlight: number, offset: number): Promise<void> {
  let next = 0;
  let wrong = 0;
  const n = keys.length;
  const caller = async () => {
    while (next < decisions) {
      const i = next++;
      if (!(await c.once(keys[(offset + i) % n] as string))) wrong++;
    }
  };
  const callers: Promise<void>[] = [];
  for (let k = 0; k < Math.min(inFlight, decisions); k++) callers.push(caller());
  await Promise.all(callers);
  if (wrong > 0) throw new Error(`${c.name}: ${wrong} of ${decisions} decisions were not ${c.outcome}: the scenario is misconfigured`);
}

/** Pins this process (every thread) to `core`; says what happened. */
function pinSelf(core: number | undefined): string {
  if (core === undefined) return "not pinned";
  try {
    execFileSync("taskset", ["-a", "-cp", String(core), String(process.pid)], { stdio: "ignore" });
    return `pinned to core ${core}`;
  } catch (error) {
    return `not pinned (taskset -a -cp ${core} failed: ${(error as Error).message.split("\n")[0]})`;
  }
}

/**
 * Child-process entry: every contender against the redis-server at `url`, in interleaved rounds
 * (the starting contender rotating), each contender's slice bracketed by `CONFIG RESETSTAT` and
 * `INFO commandstats` / `INFO cpu` (outside any timing: nothing here is timed by the client).
 * Rounds are added while a ratio of `pairs` is unstable, up to `maxRounds` and `budgetMs`.
 */
export async function measureRedisCost(url: string, options: RedisCostOptions): Promise<RedisCostMeasurement> {
  const client = pinSelf(options.clientCore);
  const names = options.contenders ?? [...COST_CONTENDERS];
  const keys = shuffled(buildKeys(options.keyCount, "cost:"));
  const bridge = await startUpstashBridge({ redisUrl: url });
  const admin = await connectIORedis(url);
  const contenders: CostContender[] = [];
  try {
    for (const name of names) contenders.push(await build(name, url, bridge, keys));
    for (const c of contenders) await decide(c, keys, options.warmupDecisions, options.inFlight, 0);
    const rounds: CostRound[][] = contenders.map(() => []);
    const scriptUs = () => rounds.map((rs) => rs.map((r) => r.scriptUs));
    const stable = () => options.pairs.every(([a, b]) => allStable([a, b], [scriptUs()[names.indexOf(a)] ?? [], scriptUs()[names.indexOf(b)] ?? []], [b]));
    let deadline = Infinity;
    let settled = false;
    const maxRounds = Math.max(options.rounds, options.maxRounds);
    const parts = Math.max(1, Math.floor(options.parts ?? 1));
    const d = options.decisionsPerRound;
    const partDecisions = Math.max(1, Math.round(d / parts));
    for (let round = 0; round < maxRounds; round++) {
      if (round === options.rounds) deadline = Date.now() + options.budgetMs;
      if (round >= options.rounds) {
        settled = stable();
        if (settled || Date.now() >= deadline) break;
      }
      for (let k = 0; k < contenders.length; k++) {
        const i = (round + k) % contenders.length;
        const c = contenders[i] as CostContender;
        // the contender's decisions of this round in `parts` parts, each with its own statistics
        const partUs: number[] = [];
        let cpuUs = 0;
        let calls = 0;
        const callsBy: Record<string, number> = {};
        for (let part = 0; part < parts; part++) {
          // Redis's Lua heap is shared by every script: a full collection first (outside the
          // statistics), so a part's collection steps free its own contender's garbage, not the last one's
          await admin.eval("collectgarbage('collect') return 0", 0);
          await admin.config("RESETSTAT");
          const cpuBefore = await serverCpuSeconds(admin);
          await decide(c, keys, partDecisions, options.inFlight, (round * parts + part) * partDecisions);
          const cpuAfter = await serverCpuSeconds(admin);
          const stats = await commandStats(admin);
          let usec = 0;
          for (const [cmd, s] of stats) {
            if (SCRIPT_COMMANDS.has(cmd)) usec += s.usec;
            calls += s.calls;
            callsBy[cmd] = (callsBy[cmd] ?? 0) + s.calls;
          }
          partUs.push(usec / partDecisions);
          cpuUs += (cpuAfter - cpuBefore) * 1e6;
        }
        const all = partDecisions * parts;
        const byCommand = Object.fromEntries(Object.entries(callsBy).map(([cmd, n]) => [cmd, n / all]));
        (rounds[i] as CostRound[]).push({ scriptUs: median(partUs), serverCpuUs: cpuUs / all, commands: calls / all, byCommand });
      }
    }
    if (!settled) settled = stable();
    return {
      contenders: contenders.map((c, i) => ({ name: c.name, outcome: c.outcome, decisionsPerRound: partDecisions * parts, rounds: rounds[i] as CostRound[] })),
      settled,
      client,
    };
  } finally {
    for (const c of contenders) c.close();
    admin.disconnect();
    await bridge.close();
  }
}
