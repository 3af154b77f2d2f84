/**
 * The Redis contenders, measured in one child process against one private redis-server:
 *
 * - the ceiling: a raw ioredis `EVALSHA` of a one-key `INCR` script — the least a Lua-backed
 *   limiter can send and run per decision;
 * - rate-limiter-flexible's `RateLimiterRedis.consume` over ioredis;
 * - Sluice's `RateLimiter` over a `RedisStore` (ioredis): one limit (`tokenBucket`, `slidingWindow`)
 *   and a three-limit tier (`tokenBucket` burst + `slidingWindow` per minute + `fixedWindow` per day,
 *   like the demo's plans);
 *
 * every one with its own ioredis connection, auto-pipelining off, and `inFlight` concurrent callers
 * that each await one decision at a time. And, in another child process, Sluice's `UpstashStore`
 * through the Upstash-REST bridge with the real `@upstash/redis` client: HTTP requests per decision,
 * sequential and with 100 callers in flight.
 *
 * Each contender has its own copy of the same loop, so no loop's call site is shared (and made
 * polymorphic) by two callees.
 *
 * @module
 */
import { type Policy, RateLimiter, fixedWindow, slidingWindow, tokenBucket } from "@sluice/core";
import { RedisStore, UpstashStore } from "@sluice/redis";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { type Contender, type RunPhase, type ThroughputOptions, type ThroughputResult, buildKeys, measureThroughput, shuffled } from "./lib/harness.js";

export const CEILING = "ceiling: EVALSHA INCR";
export const RLF = "rate-limiter-flexible";
export const SLUICE_TOKEN_BUCKET = "Sluice tokenBucket";
export const SLUICE_SLIDING_WINDOW = "Sluice slidingWindow";
export const SLUICE_TIER = "Sluice tier (3 limits)";

/** Every TCP contender, in table order. */
export const TCP_CONTENDERS = [CEILING, RLF, SLUICE_TOKEN_BUCKET, SLUICE_SLIDING_WINDOW, SLUICE_TIER] as const;
export type TcpContenderName = (typeof TCP_CONTENDERS)[number];

/** The Sluice rows, with the kind of decision each one makes (which target applies). */
export const SLUICE_KIND: Readonly<Record<string, "single" | "tier">> = {
  [SLUICE_TOKEN_BUCKET]: "single",
  [SLUICE_SLIDING_WINDOW]: "single",
  [SLUICE_TIER]: "tier",
};

/** Each Sluice contender's key namespace. */
const SLUICE_PREFIX: Readonly<Record<string, string>> = {
  [SLUICE_TOKEN_BUCKET]: "bench-tb",
  [SLUICE_SLIDING_WINDOW]: "bench-sw",
  [SLUICE_TIER]: "bench-tier",
};

/** The ceiling's script: one key, one write, one integer back. */
export const CEILING_SCRIPT = "return redis.call('INCR', KEYS[1])";

/** A quota no run comes near: every measured decision is allowed. */
const NEVER = 1_000_000_000;

/** The limits of each Sluice contender; none can deny within a run. */
export function sluiceLimits(name: string): Policy[] {
  switch (name) {
    case SLUICE_TOKEN_BUCKET:
      return [tokenBucket({ capacity: NEVER, refillRate: NEVER })];
    case SLUICE_SLIDING_WINDOW:
      return [slidingWindow({ limit: NEVER, window: "1m" })];
    case SLUICE_TIER:
      // the demo's plan shape (burst, per minute, per day), with quotas that never deny
      return [
        tokenBucket({ capacity: NEVER, refillRate: NEVER, interval: "1m", name: "burst" }),
        slidingWindow({ limit: NEVER, window: "1m", name: "per-minute" }),
        fixedWindow({ limit: NEVER, window: "1d", name: "per-day" }),
      ];
    default:
      throw new Error(`no Sluice contender named ${JSON.stringify(name)}`);
  }
}

/** An ioredis connection to `url` with auto-pipelining off, resolved once it is ready. */
export async function connectIORedis(url: string): Promise<IORedis> {
  // auto-pipelining is ioredis's default already; it is spelled out because the issue measured it
  // making every client ~0.57x slower on a 2-core machine, and the comparison must not depend on it
  const client = new IORedis(url, { enableAutoPipelining: false, lazyConnect: true });
  await client.connect();
  return client;
}

/** A contender plus the connection it owns. */
export interface TcpContender extends Contender {
  readonly client: IORedis;
}

