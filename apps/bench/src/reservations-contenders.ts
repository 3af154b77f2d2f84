/**
 * The reservations section's counted measurements, each a child-process entry (JSON in, JSON out)
 * against the private redis-server the section started:
 *
 * - {@link measureStoreCalls}: store calls per 1,000 decisions on one hot key, 4 limiter instances
 *   with `reserve` on, each its own client and store, offering a steady rate that together is a
 *   share of the limit. Redis counts them itself (`INFO commandstats`: the `EVALSHA`, `EVAL` and
 *   `SCRIPT LOAD` calls the clients sent); the Upstash-REST bridge counts its HTTP requests and the
 *   commands they carried for `UpstashStore`.
 * - {@link measureUpstashRatelimit}: `@upstash/ratelimit` on the same bridge, its commands per 1,000.
 * - {@link measureAdmitted}: what 4 instances admit together at 120% of the limit, with
 *   reservations and with every decision made by the store, on the same arrivals.
 *
 * Sluice runs in simulated time ({@link Sim}): the test stores of `@sluice/redis/testing` take the
 * store's "now" from it and `reserve.clock` the limiters' local one; the arrivals are a steady
 * schedule; every store call is made at once, in order, and its answer is delivered a fixed
 * simulated latency later, while requests keep arriving. A run is the same every time and takes a
 * fraction of the time it simulates. The deny cache is off (its clock is the real one; every
 * denial is then the store's).
 *
 * @module
 */
import { type Policy, RateLimiter, type Store, fixedWindow, slidingWindow, tokenBucket } from "@sluice/core";
import type { BoundStore, MaybePromise, StoreNamespace } from "@sluice/core/store";
import { createTestRedisStore, createTestUpstashStore } from "@sluice/redis/testing";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";

/** The algorithms measured: a fixed and a sliding window, and a token bucket. */
export const HOT_ALGORITHMS = ["fixedWindow", "slidingWindow", "tokenBucket"] as const;
export type HotAlgorithm = (typeof HOT_ALGORITHMS)[number];

/**
 * A hot key's limit: `perSecond` units a second, counted over windows of `windowS` seconds (a
 * window allows `perSecond × windowS` per window; a bucket holds as many and refills `perSecond`).
 */
export interface LimitSpec {
  readonly algorithm: HotAlgorithm;
  readonly perSecond: number;
  readonly windowS: number;
}

/** Each algorithm's policy of a {@link LimitSpec} (a table, so that nothing branches on a kind). */
const HOT_POLICY: Readonly<Record<HotAlgorithm, (limit: number, spec: LimitSpec) => Policy>> = {
  fixedWindow: (limit, spec) => fixedWindow({ limit, window: spec.windowS * 1000 }),
  slidingWindow: (limit, spec) => slidingWindow({ limit, window: spec.windowS * 1000 }),
  tokenBucket: (limit, spec) => tokenBucket({ capacity: limit, refillRate: spec.perSecond }),
};

/** The policy of a {@link LimitSpec}. */
export function hotPolicy(spec: LimitSpec): Policy {
  return HOT_POLICY[spec.algorithm](spec.perSecond * spec.windowS, spec);
}

type UpstashAlgorithm = ConstructorParameters<typeof Ratelimit>[0]["limiter"];

/** The same limits as `@upstash/ratelimit` spells them. */
const UPSTASH_LIMITER: Readonly<Record<HotAlgorithm, (limit: number, spec: LimitSpec) => UpstashAlgorithm>> = {
  fixedWindow: (limit, spec) => Ratelimit.fixedWindow(limit, `${spec.windowS} s`),
  slidingWindow: (limit, spec) => Ratelimit.slidingWindow(limit, `${spec.windowS} s`),
  tokenBucket: (limit, spec) => Ratelimit.tokenBucket(spec.perSecond, "1 s", limit),
};

/** The limit of a {@link LimitSpec} as `@upstash/ratelimit` spells it. */
export function upstashLimiter(spec: LimitSpec): UpstashAlgorithm {
  return UPSTASH_LIMITER[spec.algorithm](spec.perSecond * spec.windowS, spec);
}

/** A steady load on one hot key, in simulated time. */
export interface SimOptions {
  readonly instances: number;
  /** The load offered by all instances together, as a share of the limit's rate (0.5: half). */
  readonly offered: number;
  /** Simulated time of the run, in ms. */
  readonly durationMs: number;
  /** Where the run starts, in epoch ms of the simulated clock (a window edge falls inside the run). */
  readonly startMs: number;
  /** How far the store is: every answer arrives this long after its call, in simulated ms. */
  readonly latencyMs: number;
}

