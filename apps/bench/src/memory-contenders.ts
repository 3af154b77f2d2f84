/**
 * The in-memory contenders: Sluice's `RateLimiter` over a `MemoryStore` with each algorithm,
 * rate-limiter-flexible's `RateLimiterMemory.consume`, and a naive floor (an `async` function over a
 * `Map` of one integer per key). Each throughput contender has the same loop shape: one awaited
 * decision per iteration over a prebuilt key array, counting the allowed ones; each contender has
 * its own copy of the loop, so no loop's call site is shared (and made polymorphic) by two callees.
 *
 * @module
 */
import { MemoryStore, type Policy, RateLimiter } from "@sluice/core";
import { MemoryStore as ExpressMemoryStore } from "express-rate-limit";
import { MemoryStore as HonoMemoryStore } from "hono-rate-limiter";
import { RateLimiter as TokenLimiter } from "limiter";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { type Contender, type ThroughputOptions, type ThroughputResult, buildKeys, measureThroughput, shuffled } from "./lib/harness.js";
import { BENCH_ALGORITHMS, type BenchAlgorithmId, MEASURED_ALGORITHMS } from "./algorithms/index.js";
import { type Decide, type HeapResult, measureHeapHere } from "./lib/heap.js";

export { denyWindowMs } from "./algorithms/index.js";

/** The Sluice algorithms measured (the five rate algorithms), in order: the table of `algorithms/index.ts`. */
export const ALGORITHMS: readonly Algorithm[] = MEASURED_ALGORITHMS;
export type Algorithm = BenchAlgorithmId;

export const RLF = "rate-limiter-flexible";
export const FLOOR = "naive floor";
export const CLOCK_FLOOR = "floor + Date.now()";
export const EXPRESS = "express-rate-limit MemoryStore";
export const HONO_RL = "hono-rate-limiter MemoryStore";
export const LIMITER = "limiter (token bucket)";

/**
 * The other peers, each measured in the process of the Sluice algorithm it implements: the two
 * middleware memory stores are fixed windows, `limiter` is a token bucket.
 */
export const PEERS: Readonly<Partial<Record<Algorithm, readonly string[]>>> = {
  fixedWindow: [EXPRESS, HONO_RL],
  tokenBucket: [LIMITER],
};

/**
 * express-rate-limit 8's `MemoryStore` (a fixed window): `increment(key)` answers the hits so far;
 * the middleware allows while they are at most the limit. It counts denied requests too (as the
 * middleware does).
 */
export function expressDecide(limit: number): (key: string) => Promise<boolean> {
  const store = new ExpressMemoryStore();
  store.init({ windowMs: 3_600_000 } as Parameters<ExpressMemoryStore["init"]>[0]);
  return async function decide(key: string): Promise<boolean> {
    const { totalHits } = await store.increment(key);
    return totalHits <= limit;
  };
}

/** hono-rate-limiter 0.5's `MemoryStore` (a fixed window), used as its middleware does. */
export function honoDecide(limit: number): (key: string) => Promise<boolean> {
  const store = new HonoMemoryStore();
  store.init({ windowMs: 3_600_000 } as Parameters<HonoMemoryStore["init"]>[0]);
  return async function decide(key: string): Promise<boolean> {
    const { totalHits } = await store.increment(key);
    return totalHits <= limit;
  };
}

/**
 * `limiter` 3: one `RateLimiter` (a token bucket) per key, made on the key's first request and kept
 * in a `Map` (the library limits one stream; per-key limiting is the caller's `Map`), asked with
 * `tryRemoveTokens(1)` (it never waits). Capacity `limit` per hour.
 */
export function limiterDecide(limit: number): (key: string) => Promise<boolean> {
  const buckets = new Map<string, TokenLimiter>();
  return async function decide(key: string): Promise<boolean> {
    let bucket = buckets.get(key);
    if (bucket === undefined) {
      bucket = new TokenLimiter({ tokensPerInterval: limit, interval: "hour" });
      buckets.set(key, bucket);
    }
    return bucket.tryRemoveTokens(1);
  };
}