/**
 * The ceiling: `EVALSHA <INCR script> 1 <key>`, with `inFlight` callers. A reply that is not a
 * positive integer counts as not allowed (the harness then stops with an error).
 */
export async function ceilingContender(url: string, keys: readonly string[], inFlight: number): Promise<TcpContender> {
  const client = await connectIORedis(url);
  const sha = (await client.script("LOAD", CEILING_SCRIPT)) as string;
  const prefixed = keys.map((key) => `ceiling:${key}`); // built before anything is timed
  const n = prefixed.length;
  return {
    name: CEILING,
    expect: "allow",
    client,
    async run(ops: number): Promise<number> {
      let next = 0;
      let allowed = 0;
      const caller = async () => {
        while (next < ops) {
          const i = next++;
          const count = await client.evalsha(sha, 1, prefixed[i % n] as string);
          if (typeof count === "number" && count > 0) allowed++;
        }
      };
      const callers: Promise<void>[] = [];
      for (let c = 0; c < inFlight; c++) callers.push(caller());
      await Promise.all(callers);
      return allowed;
    },
  };
}

/**
 * rate-limiter-flexible ^11: `RateLimiterRedis` with an ioredis client (`storeClient`, and
 * `useRedisPackage: false`, which its docs reserve for node-redis), `consume(key)` with points
 * that never run out in a run. A denial would be a rejected `RateLimiterRes` (counted as not
 * allowed); any other rejection is a real error and is rethrown.
 */
export async function rlfContender(url: string, keys: readonly string[], inFlight: number): Promise<TcpContender> {
  const client = await connectIORedis(url);
  const limiter = new RateLimiterRedis({ storeClient: client, useRedisPackage: false, keyPrefix: "rlf", points: NEVER, duration: 3600 });
  const n = keys.length;
  return {
    name: RLF,
    expect: "allow",
    client,
    async run(ops: number): Promise<number> {
      let next = 0;
      let allowed = 0;
      const caller = async () => {
        while (next < ops) {
          const i = next++;
          try {
            await limiter.consume(keys[i % n] as string);
            allowed++;
          } catch (error) {
            if (!(error instanceof RateLimiterRes)) throw error;
          }
        }
      };
      const callers: Promise<void>[] = [];
      for (let c = 0; c < inFlight; c++) callers.push(caller());
      await Promise.all(callers);
      return allowed;
    },
  };
}

/**
 * Sluice: `new RateLimiter({ store: new RedisStore(ioredis), limits })`, `limit(key)`. A store
 * failure must not be measured as a decision from the fallback memory store, so the limiter fails
 * closed (`onStoreError: "deny"`) and the loop rethrows the store's error.
 */
export async function sluiceContender(name: string, url: string, keys: readonly string[], inFlight: number): Promise<TcpContender> {
  const client = await connectIORedis(url);
  let failure: unknown;
  const limiter = new RateLimiter({
    store: new RedisStore(client),
    limits: sluiceLimits(name),
    prefix: SLUICE_PREFIX[name] ?? "bench",
    onStoreError: "deny",
    onStoreFailure: (error) => {
      failure ??= error;
    },
  });
  const n = keys.length;
  return {
    name,
    expect: "allow",
    client,
    async run(ops: number): Promise<number> {
      let next = 0;
      let allowed = 0;
      const caller = async () => {
        while (next < ops) {
          const i = next++;
          const decision = await limiter.limit(keys[i % n] as string);
          if (decision.allowed) allowed++;
        }
      };
      const callers: Promise<void>[] = [];
      for (let c = 0; c < inFlight; c++) callers.push(caller());
      await Promise.all(callers);
      if (failure !== undefined) throw new Error(`${name}: the store failed`, { cause: failure });
      return allowed;
    },
  };
}

/** Builds one contender by name. */
export function tcpContender(name: string, url: string, keys: readonly string[], inFlight: number): Promise<TcpContender> {
  if (name === CEILING) return ceilingContender(url, keys, inFlight);
  if (name === RLF) return rlfContender(url, keys, inFlight);
  return sluiceContender(name, url, keys, inFlight);
}

/** Where one round's time went, per decision. */
export interface RoundProfile {
  /** CPU time of this Node process (user + system, all its threads), µs per decision. */
  readonly nodeCpuUs: number;
  /** CPU time of redis-server (`INFO cpu`: user + system, all threads), µs per decision. */
  readonly redisCpuUs: number;
  /** `EVALSHA`'s `usec_per_call` in `INFO commandstats`: the script's run time inside Redis, µs. */
  readonly evalshaUs: number;
  /** Commands Redis ran per decision: those the client sent and those a script called. */
  readonly redisCommandsPerDecision: number;
  /** Calls per decision of each command (lower case), scripts' calls included. */
  readonly commands: Record<string, number>;
  /** µs per call of each command in `INFO commandstats` (a script's time includes its calls'). */
  readonly usecPerCall: Record<string, number>;
}

