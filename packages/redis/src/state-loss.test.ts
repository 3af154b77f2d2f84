import {
  type Decision,
  type LeakyBucketPolicy,
  type Policy,
  type PolicyKind,
  RateLimiter,
  SluiceStoreError,
  type Store,
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  type TokenBucketPolicy,
  tokenBucket,
} from "@sluice/core";
import { policyField } from "@sluice/core/store";
import { ReferenceLimiter, T0, plain, uniquePrefix } from "@sluice/testing";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { luaOf } from "./algorithms/index.js";
import { RedisStore } from "./redis-store.js";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

// Losing state (eviction, an operator's DEL or HDEL) may only FORGET it: never a
// `cost-exceeds-limit` for a cost that fits, and once the loss is behind, never more than the
// limit in any window. Every test here finds the storage keys and fields in Redis itself (SCAN,
// HKEYS), so a layout with more keys per identifier would be tested key by key too.

// ---------------------------------------------------------------------------------------------
// What "only forgets" means, per algorithm: every admission is one the algorithm would make with a
// state built from the admissions of its segment alone (the loss cuts the history in two: before,
// and from the loss on). A store that forgot more (or counted less than it forgot) would admit
// something no suffix of the history justifies.

interface Admission {
  readonly t: number; // ms
  readonly cost: number;
}

/** Per kind: the admissions `policy` could not have made from the segment's own history; empty if none. */
type Justifier<P extends Policy> = (policy: P, segment: readonly Admission[]) => string[];

/** A bucket (GCRA): its TAT never runs more than (burst + queue) emission intervals ahead of now. */
const bucketJustifier: Justifier<TokenBucketPolicy | LeakyBucketPolicy> = (policy, segment) => {
  const bad: string[] = [];
  const T = policy.emissionIntervalUs;
  let tat = 0;
  for (const { t, cost } of segment) {
    const nowUs = t * 1000;
    tat = Math.max(tat, nowUs) + cost * T;
    if (tat - nowUs > (policy.burst + policy.queue) * T) bad.push(`${policy.name}: tat ${tat - nowUs} µs ahead > ${(policy.burst + policy.queue) * T} (t=${t - T0})`);
  }
  return bad;
};

/** Every kind's check: the compiler refuses a kind without one. */
const JUSTIFIERS: { readonly [K in PolicyKind]: Justifier<Extract<Policy, { kind: K }>> } = {
  fixedWindow(policy, segment) {
    const bad: string[] = [];
    const used = new Map<number, number>();
    for (const { t, cost } of segment) {
      const idx = Math.floor(t / policy.windowMs);
      const total = (used.get(idx) ?? 0) + cost;
      used.set(idx, total);
      if (total > policy.limit) bad.push(`${policy.name}: ${total} > ${policy.limit} in window ${idx} (t=${t - T0})`);
    }
    return bad;
  },
  slidingWindow(policy, segment) {
    const bad: string[] = [];
    const W = policy.windowMs;
    const used = new Map<number, number>();
    for (const { t, cost } of segment) {
      const idx = Math.floor(t / W);
      const r = t - idx * W;
      const prev = used.get(idx - 1) ?? 0;
      const cur = (used.get(idx) ?? 0) + cost;
      used.set(idx, cur);
      if (prev * (W - r) + cur * W > policy.limit * W) bad.push(`${policy.name}: weighted ${prev}*(${W}-${r}) + ${cur}*${W} > ${policy.limit}*${W} (t=${t - T0})`);
    }
    return bad;
  },
  slidingLog(policy, segment) {
    const bad: string[] = [];
    for (let i = 0; i < segment.length; i++) {
      const t = segment[i]!.t;
      let sum = 0;
      for (let j = i; j >= 0 && segment[j]!.t > t - policy.windowMs; j--) sum += segment[j]!.cost;
      if (sum > policy.limit) bad.push(`${policy.name}: ${sum} > ${policy.limit} in (t-W, t] (t=${t - T0})`);
    }
    return bad;
  },
  tokenBucket: bucketJustifier,
  leakyBucket: bucketJustifier,
  // admissions alone cannot tell (releases free slots): its leases' loss has its own test below
  concurrency: () => [],
};

function unjustified(policy: Policy, segment: readonly Admission[]): string[] {
  return (JUSTIFIERS[policy.kind] as Justifier<Policy>)(policy, segment);
}

