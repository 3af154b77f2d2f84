/**
 * `limit()` latency with the store far away: a delaying TCP proxy (`lib/delay-proxy.ts`) in front
 * of the private redis-server and another in front of the Upstash-REST bridge, each adding the same
 * round trip (both started by the section, in its own process). 4 instances of each contender, each with its own client, share one hot key at a
 * steady rate in real time (it is latency that is measured): Sluice with reservations and without,
 * on `RedisStore` (ioredis) and on `UpstashStore` (`@upstash/redis`), and `@upstash/ratelimit`.
 * The contenders take turns (`passes` times each), so load that drifts during the run reaches all.
 *
 * @module
 */
import { RateLimiter, type Store } from "@sluice/core";
import { RedisStore, UpstashStore } from "@sluice/redis";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { type LimitSpec, hotPolicy, upstashLimiter } from "./reservations-contenders.js";

export const RESERVE_REDIS = "Sluice + reserve, RedisStore";
export const PLAIN_REDIS = "Sluice, RedisStore";
export const RESERVE_UPSTASH = "Sluice + reserve, UpstashStore";
export const PLAIN_UPSTASH = "Sluice, UpstashStore";
export const UPSTASH_RATELIMIT = "@upstash/ratelimit";
/** Every contender, in table order. */
export const LATENCY_CONTENDERS = [RESERVE_REDIS, PLAIN_REDIS, RESERVE_UPSTASH, PLAIN_UPSTASH, UPSTASH_RATELIMIT] as const;

/** How the latency is measured. */
export interface LatencyOptions {
  readonly spec: LimitSpec;
  readonly instances: number;
  /** Requests per second of all instances together. */
  readonly ratePerS: number;
  /** Added to every round trip to the store by the proxies, in ms. */
  readonly roundTripMs: number;
  /** Each turn's first part, not recorded (the key turns hot again). */
  readonly warmupMs: number;
  /**
   * Added to the warm-up of each contender's first turn: its connections open and its code is
   * compiled, and the first round trips, slower than the rest, are behind it.
   */
  readonly primeMs: number;
  /** Each turn's recorded part. */
  readonly measureMs: number;
  /** Turns per contender. */
  readonly passes: number;
}

/** One contender's latencies, pooled over its turns. */
export interface LatencyRow {
  readonly contender: string;
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Of the recorded decisions, the share made from a reservation (Sluice). */
  readonly reservedShare: number;
  /** p50 and p99 of each turn, in the order run: whether the turns agree. */
  readonly turns: { readonly p50Ms: number; readonly p99Ms: number }[];
}

/** The `q` quantile (0–1) of sorted values, by the nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

/** One decision by instance `i`: resolves whether it was made from a reservation. */
type Decide = (i: number) => Promise<boolean>;

/**
 * Offers `ratePerS` requests a second in real time for `warmupMs + measureMs`, each request to the
 * next instance in turn, without waiting for the ones before (a server does not), and returns the
 * latency of each request after the warm-up: from the call of `limit()` to its answer. Allocates
 * nothing per request but the decision's own promise, so that the collector has little to pause for.
 */