/** What a run of decisions came to. */
export interface Tally {
  decisions: number;
  allowed: number;
  /** Decisions made from a reservation (`decision.reserved`). */
  reserved: number;
}

/**
 * Simulated time, with a store `latencyMs` away: a store call is made at once and in order (one at
 * a time, so that the store sees the same sequence on every run), and its answer is delivered when
 * the simulated clock reaches the call's time plus `latencyMs`. Meanwhile requests keep coming, as
 * they would to a server: what a limiter does while its answer is on its way is what is measured.
 */
export class Sim {
  localMs = 0;
  /** Store calls made, by method. */
  readonly calls: Record<string, number> = {};
  #chain: Promise<unknown> = Promise.resolve();
  /** A call was made or an answer delivered since the last settle. */
  #dirty = false;
  /** Answers on their way, in the order they are due (a constant latency keeps calls in order). */
  readonly #due: { at: number; deliver: () => void }[] = [];
  constructor(
    readonly startMs: number,
    readonly latencyMs: number,
  ) {}
  /** The store's clock: epoch ms, whole. */
  readonly store = (): number => this.startMs + Math.floor(this.localMs);
  /** The limiters' local clock (`reserve.clock`): ms since the start. */
  readonly local = (): number => this.localMs;

  /** A store call, made now; its answer delivered `latencyMs` later. */
  call<T>(method: string, run: () => MaybePromise<T>): Promise<T> {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
    this.#dirty = true;
    const done = this.#chain.then(run);
    this.#chain = done.catch(() => undefined);
    return new Promise<T>((resolve, reject) => {
      this.#due.push({ at: this.localMs + this.latencyMs, deliver: () => void done.then(resolve, reject) });
    });
  }

  /** Moves the clock on to `ms`, delivering every answer due by then at its own time. */
  async advance(ms: number): Promise<void> {
    for (;;) {
      await this.#settle();
      const next = this.#due[0];
      if (next === undefined || next.at > ms) break;
      this.#due.shift();
      this.localMs = next.at;
      this.#dirty = true;
      next.deliver();
    }
    this.localMs = ms;
  }