/** A small deterministic PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface Step {
  readonly t: number;
  readonly cost: number;
}

/** Bursts, same-millisecond requests, pauses of up to a window: ~4.5 windows of traffic. */
function schedule(seed: number, maxCost: number): Step[] {
  const rand = prng(seed);
  const steps: Step[] = [];
  let t = T0 + 17;
  for (let i = 0; i < 70; i++) {
    const roll = rand();
    t += roll < 0.2 ? 0 : roll < 0.85 ? 5 + Math.floor(rand() * 60) : 150 + Math.floor(rand() * 600);
    const cost = rand() < 0.75 ? 1 : 1 + Math.floor(rand() * maxCost);
    steps.push({ t, cost });
  }
  return steps;
}
/** The loss happens before this step (a bit past the middle: state is full and the limit binding). */
const LOSS_STEP = 38;

const WINDOW = 1000;
const CONFIGS: { name: string; policies: () => Policy[] }[] = [
  { name: "fixedWindow", policies: () => [fixedWindow({ limit: 6, window: WINDOW, name: "fw" })] },
  { name: "slidingWindow", policies: () => [slidingWindow({ limit: 6, window: WINDOW, name: "sw" })] },
  { name: "slidingLog", policies: () => [slidingLog({ limit: 6, window: WINDOW, name: "log" })] },
  { name: "tokenBucket", policies: () => [tokenBucket({ capacity: 6, refillRate: 6, interval: WINDOW, name: "tb" })] },
  { name: "leakyBucket", policies: () => [leakyBucket({ rate: 5, period: WINDOW, burst: 3, queue: 2, name: "lb" })] },
  {
    name: "all five in one limiter",
    policies: () => [
      slidingLog({ limit: 8, window: WINDOW, name: "log" }),
      fixedWindow({ limit: 9, window: WINDOW, name: "fw" }),
      slidingWindow({ limit: 9, window: WINDOW, name: "sw" }),
      tokenBucket({ capacity: 7, refillRate: 8, interval: WINDOW, name: "tb" }),
      leakyBucket({ rate: 8, period: WINDOW, burst: 5, queue: 2, name: "lb" }),
    ],
  },
];

/** What is lost: a whole Redis key, or one field of a hash (a policy's or `@expires`). */
type Target = { readonly key: string; readonly field?: string };
const describeTarget = (t: Target) => (t.field === undefined ? `DEL key ${t.key}` : `HDEL ${t.key} ${t.field}`);

type Transport = { name: string; store: (clock: () => number) => Store | Promise<Store>; close: () => Promise<void> };