function infoFields(info: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of info.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

async function redisCpuSeconds(admin: IORedis): Promise<number> {
  const cpu = infoFields(await admin.info("cpu"));
  return Number(cpu.get("used_cpu_user")) + Number(cpu.get("used_cpu_sys"));
}

/** `INFO commandstats` as command name → calls and µs, without the profiler's own INFO/CONFIG. */
async function commandStats(admin: IORedis): Promise<Map<string, { calls: number; usec: number }>> {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const [field, value] of infoFields(await admin.info("commandstats"))) {
    if (!field.startsWith("cmdstat_")) continue;
    const name = field.slice("cmdstat_".length);
    if (name === "info" || name === "config" || name.startsWith("config|")) continue;
    const calls = /(?:^|,)calls=(\d+)/.exec(value);
    const usec = /(?:^|,)usec=(\d+)/.exec(value);
    stats.set(name, { calls: Number(calls?.[1] ?? 0), usec: Number(usec?.[1] ?? 0) });
  }
  return stats;
}

/**
 * Adds per-round profiling to a contender through the harness's `beforeRun`/`afterRun` hooks,
 * which run outside the timed region: before a run, `CONFIG RESETSTAT` and a reading of both
 * processes' CPU time; after it, the readings again and `INFO commandstats`. Only measured rounds
 * are kept. Contenders run one at a time, so each round's figures are that contender's alone.
 */
export function profiled<C extends Contender>(contender: C, admin: IORedis): C & { readonly profiles: RoundProfile[] } {
  const profiles: RoundProfile[] = [];
  let nodeBefore = process.cpuUsage();
  let redisBefore = 0;
  return Object.assign(contender, {
    profiles,
    async beforeRun(): Promise<void> {
      await admin.config("RESETSTAT");
      redisBefore = await redisCpuSeconds(admin);
      nodeBefore = process.cpuUsage();
    },
    async afterRun(phase: RunPhase, ops: number): Promise<void> {
      const node = process.cpuUsage(nodeBefore);
      const redisAfter = await redisCpuSeconds(admin);
      if (phase !== "round") return;
      const stats = await commandStats(admin);
      const commands: Record<string, number> = {};
      const usecPerCall: Record<string, number> = {};
      let total = 0;
      for (const [name, s] of stats) {
        commands[name] = s.calls / ops;
        usecPerCall[name] = s.calls > 0 ? s.usec / s.calls : 0;
        total += s.calls;
      }
      profiles.push({
        nodeCpuUs: (node.user + node.system) / ops,
        redisCpuUs: ((redisAfter - redisBefore) * 1e6) / ops,
        evalshaUs: usecPerCall.evalsha ?? NaN,
        redisCommandsPerDecision: total / ops,
        commands,
        usecPerCall,
      });
    },
  });
}

/** One key-count scenario, measured in one process. */
export interface TcpScenarioMeasurement {
  readonly keys: number;
  readonly inFlight: number;
  readonly results: ThroughputResult[];
  /** Per contender (same order as `results`), per measured round. */
  readonly profiles: RoundProfile[][];
}

/** Options of {@link measureTcp}. */
export interface TcpOptions extends ThroughputOptions {
  /** Concurrent callers per contender, each awaiting one decision at a time. */
  inFlight: number;
  /** The key counts to measure, one scenario each (e.g. `[1, 10_000]`). */
  keyCounts: number[];
  /** Contenders to measure (default: all of {@link TCP_CONTENDERS}). */
  contenders?: string[];
}

/**
 * Child-process entry: every TCP contender against the redis-server at `url`, for each key count,
 * all in this process, interleaved round by round, each round profiled (outside its timing).
 */
