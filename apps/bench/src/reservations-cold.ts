/**
 * What `reserve` costs a key too slow to reserve: decisions per second of a limiter with `reserve`
 * on beside the same limiter with it off, over the same kind of store, interleaved round by round
 * (`lib/harness.ts`), in memory and on Redis. Each child-process entry measures one pair.
 *
 * Cold by construction, whatever the machine's speed: every key is seen fewer than the 4 times
 * within `maxAgeMs` a key needs to be believed hot, so every measured decision takes the cold path:
 * the key counted in the reservations' fixed table of cold keys (`cold-keys.ts` of the core), no
 * object tracked for it. Every measured decision must be allowed by the store, never from a
 * reservation (else the run stops).
 *
 * In memory the store is a `MemoryStore` behind a plain wrapper: a limiter never reserves over a
 * `MemoryStore` itself (it makes no reservations object: with `reserve` on, its decisions run the
 * very code they run with it off, so a pair there would measure nothing but noise), and the
 * wrapper makes the limiter keep its books as it would over any other store, where a decision
 * costs least and their cost shows most. Decisions there come so fast (a million a second) that
 * {@link COLD_KEYS} keys would each come back several times a second: both stores' clocks (the
 * `MemoryStore` option, an epoch-ms clock like its default) run {@link MEMORY_CLOCK_SPEEDUP} times
 * faster than real time, so that each key is seen once every few seconds of the store's time, the
 * clock a key not tracked is counted on. On Redis real time serves: see {@link REDIS_KEYS}.
 *
 * @module
 */
import { type Decision, MemoryStore, RateLimiter, type ReserveOption, type Store, tokenBucket } from "@sluice/core";
import { RedisStore } from "@sluice/redis";
import IORedis from "ioredis";
import { type Contender, type RunPhase, type ThroughputOptions, type ThroughputResult, buildKeys, measureThroughput, shuffled } from "./lib/harness.js";

export const RESERVE_OFF = "reserve off";
export const RESERVE_ON = "reserve on";

/** A quota no run comes near. */
const NEVER = 1_000_000_000;
/** Cold keys in memory. */
export const COLD_KEYS = 100_000;
/** How much faster than real time the stores' clocks run in memory (see the module notes). */
export const MEMORY_CLOCK_SPEEDUP = 100;

/**
 * On Redis, keys each seen about once a second (under the 4 a key needs within `maxAgeMs` to be
 * hot): decisions must stay under 4 a second per key, 240,000 a second in all (more and the run
 * stops), several times what one Node process gets from a local redis-server.
 */
export const REDIS_KEYS = 60_000;

function limiterOver(store: Store, reserve: ReserveOption): RateLimiter {
  return new RateLimiter({ store, limits: tokenBucket({ capacity: NEVER, refillRate: NEVER }), prefix: "cold", onStoreError: "deny", reserve });
}

/** 1 for a decision the store allowed, else why the run must stop (the scenario broke, or the store failed). */
function counted(d: Decision): number {
  if (d.reserved === true) throw new Error("a cold key was decided from a reservation: the keys came faster than the scenario allows");
  if (!d.allowed) throw new Error(`a decision was ${d.reason === "ok" ? "denied" : `made without the store (${d.reason})`}: the scenario is misconfigured or the store failed`);
  return 1;
}

/** A `MemoryStore` that is not one to the limiter, its clock sped up (see the module notes). */
function wrappedMemory(): Store {
  const start = Date.now();
  const perf = performance;
  const origin = perf.now();
  const store = new MemoryStore({ maxKeys: COLD_KEYS * 2, clock: () => start + (perf.now() - origin) * MEMORY_CLOCK_SPEEDUP });
  return { bind: (namespace) => store.bind(namespace) };
}

/** A pair's measurement: decisions per second, and CPU time per decision of each round. */
export interface ColdMeasurement {
  readonly results: ThroughputResult[];
  /** By contender: CPU µs per decision of each measured round, this process's plus redis-server's (on Redis). */
  readonly cpuUsPerDecision: Record<string, number[]>;
}

/**
 * CPU time per decision, round by round, read around every measured slice and outside its timing:
 * this process's (`process.cpuUsage`) plus, with `serverCpuS`, the store's. Time a contender spends
 * waiting for the machine counts in its decisions per second but not here, so on a machine that
 * other work keeps busy this is the steadier figure of what a decision costs.
 */