describe("losing any storage key or field only forgets state (every algorithm, real Redis)", () => {
  let admin: IORedis;
  const transports: Transport[] = [];
  beforeAll(async () => {
    admin = new IORedis(inject("sluiceRedisUrl"));
    const io = new IORedis(inject("sluiceRedisUrl"));
    const node = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
    await node.connect();
    const upstash = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
    transports.push(
      { name: "ioredis", store: (clock) => createTestRedisStore(io, { clock }), close: async () => void (await io.quit()) },
      { name: "node-redis", store: (clock) => createTestRedisStore(node, { clock }), close: async () => void (await node.quit()) },
      { name: "upstash", store: (clock) => createTestUpstashStore(upstash, { clock }), close: async () => {} },
    );
  });
  afterAll(async () => {
    for (const t of transports) await t.close();
    await admin.quit();
  });

  /** Runs the schedule on a fresh prefix; `loss` runs before step LOSS_STEP. */
  async function run(transport: Transport, policies: Policy[], steps: Step[], loss?: (prefix: string) => Promise<void>, stopAt = steps.length) {
    let now = T0;
    const failures: unknown[] = [];
    const prefix = uniquePrefix("loss");
    const limiter = new RateLimiter({
      store: await transport.store(() => now),
      limits: policies,
      prefix,
      onStoreError: "deny",
      onStoreFailure: (error) => failures.push(error),
      denyCache: false, // the store's clock is the test's: every call must reach it
    });
    const decisions: Decision[] = [];
    for (const [i, step] of steps.slice(0, stopAt).entries()) {
      if (i === LOSS_STEP && loss) await loss(prefix);
      now = step.t;
      decisions.push(await limiter.limit("user", { cost: step.cost }));
    }
    expect(failures).toEqual([]);
    return { prefix, decisions };
  }

  /** The keys and hash fields the store holds for the identifier just before the loss. */
  async function targetsOf(transport: Transport, policies: Policy[], steps: Step[]): Promise<Target[]> {
    const { prefix } = await run(transport, policies, steps, undefined, LOSS_STEP);
    const [, keys] = await admin.scan(0, "MATCH", `*${prefix}*`, "COUNT", 10_000);
    const targets: Target[] = [];
    for (const key of keys.sort()) {
      const generic = key.replace(prefix, "<prefix>");
      targets.push({ key: generic });
      if ((await admin.type(key)) === "hash") for (const field of (await admin.hkeys(key)).sort()) targets.push({ key: generic, field });
    }
    return targets;
  }

  for (const transport of ["ioredis", "node-redis", "upstash"]) {
    for (const config of CONFIGS) {
      it(`${transport}: ${config.name}`, async () => {
        const t = transports.find((x) => x.name === transport)!;
        const policies = config.policies();
        const fields = policies.map((p) => policyField(p));
        // the largest cost every policy can admit: every cost of the schedule fits
        const maxCost = Math.min(...policies.map((p) => luaOf(p).maxCost(p)));
        const targets = await targetsOf(t, policies, schedule(1, maxCost));
        // one key per identifier: its policies' fields and "@expires", nothing else
        expect(targets.map(describeTarget)).toEqual(
          [undefined, ...[...fields, "@expires"].sort()].map((field) => describeTarget({ key: targets[0]!.key, ...(field ? { field } : {}) })),
        );
        for (const seed of [1, 2, 3]) {
          const steps = schedule(seed, maxCost);
          for (const target of targets) {
            const { decisions } = await run(t, policies, steps, async (prefix) => {
              const key = target.key.replace("<prefix>", prefix);
              const removed = target.field === undefined ? await admin.del(key) : await admin.hdel(key, target.field);
              expect(removed, `${describeTarget(target)} removed something`).toBe(1);
            });
            const where = `seed ${seed}, ${describeTarget(target)}`;
            // never a cost-exceeds-limit (every cost fits), never a store error
            expect(decisions.filter((d) => d.reason !== "ok" && d.reason !== "limit").map((d) => d.reason), where).toEqual([]);
            expect(decisions.every((d) => Number.isFinite(d.retryAfterMs) && d.remaining >= 0), where).toBe(true);
            // only forgets: the forgotten policies are justified by each side of the loss, the others by the whole history
            const forgotten = (i: number) => target.field === undefined || target.field === fields[i];
            const admitted = decisions.flatMap((d, i) => (d.allowed ? [{ t: steps[i]!.t, cost: steps[i]!.cost, i }] : []));
            for (const [i, policy] of policies.entries()) {
              const segments = forgotten(i)
                ? [admitted.filter((a) => a.i < LOSS_STEP), admitted.filter((a) => a.i >= LOSS_STEP)]
                : [admitted];
              expect(segments.flatMap((segment) => unjustified(policy, segment)), `${where}: ${policy.name}`).toEqual([]);
            }
            // and exactly a forgetting: a single policy decides like the reference model reset at the loss
            if (policies.length === 1) {
              const ref = new ReferenceLimiter(policies);
              const expected = steps.map((step, i) => {
                if (i === LOSS_STEP && forgotten(0)) ref.reset("user");
                return ref.limit("user", step.cost, step.t);
              });
              expect(decisions.map(plain), where).toEqual(expected);
            }
          }
        }
      });
    }
  }

  // A concurrency cap's state is the list of its leases (requests in flight). Losing it forgets
  // them: from then on at most `limit` new leases are handed out, releasing a forgotten lease frees
  // nothing (it cannot free a slot a newer request holds), and losing anything else keeps them.
  for (const transport of ["ioredis", "node-redis", "upstash"]) {
    it(`${transport}: a concurrency cap beside a rate limit only forgets its leases`, async () => {
      const t = transports.find((x) => x.name === transport)!;
      const LIMIT = 2;
      async function setup() {
        let now = T0;
        const failures: unknown[] = [];
        const prefix = uniquePrefix("loss-cc");
        const limiter = new RateLimiter({
          store: await t.store(() => now),
          limits: [concurrency({ limit: LIMIT, name: "cc", lease: "30s" }), fixedWindow({ limit: 100, window: "1h", name: "fw" })],
          prefix,
          onStoreError: "deny",
          onStoreFailure: (error) => failures.push(error),
          denyCache: false,
        });
        const decide = async () => {
          now += 10;
          const d = await limiter.limit("user");
          expect(["ok", "limit"]).toContain(d.reason);
          expect(d.remaining).toBeGreaterThanOrEqual(0);
          return d;
        };
        const held = [await decide(), await decide()];
        expect(held.map((d) => [d.allowed, typeof d.lease])).toEqual([
          [true, "string"],
          [true, "string"],
        ]);
        expect(await decide()).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
        return { limiter, prefix, failures, decide, held };
      }

      // the layout: one key for the identifier, a field per policy and "@expires"
      const first = await setup();
      const [, keys] = await admin.scan(0, "MATCH", `*${first.prefix}*`, "COUNT", 1000);
      expect(keys).toHaveLength(1);
      const key = keys[0]!.replace(first.prefix, "<prefix>");
      expect((await admin.hkeys(keys[0]!)).sort()).toEqual(["@expires", "cc|cc", "fw|fw"]);

      for (const target of [{ key }, { key, field: "cc|cc" }, { key, field: "fw|fw" }, { key, field: "@expires" }] as Target[]) {
        const where = describeTarget(target);
        const { limiter, prefix, failures, decide, held } = await setup();
        const stored = target.key.replace("<prefix>", prefix);
        expect(target.field === undefined ? await admin.del(stored) : await admin.hdel(stored, target.field), where).toBe(1);
        if (target.field === undefined || target.field === "cc|cc") {
          // the two leases in flight are forgotten: exactly LIMIT new ones, then denials
          const fresh = [await decide(), await decide()];
          expect(fresh.map((d) => d.allowed), where).toEqual([true, true]);
          expect(await decide(), where).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
          // releasing a forgotten lease frees nothing
          await limiter.release("user", held[0]!);
          await limiter.release("user", held[1]!);
          expect(await decide(), where).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
          // releasing a lease handed out after the loss frees its slot, once
          await limiter.release("user", fresh[0]!);
          expect((await decide()).allowed, where).toBe(true);
          expect(await decide(), where).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
        } else {
          // the leases are intact: still full; a release frees one slot, once
          expect(await decide(), where).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
          await limiter.release("user", held[0]!);
          expect((await decide()).allowed, where).toBe(true);
          expect(await decide(), where).toMatchObject({ allowed: false, reason: "limit", policy: "cc" });
        }
        expect(failures, where).toEqual([]);
      }
    });
  }

  it("losing the state forgets it, so the loss is visible: the first request after a DEL sees a full quota", async () => {
    const t = transports.find((x) => x.name === "ioredis")!;
    let now = T0;
    const prefix = uniquePrefix("loss");
    const limiter = new RateLimiter({ store: await t.store(() => now), limits: slidingLog({ limit: 3, window: "1m" }), prefix, onStoreError: "deny", denyCache: false });
    for (let i = 0; i < 3; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    expect(await limiter.limit("k")).toMatchObject({ allowed: false, reason: "limit", retryAfterMs: 60_000 });
    const [, keys] = await admin.scan(0, "MATCH", `*${prefix}*`, "COUNT", 1000);
    expect(keys).toHaveLength(1);
    await admin.hdel(keys[0]!, "3-per-1m|sl");
    now += 1;
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok", remaining: 2 });
  });
});

// ---------------------------------------------------------------------------------------------
// Eviction under maxmemory: a private redis-server each.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The most admissions whose `now` (ms) span at most `spanMs`: all of them fall in one window of `spanMs + 1` ms. */
function maxInSpan(times: readonly number[], spanMs: number): number {
  let best = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! > spanMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

describe("maxmemory with allkeys-lru under load (a private redis-server)", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer({ args: ["--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru"] });
  });
  afterAll(async () => {
    await server.stop();
  });

  it("evicting state only forgets it: no cost-exceeds-limit during the pressure, and exact limits once it is over", async () => {
    const LIMIT = 40;
    const WINDOW_MS = 1000;
    const HOT_KEYS = 6;
    const CALLERS_PER_KEY = 8;
    const hotClient = new IORedis(server.url, { maxRetriesPerRequest: 1 });
    const fillClient = new IORedis(server.url, { maxRetriesPerRequest: 1 });
    const admin = new IORedis(server.url);
    const limiter = new RateLimiter({
      store: new RedisStore(hotClient),
      limits: slidingLog({ limit: LIMIT, window: WINDOW_MS }),
      prefix: "lru",
      onStoreError: "deny",
      denyCache: false, // every decision from Redis: this measures what eviction does to it
    });
    const cold = new RateLimiter({ store: new RedisStore(fillClient), limits: slidingLog({ limit: 1000, window: "1h" }), prefix: "lru-cold", onStoreError: "deny" });
    await limiter.limit("warm-up"); // loads the script before the concurrent callers start

    let phase: "pressure" | "settle" | "measure" | "done" = "pressure";
    const reasons = new Map<string, number>();
    const admittedAt = { pressure: new Map<number, number[]>(), measure: new Map<number, number[]>() };
    const hot = Array.from({ length: HOT_KEYS }, (_, k) =>
      Array.from({ length: CALLERS_PER_KEY }, async () => {
        while (phase !== "done") {
          const at = phase;
          const d = await limiter.limit(`hot-${k}`);
          reasons.set(d.reason, (reasons.get(d.reason) ?? 0) + 1);
          if (d.remaining < 0) reasons.set("negative-remaining", (reasons.get("negative-remaining") ?? 0) + 1);
          if (d.allowed && (at === "pressure" || at === "measure")) {
            const list = admittedAt[at].get(k) ?? [];
            list.push(d.now);
            admittedAt[at].set(k, list);
          }
        }
      }),
    );
    // the pressure: blobs and cold identifiers, far more than 3 MB
    const filler = (async () => {
      let i = 0;
      while (phase === "pressure") {
        const batch = fillClient.pipeline();
        for (let j = 0; j < 50; j++, i++) batch.set(`blob:${i}`, "x".repeat(2048));
        await batch.exec();
        await Promise.all(Array.from({ length: 50 }, (_, j) => cold.limit(`cold-${i}-${j}`)));
      }
    })();
    await sleep(3000);
    phase = "settle";
    await filler;
    // the pressure is over: the data settles (blobs dropped, the rest ages past the LRU clock's second)
    let cursor = "0";
    do {
      const [next, keys] = await admin.scan(cursor, "MATCH", "blob:*", "COUNT", 1000);
      if (keys.length > 0) await admin.unlink(...keys);
      cursor = next;
    } while (cursor !== "0");
    await sleep(1500);
    phase = "measure";
    await sleep(2500);
    phase = "done";
    await Promise.all(hot.flat());

    const evicted = Number(/evicted_keys:(\d+)/.exec(await admin.info("stats"))?.[1]);
    const overPressure = [...admittedAt.pressure.values()].map((times) => maxInSpan(times, WINDOW_MS - 2));
    const overMeasure = [...admittedAt.measure.values()].map((times) => maxInSpan(times, WINDOW_MS - 2));
    console.log(
      `allkeys-lru, maxmemory 3mb: ${evicted} keys evicted; hot keys' most admitted in one ${WINDOW_MS} ms window (limit ${LIMIT}): ` +
        `under pressure ${JSON.stringify(overPressure)}, after it ${JSON.stringify(overMeasure)}; reasons ${JSON.stringify(Object.fromEntries(reasons))}`,
    );
    expect(evicted).toBeGreaterThan(0); // the pressure was real
    // eviction may only forget: never a cost-exceeds-limit (a cost of 1 always fits), never a failure
    expect([...reasons.keys()].sort()).toEqual(["limit", "ok"]);
    // once the pressure is over, exact: never more than the limit in any window
    expect(overMeasure).toHaveLength(HOT_KEYS);
    for (const count of overMeasure) expect(count).toBeLessThanOrEqual(LIMIT);
    hotClient.disconnect();
    fillClient.disconnect();
    admin.disconnect();
  }, 30_000);
});