/** A peer's contender: the same loop as the floor's, written out again for its own call site. */
export function peerContender(name: string, decide: (key: string) => Promise<boolean>, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  switch (name) {
    case EXPRESS:
      return {
        name,
        expect,
        async run(ops: number): Promise<number> {
          let allowed = 0;
          for (let i = 0; i < ops; i++) if (await decide(keys[i % n] as string)) allowed++;
          return allowed;
        },
      };
    case HONO_RL:
      return {
        name,
        expect,
        async run(ops: number): Promise<number> {
          let allowed = 0;
          for (let i = 0; i < ops; i++) if (await decide(keys[i % n] as string)) allowed++;
          return allowed;
        },
      };
    default:
      return {
        name,
        expect,
        async run(ops: number): Promise<number> {
          let allowed = 0;
          for (let i = 0; i < ops; i++) if (await decide(keys[i % n] as string)) allowed++;
          return allowed;
        },
      };
  }
}

function peerDecide(name: string, quota: number): (key: string) => Promise<boolean> {
  if (name === EXPRESS) return expressDecide(quota);
  if (name === HONO_RL) return honoDecide(quota);
  if (name === LIMITER) return limiterDecide(quota);
  throw new Error(`unknown peer ${JSON.stringify(name)}`);
}

/** A policy that never denies within a benchmark run (see `algorithms/index.ts`). */
export function allowPolicy(algorithm: Algorithm): Policy {
  return BENCH_ALGORITHMS[algorithm].allow();
}

/** A policy with a quota of 1 for at least an hour from `nowMs`: after one request, every request of the run is denied. */
export function denyPolicy(algorithm: Algorithm, nowMs = Date.now()): Policy {
  return BENCH_ALGORITHMS[algorithm].deny(nowMs);
}

/** A realistic policy for the idle-key memory figure (the numbers do not change the state's size). */
export function idlePolicy(algorithm: Algorithm): Policy {
  return BENCH_ALGORITHMS[algorithm].idle();
}

/**
 * The naive floor: the least a limiter can do per decision in an `async` API — one `Map` lookup
 * and, when allowed, one write of one integer per key.
 */
export function naiveFloor(limit: number): (key: string) => Promise<boolean> {
  const counts = new Map<string, number>();
  return async function decide(key: string): Promise<boolean> {
    const used = counts.get(key) ?? 0;
    if (used >= limit) return false;
    counts.set(key, used + 1);
    return true;
  };
}

/**
 * The naive floor plus one `Date.now()` per decision: not a target, but the ceiling of any limiter
 * that reads the clock once per decision, printed so the floor ratios can be read in context.
 */
export function clockFloor(limit: number): (key: string) => Promise<boolean> {
  const counts = new Map<string, number>();
  return async function decide(key: string): Promise<boolean> {
    const nowMs = Date.now();
    const used = counts.get(key) ?? 0;
    if (used >= limit || nowMs < 0) return false; // reads the clock so it cannot be optimized away
    counts.set(key, used + 1);
    return true;
  };
}

/** A Sluice limiter with one policy over its own `MemoryStore`. */
export function sluiceLimiter(policy: Policy, maxKeys: number): RateLimiter {
  return new RateLimiter({ store: new MemoryStore({ maxKeys }), limits: policy });
}

export function sluiceContender(name: string, limiter: RateLimiter, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name,
    expect,
    async run(ops: number): Promise<number> {
      let allowed = 0;
      for (let i = 0; i < ops; i++) {
        const decision = await limiter.limit(keys[i % n] as string);
        if (decision.allowed) allowed++;
      }
      return allowed;
    },
  };
}

export function rlfContender(limiter: RateLimiterMemory, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name: RLF,
    expect,
    async run(ops: number): Promise<number> {
      let allowed = 0;
      for (let i = 0; i < ops; i++) {
        try {
          await limiter.consume(keys[i % n] as string);
          allowed++;
        } catch (error) {
          // rate-limiter-flexible rejects a denial with a RateLimiterRes; anything else is a real error
          if (!(error instanceof RateLimiterRes)) throw error;
        }
      }
      return allowed;
    },
  };
}

export function floorContender(decide: (key: string) => Promise<boolean>, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name: FLOOR,
    expect,
    async run(ops: number): Promise<number> {
      let allowed = 0;
      for (let i = 0; i < ops; i++) {
        if (await decide(keys[i % n] as string)) allowed++;
      }
      return allowed;
    },
  };
}

/** Same loop as {@link floorContender}, written out again so that each loop's call site sees one callee. */
export function clockFloorContender(decide: (key: string) => Promise<boolean>, keys: readonly string[], expect: "allow" | "deny"): Contender {
  const n = keys.length;
  return {
    name: CLOCK_FLOOR,
    expect,
    async run(ops: number): Promise<number> {
      let allowed = 0;
      for (let i = 0; i < ops; i++) {
        if (await decide(keys[i % n] as string)) allowed++;
      }
      return allowed;
    },
  };
}