function cpuMeter(slicesPerRound: number, serverCpuS?: () => Promise<number>) {
  const rounds: number[] = [];
  let us = 0;
  let ops = 0;
  let slices = 0;
  let node = process.cpuUsage();
  let server = 0;
  return {
    rounds,
    beforeRun: async (phase: RunPhase) => {
      if (phase !== "round") return;
      server = serverCpuS === undefined ? 0 : await serverCpuS();
      node = process.cpuUsage();
    },
    afterRun: async (phase: RunPhase, sliceOps: number) => {
      if (phase !== "round") return;
      const used = process.cpuUsage(node);
      us += used.user + used.system + (serverCpuS === undefined ? 0 : ((await serverCpuS()) - server) * 1e6);
      ops += sliceOps;
      if (++slices === slicesPerRound) {
        rounds.push(us / ops);
        us = ops = slices = 0;
      }
    },
  };
}

/** The two contenders, one after the other over `keys`; each has its own copy of the loop. */
function sequentialPair(off: RateLimiter, on: RateLimiter, keys: readonly string[]): Contender[] {
  const n = keys.length;
  let i = 0;
  let j = 0;
  return [
    {
      name: RESERVE_OFF,
      expect: "allow",
      run: async (ops) => {
        let allowed = 0;
        for (let k = 0; k < ops; k++) {
          allowed += counted(await off.limit(keys[i++ % n] as string));
        }
        return allowed;
      },
    },
    {
      name: RESERVE_ON,
      expect: "allow",
      run: async (ops) => {
        let allowed = 0;
        for (let k = 0; k < ops; k++) {
          allowed += counted(await on.limit(keys[j++ % n] as string));
        }
        return allowed;
      },
    },
  ];
}

/** Child-process entry: the pair over a `MemoryStore` behind a plain wrapper, one decision at a time, the stores' clocks sped up. */
export async function measureColdMemory(options: ThroughputOptions): Promise<ColdMeasurement> {
  const keys = shuffled(buildKeys(COLD_KEYS));
  const pair = sequentialPair(limiterOver(wrappedMemory(), false), limiterOver(wrappedMemory(), true), keys);
  return metered(pair, options);
}

/** Measures a pair with a {@link cpuMeter} on each contender. */
async function metered(pair: Contender[], options: ThroughputOptions, serverCpuS?: () => Promise<number>): Promise<ColdMeasurement> {
  const meters = pair.map(() => cpuMeter(Math.max(1, Math.floor(options.slices ?? 1)), serverCpuS));
  const results = await measureThroughput(
    pair.map((c, i) => ({ ...c, beforeRun: meters[i]!.beforeRun, afterRun: meters[i]!.afterRun })),
    options,
  );
  return { results, cpuUsPerDecision: Object.fromEntries(pair.map((c, i) => [c.name, meters[i]!.rounds])) };
}

/** `inFlight` callers, each awaiting one decision at a time, until `ops` are made. */
async function inFlightRun(limiter: RateLimiter, keys: readonly string[], ops: number, inFlight: number, cursor: { i: number }): Promise<number> {
  let left = ops;
  let allowed = 0;
  const caller = async () => {
    while (left > 0) {
      left--;
      // read after the await: several callers add to it
      const one = counted(await limiter.limit(keys[cursor.i++ % keys.length] as string));
      allowed += one;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, caller));
  return allowed;
}

/**
 * Child-process entry: the pair over `RedisStore` (ioredis, auto-pipelining off, a connection
 * each) on the redis-server at `url`, `inFlight` callers each, like the Redis section, over
 * {@link REDIS_KEYS} keys, `reserve: true` against none.
 */
export async function measureColdRedis(url: string, inFlight: number, options: ThroughputOptions): Promise<ColdMeasurement> {
  const keys = shuffled(buildKeys(REDIS_KEYS), 0x7ac4);
  const clients = [new IORedis(url, { enableAutoPipelining: false }), new IORedis(url, { enableAutoPipelining: false })];
  const admin = new IORedis(url);
  // redis-server's CPU seconds (user + system) from its own INFO
  const serverCpuS = async () => {
    const info = await admin.info("cpu");
    return Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
  };
  try {
    const [off, on] = clients.map((c, k) => limiterOver(new RedisStore(c), k === 1));
    const offCursor = { i: 0 };
    const onCursor = { i: 0 };
    const contenders: Contender[] = [
      { name: RESERVE_OFF, expect: "allow", run: (ops) => inFlightRun(off as RateLimiter, keys, ops, inFlight, offCursor) },
      { name: RESERVE_ON, expect: "allow", run: (ops) => inFlightRun(on as RateLimiter, keys, ops, inFlight, onCursor) },
    ];
    return await metered(contenders, options, serverCpuS);
  } finally {
    for (const c of [...clients, admin]) c.disconnect();
  }
}