async function steadyLoad(decide: Decide, options: LatencyOptions, warmupMs: number): Promise<{ latencies: number[]; reserved: number }> {
  const total = Math.floor(((warmupMs + options.measureMs) * options.ratePerS) / 1000);
  const first = Math.ceil((warmupMs * options.ratePerS) / 1000);
  const latencies = new Float64Array(Math.max(0, total - first));
  let reserved = 0;
  let open = 0;
  let issuedAll = false;
  let failure: unknown;
  let allDone: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allDone = resolve;
  });
  const answered = (k: number, calledAt: number, fromReservation: boolean) => {
    if (k >= first) {
      latencies[k - first] = performance.now() - calledAt;
      if (fromReservation) reserved++;
    }
    if (--open === 0 && issuedAll) allDone();
  };
  const start = performance.now();
  let k = 0;
  while (k < total) {
    const now = performance.now() - start;
    for (; k < total && (k * 1000) / options.ratePerS <= now; k++) {
      const i = k;
      const calledAt = performance.now();
      open++;
      decide(i % options.instances).then(
        (fromReservation) => answered(i, calledAt, fromReservation),
        (error: unknown) => {
          failure ??= error;
          answered(i, calledAt, false);
        },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  issuedAll = true;
  if (open > 0) await done;
  if (failure !== undefined) throw failure;
  return { latencies: Array.from(latencies), reserved };
}

/** The decide function of a contender, with its clients' closers. */
function contender(name: string, options: LatencyOptions, redisPort: number, upstash: { url: string; token: string }): { decide: Decide; close: () => void } {
  const n = options.instances;
  const sluice = (stores: Store[], reserve: boolean, prefix: string): Decide => {
    const limiters = stores.map((store) => new RateLimiter({ store, limits: hotPolicy(options.spec), prefix, onStoreError: "deny", reserve }));
    return async (i) => {
      const d = await (limiters[i] as RateLimiter).limit("hot");
      if (!d.allowed) throw new Error(`${name}: a decision was denied (${d.reason}): the scenario is misconfigured`);
      return d.reserved === true;
    };
  };
  const ioredis = () => Array.from({ length: n }, () => new IORedis(redisPort, "127.0.0.1"));
  const rest = () => Array.from({ length: n }, () => new UpstashRedis({ url: upstash.url, token: upstash.token, retry: false }));
  switch (name) {
    case RESERVE_REDIS:
    case PLAIN_REDIS: {
      const clients = ioredis();
      const decide = sluice(clients.map((c) => new RedisStore(c)), name === RESERVE_REDIS, `lat-${name === RESERVE_REDIS ? "r" : "p"}-io`);
      return { decide, close: () => clients.forEach((c) => c.disconnect()) };
    }
    case RESERVE_UPSTASH:
    case PLAIN_UPSTASH:
      return { decide: sluice(rest().map((c) => new UpstashStore(c)), name === RESERVE_UPSTASH, `lat-${name === RESERVE_UPSTASH ? "r" : "p"}-up`), close: () => {} };
    case UPSTASH_RATELIMIT: {
      const limiters = rest().map((redis) => new Ratelimit({ redis, limiter: upstashLimiter(options.spec), prefix: "lat-url" }));
      const decide: Decide = async (i) => {
        const r = await (limiters[i] as Ratelimit).limit("hot");
        if (!r.success) throw new Error(`${name}: a decision was denied: the scenario is misconfigured`);
        return false;
      };
      return { decide, close: () => {} };
    }
    default:
      throw new Error(`unknown latency contender ${JSON.stringify(name)}`);
  }
}

/** Where the contenders find the store: the delaying proxies' ports, and the bridge's token. */
export interface FarStore {
  /** The proxy in front of redis-server. */
  readonly redisPort: number;
  /** The proxy in front of the Upstash-REST bridge, and the bridge's token. */
  readonly upstashPort: number;
  readonly upstashToken: string;
}

const collect: () => void = typeof globalThis.gc === "function" ? () => (globalThis.gc as () => void)() : () => {};

/**
 * Child-process entry: every contender's `limit()` latency through the delaying proxies, in turns.
 * The proxies and the bridge run in another process (the section's), so that their work, and the
 * garbage it makes, never pauses the process that measures.
 */
export async function measureLatency(far: FarStore, options: LatencyOptions, names: readonly string[] = LATENCY_CONTENDERS): Promise<LatencyRow[]> {
  const upstash = { url: `http://127.0.0.1:${far.upstashPort}`, token: far.upstashToken };
  const made = names.map((name) => ({ name, ...contender(name, options, far.redisPort, upstash) }));
  const pooled = new Map(names.map((name) => [name, { latencies: [] as number[], reserved: 0, turns: [] as { p50Ms: number; p99Ms: number }[] }]));
  try {
    for (let pass = 0; pass < options.passes; pass++) {
      for (const c of made) {
        collect();
        const { latencies, reserved } = await steadyLoad(c.decide, options, options.warmupMs + (pass === 0 ? options.primeMs : 0));
        const sorted = [...latencies].sort((a, b) => a - b);
        const row = pooled.get(c.name)!;
        row.latencies.push(...latencies);
        row.reserved += reserved;
        row.turns.push({ p50Ms: quantile(sorted, 0.5), p99Ms: quantile(sorted, 0.99) });
      }
    }
  } finally {
    for (const c of made) c.close();
  }
  return names.map((name) => {
    const row = pooled.get(name)!;
    const sorted = row.latencies.sort((a, b) => a - b);
    return {
      contender: name,
      samples: sorted.length,
      p50Ms: quantile(sorted, 0.5),
      p99Ms: quantile(sorted, 0.99),
      maxMs: sorted.at(-1) ?? NaN,
      reservedShare: row.reserved / Math.max(1, sorted.length),
      turns: row.turns,
    };
  });
}