/** The throughput scenarios, with their targets against rate-limiter-flexible. */
export const SCENARIOS = {
  hot: { title: "1 hot key", expect: "allow" },
  many: { title: "many keys", expect: "allow" },
  deny: { title: "deny path (1 exhausted key)", expect: "deny" },
} as const;
export type ScenarioId = keyof typeof SCENARIOS;

/**
 * One scenario's contenders, in table order: rate-limiter-flexible, the floor, the floor with a
 * clock read, then Sluice with `algorithm`. For `"deny"`, every key has already used its quota of
 * 1, so every measured call is denied (a rejected promise for rate-limiter-flexible).
 */
export async function scenarioContenders(algorithm: Algorithm, keys: readonly string[], expect: "allow" | "deny"): Promise<Contender[]> {
  const quota = expect === "allow" ? 1e9 : 1;
  const rlf = new RateLimiterMemory({ points: quota, duration: 3600 });
  const floor = naiveFloor(quota);
  const withClock = clockFloor(quota);
  const limiter = sluiceLimiter(expect === "allow" ? allowPolicy(algorithm) : denyPolicy(algorithm), Math.max(keys.length, 1));
  const peers = (PEERS[algorithm] ?? []).map((name) => ({ name, decide: peerDecide(name, quota) }));
  if (expect === "deny") {
    for (const key of keys) {
      await rlf.consume(key);
      if (!(await floor(key)) || !(await withClock(key))) throw new Error("a floor denied a first request");
      if (!(await limiter.limit(key)).allowed) throw new Error(`${algorithm} denied a first request`);
      for (const peer of peers) if (!(await peer.decide(key))) throw new Error(`${peer.name} denied a first request`);
    }
  }
  return [
    rlfContender(rlf, keys, expect),
    floorContender(floor, keys, expect),
    clockFloorContender(withClock, keys, expect),
    sluiceContender(algorithm, limiter, keys, expect),
    ...peers.map((peer) => peerContender(peer.name, peer.decide, keys, expect)),
  ];
}

/** One scenario's measurements from one process. */
export interface ScenarioMeasurement {
  readonly scenario: ScenarioId;
  readonly keys: number;
  readonly results: ThroughputResult[];
}

/**
 * Child-process entry: every scenario for one Sluice algorithm beside the baselines, all in this
 * process, contenders interleaved round by round.
 */
export async function measureAlgorithm(algorithm: Algorithm, manyKeys: number, options: ThroughputOptions): Promise<ScenarioMeasurement[]> {
  if (!ALGORITHMS.includes(algorithm)) throw new Error(`unknown algorithm ${JSON.stringify(algorithm)}`);
  const out: ScenarioMeasurement[] = [];
  for (const scenario of Object.keys(SCENARIOS) as ScenarioId[]) {
    const keys = scenario === "many" ? shuffled(buildKeys(manyKeys)) : buildKeys(1);
    const contenders = await scenarioContenders(algorithm, keys, SCENARIOS[scenario].expect);
    out.push({ scenario, keys: keys.length, results: await measureThroughput(contenders, options) });
  }
  return out;
}

/** Builders of the subjects of the idle-key memory figure; each builds a limiter sized for `keyCount` keys. */
export const heapSubjects: Readonly<Record<string, (keyCount: number) => Decide>> = {
  [RLF]: () => {
    const limiter = new RateLimiterMemory({ points: 100, duration: 60 });
    return (key) => limiter.consume(key);
  },
  [FLOOR]: () => naiveFloor(100),
  [EXPRESS]: () => expressDecide(100),
  [HONO_RL]: () => honoDecide(100),
  [LIMITER]: () => limiterDecide(100),
  ...Object.fromEntries(
    ALGORITHMS.map((a): [string, (keyCount: number) => Decide] => [
      a,
      (keyCount) => {
        const limiter = sluiceLimiter(idlePolicy(a), keyCount + 1); // + the warm-up key
        return (key) => limiter.limit(key);
      },
    ]),
  ),
};

/** Child-process entry: bytes per idle key of one subject. */
export function measureHeap(subject: string, keyCount: number): Promise<HeapResult> {
  const create = heapSubjects[subject];
  if (create === undefined) throw new Error(`unknown heap subject ${JSON.stringify(subject)}; have ${Object.keys(heapSubjects).join(", ")}`);
  return measureHeapHere(subject, keyCount, create);
}