export async function measureTcp(url: string, options: TcpOptions): Promise<TcpScenarioMeasurement[]> {
  const names = options.contenders ?? [...TCP_CONTENDERS];
  for (const name of names) {
    if (!(TCP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown contender ${JSON.stringify(name)}`);
  }
  const admin = await connectIORedis(url);
  const out: TcpScenarioMeasurement[] = [];
  try {
    for (const keyCount of options.keyCounts) {
      const keys = keyCount === 1 ? buildKeys(1) : shuffled(buildKeys(keyCount));
      const contenders: (TcpContender & { readonly profiles: RoundProfile[] })[] = [];
      try {
        for (const name of names) contenders.push(profiled(await tcpContender(name, url, keys, options.inFlight), admin));
        const { rounds, warmupMs, targetRoundMs, warmupOps, opsPerRound, slices, roundFigure, stableAgainst, maxRounds, budgetMs } = options;
        const results = await measureThroughput(contenders, {
          rounds,
          warmupMs,
          targetRoundMs,
          ...(stableAgainst !== undefined ? { stableAgainst } : {}),
          ...(maxRounds !== undefined ? { maxRounds } : {}),
          ...(budgetMs !== undefined ? { budgetMs } : {}),
          ...(warmupOps !== undefined ? { warmupOps } : {}),
          ...(opsPerRound !== undefined ? { opsPerRound } : {}),
          ...(slices !== undefined ? { slices } : {}),
          ...(roundFigure !== undefined ? { roundFigure } : {}),
        });
        out.push({ keys: keyCount, inFlight: options.inFlight, results, profiles: contenders.map((c) => c.profiles) });
      } finally {
        for (const c of contenders) c.client.disconnect();
      }
    }
  } finally {
    admin.disconnect();
  }
  return out;
}

/** One HTTP figure: decisions made with `callers` in flight and the HTTP requests they took. */
export interface UpstashMeasurement {
  /** Who decided: Sluice's `UpstashStore` (the tier, or one limit) or `@upstash/ratelimit`. */
  readonly contender: string;
  readonly callers: number;
  readonly decisions: number;
  /** HTTP requests the bridge received. */
  readonly requests: number;
  /** Requests per URL path (`/pipeline` with the client's auto-pipelining). */
  readonly byPath: Record<string, number>;
  /** Redis commands the bridge forwarded (one `EVALSHA` per decision). */
  readonly commands: number;
  readonly requestsPerDecision: number;
  readonly commandsPerDecision: number;
  /** Information only: the bridge runs in the same process as the client. */
  readonly opsPerSec: number;
}

/** Options of {@link measureUpstash}. */
export interface UpstashOptions {
  /** Decisions made one at a time. */
  sequentialDecisions: number;
  /** Decisions made by `concurrentCallers` callers in flight. */
  concurrentDecisions: number;
  concurrentCallers: number;
  /** Keys the decisions cycle through. */
  keyCount: number;
  /** Contenders to measure (default: all of {@link UPSTASH_CONTENDERS}). */
  contenders?: string[];
}

/**
 * Child-process entry: Sluice's `UpstashStore` with the real `@upstash/redis` client (its default
 * auto-pipelining on, `retry: false`) through the Upstash-REST bridge to the redis-server at `url`,
 * with the three-limit tier; counts the bridge's HTTP requests for sequential decisions and for
 * `concurrentCallers` callers in flight. Every decision must be allowed by Redis (`reason: "ok"`).
 */
export const UPSTASH_SLUICE_TIER = "Sluice UpstashStore, tier (3 limits)";
export const UPSTASH_SLUICE_FIXED = "Sluice UpstashStore, fixedWindow";
export const UPSTASH_SLUICE_SLIDING = "Sluice UpstashStore, slidingWindow";
export const UPSTASH_SLUICE_BUCKET = "Sluice UpstashStore, tokenBucket";
export const UPSTASH_RL_FIXED = "@upstash/ratelimit fixedWindow";
export const UPSTASH_RL_SLIDING = "@upstash/ratelimit slidingWindow";
export const UPSTASH_RL_BUCKET = "@upstash/ratelimit tokenBucket";
/** Every contender of the HTTP (Upstash REST) figures, in table order. */
export const UPSTASH_CONTENDERS = [
  UPSTASH_SLUICE_TIER,
  UPSTASH_SLUICE_FIXED,
  UPSTASH_RL_FIXED,
  UPSTASH_SLUICE_SLIDING,
  UPSTASH_RL_SLIDING,
  UPSTASH_SLUICE_BUCKET,
  UPSTASH_RL_BUCKET,
] as const;

type Decide = (key: string) => Promise<string | undefined>;

/** A decide function per contender: resolves `undefined` for an allowed decision, else why not. */
function upstashDecider(name: string, client: UpstashRedis): Decide {
  const sluice = (limits: Policy[], prefix: string): Decide => {
    const limiter = new RateLimiter({ store: new UpstashStore(client), limits, prefix, onStoreError: "deny" });
    return async (key) => {
      const d = await limiter.limit(key);
      return d.allowed && d.reason === "ok" ? undefined : `allowed ${d.allowed}, reason ${d.reason}`;
    };
  };
  const upstash = (limiter: ConstructorParameters<typeof Ratelimit>[0]["limiter"], prefix: string): Decide => {
    // analytics off (its default) and no ephemeral cache: one decision, one script call
    const ratelimit = new Ratelimit({ redis: client, limiter, prefix, analytics: false, ephemeralCache: false });
    return async (key) => {
      const r = await ratelimit.limit(key);
      await r.pending;
      return r.success ? undefined : `success ${r.success}, reason ${String(r.reason)}`;
    };
  };
  switch (name) {
    case UPSTASH_SLUICE_TIER:
      return sluice(sluiceLimits(SLUICE_TIER), "bench-upstash");
    case UPSTASH_SLUICE_FIXED:
      return sluice([fixedWindow({ limit: NEVER, window: "1h" })], "bench-upstash-fw");
    case UPSTASH_SLUICE_SLIDING:
      return sluice([slidingWindow({ limit: NEVER, window: "1m" })], "bench-upstash-sw");
    case UPSTASH_SLUICE_BUCKET:
      return sluice([tokenBucket({ capacity: NEVER, refillRate: NEVER })], "bench-upstash-tb");
    case UPSTASH_RL_FIXED:
      return upstash(Ratelimit.fixedWindow(NEVER, "1 h"), "bench-url-fw");
    case UPSTASH_RL_SLIDING:
      return upstash(Ratelimit.slidingWindow(NEVER, "1 m"), "bench-url-sw");
    case UPSTASH_RL_BUCKET:
      return upstash(Ratelimit.tokenBucket(NEVER, "1 s", NEVER), "bench-url-tb");
    default:
      throw new Error(`unknown Upstash contender ${JSON.stringify(name)}`);
  }
}

/**
 * Child-process entry: each contender of {@link UPSTASH_CONTENDERS} with the real `@upstash/redis`
 * client (its default auto-pipelining on, `retry: false`) through the Upstash-REST bridge to the
 * redis-server at `url`: Sluice's `UpstashStore` (the three-limit tier and each one-limit
 * algorithm) and `@upstash/ratelimit` 2 (the same algorithms). Counts the bridge's HTTP requests
 * and the Redis commands they carried, for sequential decisions and for `concurrentCallers`
 * callers in flight. Every decision must be allowed (Sluice: by Redis, `reason: "ok"`).
 */
export async function measureUpstash(url: string, options: UpstashOptions): Promise<UpstashMeasurement[]> {
  const contenders = options.contenders ?? UPSTASH_CONTENDERS;
  const bridge = await startUpstashBridge({ redisUrl: url });
  const out: UpstashMeasurement[] = [];
  try {
    const keys = shuffled(buildKeys(options.keyCount));
    const n = keys.length;
    for (const name of contenders) {
      // a client per contender: auto-pipelining batches only its own calls
      const decideOne = upstashDecider(name, new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }));
      let bad: string | undefined;
      const decide = async (i: number) => {
        const why = await decideOne(keys[i % n] as string);
        if (why !== undefined) bad ??= `decision ${i}: ${why}`;
      };
      const measure = async (callers: number, decisions: number): Promise<UpstashMeasurement> => {
        bridge.resetCounts();
        let next = 0;
        const start = performance.now();
        const caller = async () => {
          while (next < decisions) await decide(next++);
        };
        const all: Promise<void>[] = [];
        for (let c = 0; c < callers; c++) all.push(caller());
        await Promise.all(all);
        const elapsedMs = performance.now() - start;
        if (bad !== undefined) throw new Error(`${name}: a decision was not an allowed decision (${bad})`);
        const counts = bridge.counts;
        return {
          contender: name,
          callers,
          decisions,
          requests: counts.total,
          byPath: counts.byPath,
          commands: counts.commands,
          requestsPerDecision: counts.total / decisions,
          commandsPerDecision: counts.commands / decisions,
          opsPerSec: (decisions * 1000) / elapsedMs,
        };
      };
      // warm-up: loads the scripts if Redis lacks them (EVALSHA, NOSCRIPT, EVAL) and compiles the path
      await measure(1, 20);
      await measure(options.concurrentCallers, options.concurrentCallers * 2);
      out.push(await measure(1, options.sequentialDecisions), await measure(options.concurrentCallers, options.concurrentDecisions));
    }
    return out;
  } finally {
    await bridge.close();
  }
}