  /** Delivers every answer still on its way. */
  async drain(): Promise<void> {
    while (this.#due.length > 0) await this.advance((this.#due[this.#due.length - 1] as { at: number }).at);
    await this.#settle();
  }

  /** Waits for `work` that makes store calls (a give-back), delivering their answers as they come. */
  async until<T>(work: Promise<T>): Promise<T> {
    let settled = false;
    const done = work.finally(() => {
      settled = true;
    });
    while (!settled) await this.drain();
    return done;
  }

  /**
   * Lets every continuation run and every store call they made reach the store: after a call or a
   * delivery only (a decision made from a reservation starts its work, if any, synchronously).
   */
  async #settle(): Promise<void> {
    while (this.#dirty) {
      this.#dirty = false;
      await this.#chain;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

/** `inner` behind {@link Sim}'s latency: every call of the bound store goes through `sim.call`. */
export function simStore(inner: Store, sim: Sim): Store {
  return {
    bind(namespace: StoreNamespace): BoundStore {
      const b = inner.bind(namespace);
      const bound: BoundStore = {
        consume: (key, cost, lease) => sim.call("consume", () => (lease === undefined ? b.consume(key, cost) : b.consume(key, cost, lease))),
        peek: (key) => sim.call("peek", () => b.peek(key)),
        reset: (key) => sim.call("reset", () => b.reset(key)),
        refund: (key, cost, charge) => sim.call("refund", () => b.refund(key, cost, charge)),
        release: (key, lease) => sim.call("release", () => b.release(key, lease)),
      };
      if (b.reserve !== undefined) bound.reserve = (key, units, holdMs) => sim.call("reserve", () => b.reserve!(key, units, holdMs));
      if (b.control !== undefined) bound.control = (key, command) => sim.call("control", () => b.control!(key, command));
      return bound;
    },
  };
}

/**
 * Drives a steady load: the `k`-th request of the run comes at `k / rate` and goes to instance
 * `k mod n`, so each instance offers the same steady rate, their requests interleaved. Decisions
 * are not awaited one by one (a server does not), but every one is counted by the end.
 */
async function drive(limiters: readonly RateLimiter[], key: string, ratePerS: number, durationMs: number, sim: Sim): Promise<Tally> {
  const realStart = performance.now();
  const tally: Tally = { decisions: 0, allowed: 0, reserved: 0 };
  const count = Math.floor((durationMs * ratePerS) / 1000);
  const n = limiters.length;
  let failure: unknown;
  for (let k = 0; k < count; k++) {
    await sim.advance((k * 1000) / ratePerS);
    (limiters[k % n] as RateLimiter).limit(key).then((decision) => {
      tally.decisions++;
      if (decision.allowed) tally.allowed++;
      if (decision.reserved === true) tally.reserved++;
    }, (error: unknown) => (failure ??= error));
  }
  await sim.drain();
  if (failure !== undefined) throw failure;
  // Redis expires a key's state in real time, after the simulated time it was told: a simulation
  // slower than real time could see a window's count vanish while its simulated window runs
  const realMs = performance.now() - realStart;
  if (realMs > durationMs) throw new Error(`the simulation of ${durationMs} ms took ${Math.round(realMs)} ms: slower than real time, its counts are not to be trusted`);
  if (tally.decisions !== count) throw new Error(`${count - tally.decisions} of ${count} decisions never came`);
  return tally;
}

/** Limiters over `stores` (one per instance) behind the simulated latency, on the simulated clock. */
function simLimiters(stores: readonly Store[], spec: LimitSpec, prefix: string, sim: Sim, reserve: boolean): RateLimiter[] {
  return stores.map(
    (store) =>
      new RateLimiter({
        store: simStore(store, sim),
        limits: hotPolicy(spec),
        prefix,
        denyCache: false,
        onStoreError: "deny",
        // an answer waits for the simulated clock, not for real time
        timeoutMs: false,
        ...(reserve ? { reserve: { clock: sim.local } } : {}),
      }),
  );
}

/** Calls of the script commands since the last `CONFIG RESETSTAT`, from Redis's own `INFO commandstats`. */
export function scriptCalls(commandstats: string): number {
  let calls = 0;
  for (const match of commandstats.matchAll(/^cmdstat_(evalsha|eval|script\|load|script):calls=(\d+)/gm)) calls += Number(match[2]);
  return calls;
}

/** Store calls per 1,000 decisions of one contender on one store. */
export interface StoreCallsRow {
  readonly store: "Redis (ioredis)" | "Upstash (HTTP)";
  readonly spec: LimitSpec;
  /** The simulated round trip to the store, in ms. */
  readonly latencyMs: number;
  readonly tally: Tally;
  /** Script calls Redis counted (ioredis), or HTTP requests the bridge received (Upstash). */
  readonly calls: number;
  /** Over HTTP: the Redis commands those requests carried. */
  readonly commands?: number;
  readonly callsPer1000: number;
  /** The limiters' store calls by method (`reserve`, `refund`, `consume`…), as they made them. */
  readonly byMethod: Record<string, number>;
}

/**
 * Child-process entry: store calls per 1,000 decisions on one hot key for each spec, on Redis over
 * ioredis (counted by Redis) and on `UpstashStore` through the bridge (counted by the bridge).
 */
export async function measureStoreCalls(url: string, specs: readonly LimitSpec[], load: SimOptions, upstash = true): Promise<StoreCallsRow[]> {
  const admin = new IORedis(url);
  const bridge = await startUpstashBridge({ redisUrl: url });
  const rows: StoreCallsRow[] = [];
  const ratePerS = (s: LimitSpec) => s.perSecond * load.offered;
  try {
    for (const [i, spec] of specs.entries()) {
      const sim = new Sim(load.startMs, load.latencyMs);
      const clients = Array.from({ length: load.instances }, () => new IORedis(url));
      await Promise.all(clients.map((c) => c.ping()));
      // a prefix of its own per latency too: the runs share one redis-server and one simulated
      // start, and a bucket left by the run before (its key lives on for its TTL in real time)
      // would start this one drained
      const limiters = simLimiters(clients.map((c) => createTestRedisStore(c, { clock: sim.store })), spec, `calls-io-${load.latencyMs}-${i}`, sim, true);
      await admin.config("RESETSTAT");
      const tally = await drive(limiters, "hot", ratePerS(spec), load.durationMs, sim);
      const calls = scriptCalls(await admin.info("commandstats"));
      rows.push({ store: "Redis (ioredis)", spec, latencyMs: load.latencyMs, tally, calls, callsPer1000: (calls * 1000) / tally.decisions, byMethod: { ...sim.calls } });
      await sim.until(Promise.all(limiters.map((l) => l.returnReservations())));
      for (const c of clients) c.disconnect();
    }
    for (const [i, spec] of (upstash ? specs : []).entries()) {
      const sim = new Sim(load.startMs, load.latencyMs);
      const stores = Array.from({ length: load.instances }, () =>
        createTestUpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }), { clock: sim.store }),
      );
      const limiters = simLimiters(stores, spec, `calls-up-${load.latencyMs}-${i}`, sim, true);
      bridge.resetCounts();
      const tally = await drive(limiters, "hot", ratePerS(spec), load.durationMs, sim);
      const { total, commands } = bridge.counts;
      rows.push({ store: "Upstash (HTTP)", spec, latencyMs: load.latencyMs, tally, calls: total, commands, callsPer1000: (total * 1000) / tally.decisions, byMethod: { ...sim.calls } });
      await sim.until(Promise.all(limiters.map((l) => l.returnReservations())));
    }
    return rows;
  } finally {
    admin.disconnect();
    await bridge.close();
  }
}