describe("maxmemory with noeviction (a private redis-server)", () => {
  it("a full Redis refuses writes: the decision is a store error (SluiceStoreError, OOM), and Redis is used again once there is room", async () => {
    const server = await startRedisServer({ args: ["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"] });
    const client = new IORedis(server.url, { maxRetriesPerRequest: 1 });
    try {
      const failures: unknown[] = [];
      const limiter = new RateLimiter({
        store: new RedisStore(client),
        limits: fixedWindow({ limit: 5, window: "1h" }),
        prefix: "oom",
        onStoreFailure: (error) => failures.push(error),
      });
      expect((await limiter.limit("before")).reason).toBe("ok");
      // fill Redis up to maxmemory: large values, then small ones (a command's own buffer counts)
      let i = 0;
      for (const size of [4096, 256, 8]) {
        for (; ; i++) {
          try {
            await client.set(`blob:${i}`, "x".repeat(size));
          } catch (error) {
            expect(String(error)).toMatch(/OOM/);
            break;
          }
        }
      }
      const full = await limiter.limit("new-key");
      expect(full).toMatchObject({ allowed: true, reason: "store-error" }); // the default fallback
      expect(failures[0]).toBeInstanceOf(SluiceStoreError);
      expect(String((failures[0] as Error).message)).toMatch(/OOM/);
      await client.flushall(); // our own server
      expect(await limiter.limit("new-key")).toMatchObject({ allowed: true, reason: "ok", remaining: 4 });
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