/** `@upstash/ratelimit` on the bridge: HTTP requests and Redis commands per 1,000 decisions. */
export interface UpstashRatelimitRow {
  readonly spec: LimitSpec;
  readonly decisions: number;
  readonly allowed: number;
  readonly requestsPer1000: number;
  readonly commandsPer1000: number;
}

/**
 * Child-process entry: `@upstash/ratelimit` 2 with its defaults (its in-memory cache holds denials
 * only; analytics off), 4 instances each with its own client, on the same limits, `decisions`
 * decisions taken in turn on one key. Its calls per decision do not depend on the rate (it has no
 * way to decide an allowed request locally), so the decisions run back to back in real time.
 */
export async function measureUpstashRatelimit(url: string, specs: readonly LimitSpec[], instances: number, decisions: number): Promise<UpstashRatelimitRow[]> {
  const bridge = await startUpstashBridge({ redisUrl: url });
  const rows: UpstashRatelimitRow[] = [];
  try {
    for (const [i, spec] of specs.entries()) {
      const limiters = Array.from(
        { length: instances },
        () => new Ratelimit({ redis: new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false }), limiter: upstashLimiter(spec), prefix: `calls-url-${i}` }),
      );
      bridge.resetCounts();
      let allowed = 0;
      for (let k = 0; k < decisions; k++) {
        const r = await (limiters[k % instances] as Ratelimit).limit("hot");
        await r.pending;
        if (r.success) allowed++;
      }
      const { total, commands } = bridge.counts;
      rows.push({ spec, decisions, allowed, requestsPer1000: (total * 1000) / decisions, commandsPer1000: (commands * 1000) / decisions });
    }
    return rows;
  } finally {
    await bridge.close();
  }
}

/** What the instances admitted together, with reservations and without, on the same arrivals. */
export interface AdmittedRow {
  readonly spec: LimitSpec;
  readonly reserving: Tally;
  readonly perDecision: Tally;
  /** `reserving.allowed / perDecision.allowed`. */
  readonly ratio: number;
}

/**
 * Child-process entry: 4 instances offering `load.offered` of the limit (1.2: 120%) on one key of
 * Redis (ioredis), first with reservations, then with every decision made by the store, each on
 * its own key, the same arrivals in the same simulated time.
 */
export async function measureAdmitted(url: string, specs: readonly LimitSpec[], load: SimOptions): Promise<AdmittedRow[]> {
  const clients = Array.from({ length: load.instances }, () => new IORedis(url));
  const rows: AdmittedRow[] = [];
  try {
    for (const [i, spec] of specs.entries()) {
      const run = async (reserve: boolean) => {
        const sim = new Sim(load.startMs, load.latencyMs);
        const limiters = simLimiters(clients.map((c) => createTestRedisStore(c, { clock: sim.store })), spec, `admit-${reserve ? "r" : "d"}-${i}`, sim, reserve);
        const tally = await drive(limiters, "hot", spec.perSecond * load.offered, load.durationMs, sim);
        await sim.until(Promise.all(limiters.map((l) => l.returnReservations())));
        return tally;
      };
      const reserving = await run(true);
      const perDecision = await run(false);
      rows.push({ spec, reserving, perDecision, ratio: reserving.allowed / perDecision.allowed });
    }
    return rows;
  } finally {
    for (const c of clients) c.disconnect();
  }
}
