/**
 * Overrides and manual blocks in Redis, against core's reference (`decideState`, `peekState`,
 * `refundState`, `releaseState`, `controlState` over a JSON state): random sequences of decisions,
 * peeks, refunds, releases, resets, override and block commands and clock moves, on every kind,
 * must answer exactly alike, through each client. Then what the reference cannot show: the hash's
 * TTL, one round trip per call, the generated Lua's limits, and two processes sharing one Redis.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  MAX_POLICIES,
  type Policy,
  RateLimiter,
  SluiceInputError,
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import {
  type BoundStore,
  type RefundCharge,
  type StoreCommand,
  type StoreResult,
  type StoredState,
  controlState,
  decideState,
  peekState,
  refundState,
  releaseState,
} from "@sluice/core/store";
import { T0, policyFromSpec, policySpecArbitrary, uniquePrefix } from "@sluice/testing";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { Redis as UpstashRedis } from "@upstash/redis";
import fc from "fast-check";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type IORedisLike, RedisStore } from "./redis-store.js";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";
import { type UpstashRedisLike, UpstashStore } from "./upstash-store.js";

// ---------------------------------------------------------------------------------------------
// The differential run: one key, one namespace, a JSON state beside it run by core's reference.

type Step =
  | { op: "advance"; ms: number }
  | { op: "consume"; cost: number }
  | { op: "peek" }
  | { op: "refund"; cost: number; of: number | undefined }
  | { op: "release"; of: number }
  | { op: "reset" }
  | { op: "control"; command: StoreCommand };

/** Durations that land on one another: a clock move of one of them reaches an override's or a block's end exactly. */
const SPANS = [1, 5, 100, 250, 1000, 2500];

/**
 * An override's body for `names` (core's stored form): a scale (clamps included), quotas (a name of
 * no policy here too), or unlimited. `huge`: quotas up to Number.MAX_SAFE_INTEGER (a scale of
 * 1e300 clamps a window's to it), whose `remaining` node-redis 5 cannot read exactly (its RESP
 * integer decoder computes `n * 10 + byte - 48`, which leaves 2^53 for values within 57 of it: an
 * error of the client, also for a policy created with such a limit); without it, at most 2^45.
 */
function bodyArbitrary(names: string[], huge: boolean): fc.Arbitrary<string> {
  const scale = fc.oneof(
    fc.constantFrom(0.5, 1, 1.5, 2, 3, 10, 0.1, 1e-9, 2 / 3, ...(huge ? [1e300] : [1e6])),
    fc.double({ min: 0.01, max: 20, noNaN: true, noDefaultInfinity: true }).filter((x) => x > 0),
  );
  const quota = fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constantFrom(2 ** 45, huge ? Number.MAX_SAFE_INTEGER : 2 ** 41));
  const quotas = fc
    .uniqueArray(fc.constantFrom(...names, "elsewhere"), { minLength: 1, maxLength: names.length + 1 })
    .chain((chosen) => fc.tuple(...chosen.map((name) => quota.map((q) => `${name}=${q}`))))
    .map((entries) => `q,${[...entries].sort().join(",")}`);
  return fc.oneof(
    { arbitrary: scale.map((x) => `s,${String(x)}`), weight: 3 },
    { arbitrary: quotas, weight: 3 },
    { arbitrary: fc.constant("u"), weight: 1 },
  );
}

function commandArbitrary(names: string[], huge: boolean): fc.Arbitrary<StoreCommand> {
  return fc.oneof(
    { arbitrary: fc.constant<StoreCommand>({ op: "getOverride" }), weight: 1 },
    {
      arbitrary: fc.record({ body: bodyArbitrary(names, huge), ttlMs: fc.oneof(fc.constant(0), fc.constantFrom(...SPANS)) }).map(
        ({ body, ttlMs }): StoreCommand => ({ op: "setOverride", override: body, ttlMs }),
      ),
      weight: 5,
    },
    { arbitrary: fc.constant<StoreCommand>({ op: "clearOverride" }), weight: 2 },
    { arbitrary: fc.constantFrom(...SPANS).map((durationMs): StoreCommand => ({ op: "block", durationMs })), weight: 2 },
    { arbitrary: fc.constant<StoreCommand>({ op: "unblock" }), weight: 1 },
  );
}

function stepArbitrary(names: string[], huge: boolean): fc.Arbitrary<Step> {
  const cost = fc.oneof({ arbitrary: fc.constant(1), weight: 3 }, { arbitrary: fc.integer({ min: 1, max: 5 }), weight: 1 });
  return fc.oneof(
    { arbitrary: fc.oneof(fc.constantFrom(...SPANS), fc.integer({ min: 0, max: 3000 })).map((ms): Step => ({ op: "advance", ms })), weight: 5 },
    { arbitrary: cost.map((c): Step => ({ op: "consume", cost: c })), weight: 8 },
    { arbitrary: fc.constant<Step>({ op: "peek" }), weight: 1 },
    { arbitrary: fc.record({ cost, of: fc.option(fc.nat(), { nil: undefined }) }).map(({ cost: c, of }): Step => ({ op: "refund", cost: c, of })), weight: 2 },
    { arbitrary: fc.nat().map((of): Step => ({ op: "release", of })), weight: 1 },
    { arbitrary: fc.constant<Step>({ op: "reset" }), weight: 1 },
    { arbitrary: commandArbitrary(names, huge).map((command): Step => ({ op: "control", command })), weight: 4 },
  );
}

interface Case {
  policies: Policy[];
  steps: Step[];
}

/** Random cases: one to three small random policies of any kind (penalty boxes now and then), and up to 40 steps. */
function cases(huge: boolean): fc.Arbitrary<Case> {
  return fc
    .array(policySpecArbitrary(), { minLength: 1, maxLength: 3 })
    .map((specs) => specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as never)))
    .chain((policies) =>
      fc.record({ policies: fc.constant(policies), steps: fc.array(stepArbitrary(policies.map((p) => p.name), huge), { minLength: 1, maxLength: 40 }) }),
    );
}

/** The store's answer in the shape of the reference's (the marks only where the reference hands them out). */
function observed(result: StoreResult, withMarks: boolean): Record<string, unknown> {
  return { now: result.now, policies: result.policies, override: result.override, ...(withMarks ? { marks: result.marks } : {}) };
}

/** Runs one case on `bound` (whose clock reads `clock.ms`) and on the reference, comparing every answer. */
async function runCase(bound: BoundStore, clock: { ms: number }, c: Case, key: string): Promise<void> {
  const { policies } = c;
  const leases = policies.some((p) => "leaseMs" in p); // a concurrency cap (the only policy with a lease)
  let state: StoredState | undefined;
  let lease = 0;
  const charged: { now: number; marks?: readonly number[]; lease: number }[] = [];
  for (const [i, step] of c.steps.entries()) {
    const nowUs = clock.ms * 1000;
    const where = `step ${i} ${JSON.stringify(step)} at ${clock.ms}`;
    switch (step.op) {
      case "advance":
        clock.ms += step.ms;
        break;
      case "consume": {
        const id = leases ? ++lease : 0;
        const expected = decideState(policies, state, nowUs, step.cost, id);
        if (expected.state !== undefined) state = expected.state;
        const actual = await bound.consume(key, step.cost, id === 0 ? undefined : id);
        const allowed = expected.policies.every((p) => p.allowed);
        expect(observed(actual, allowed && expected.marks !== undefined), where).toEqual({
          now: clock.ms,
          policies: expected.policies,
          override: expected.override,
          ...(allowed && expected.marks !== undefined ? { marks: expected.marks } : {}),
        });
        if (allowed) charged.push({ now: actual.now, ...(actual.marks === undefined ? {} : { marks: actual.marks }), lease: id });
        break;
      }
      case "peek": {
        const expected = peekState(policies, state, nowUs);
        expect(observed(await bound.peek(key), false), where).toEqual({ now: clock.ms, policies: expected.policies, override: expected.override });
        break;
      }
      case "refund": {
        const of = step.of === undefined || charged.length === 0 ? undefined : charged[step.of % charged.length];
        const charge: RefundCharge | undefined = of === undefined ? undefined : { atMs: of.now, marks: of.marks };
        const expected = refundState(policies, state, nowUs, step.cost, charge);
        if (expected.state !== undefined) state = expected.state;
        expect(observed(await bound.refund(key, step.cost, charge), false), where).toEqual({ now: clock.ms, policies: expected.policies, override: expected.override });
        break;
      }
      case "release": {
        if (!leases) break;
        const id = charged.length === 0 ? 1 : (charged[step.of % charged.length] as { lease: number }).lease;
        if (id === 0) break;
        const expected = releaseState(policies, state, nowUs, id);
        if (expected.state !== undefined) state = expected.state;
        expect(observed(await bound.release(key, id), false), where).toEqual({ now: clock.ms, policies: expected.policies, override: expected.override });
        break;
      }
      case "reset":
        state = undefined;
        await bound.reset(key);
        break;
      case "control": {
        const expected = controlState(policies, state, nowUs, step.command);
        if (expected.state !== undefined) state = expected.state;
        const actual = await (bound.control as NonNullable<BoundStore["control"]>)(key, step.command);
        expect({ now: actual.now, override: actual.override }, where).toEqual({ now: clock.ms, override: expected.override });
        break;
      }
    }
  }
}

describe("overrides and manual blocks decide exactly as core's reference (decideState, peekState, refundState, releaseState, controlState)", () => {
  const transports: [string, number, boolean, (clock: { ms: number }) => Promise<{ bound: (policies: Policy[]) => BoundStore; close: () => Promise<void> }>][] = [
    [
      "RedisStore + ioredis",
      300,
      true,
      async (clock) => {
        const client = new IORedis(inject("sluiceRedisUrl"));
        const store = createTestRedisStore(client, { clock: () => clock.ms });
        return { bound: (policies) => store.bind({ prefix: uniquePrefix("ov"), policies }), close: async () => void (await client.quit()) };
      },
    ],
    [
      "RedisStore + node-redis",
      60,
      false,
      async (clock) => {
        const client = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
        await client.connect();
        const store = createTestRedisStore(client, { clock: () => clock.ms });
        return { bound: (policies) => store.bind({ prefix: uniquePrefix("ov"), policies }), close: async () => void (await client.quit()) };
      },
    ],
    [
      // the bridge reads Redis's replies with node-redis
      "UpstashStore + @upstash/redis (HTTP bridge)",
      40,
      false,
      async (clock) => {
        const redis = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
        const store = createTestUpstashStore(redis, { clock: () => clock.ms });
        return { bound: (policies) => store.bind({ prefix: uniquePrefix("ov"), policies }), close: async () => undefined };
      },
    ],
  ];
  for (const [name, runs, huge, open] of transports) {
    it(`${name}: ${runs} random sequences over every kind`, async () => {
      const clock = { ms: T0 };
      const { bound, close } = await open(clock);
      try {
        await fc.assert(
          fc.asyncProperty(cases(huge), async (c) => {
            clock.ms = T0 + 17;
            await runCase(bound(c.policies), clock, c, "k");
          }),
          { numRuns: runs },
        );
      } finally {
        await close();
      }
    }, 120_000);
  }
});

// ---------------------------------------------------------------------------------------------
// What the reference cannot show: the hash in Redis (its TTL, the fields dropped), the calls sent.

describe("the hash in Redis", () => {
  let io: IORedis;
  const clock = { ms: T0 };
  let store: RedisStore;
  beforeAll(() => {
    io = new IORedis(inject("sluiceRedisUrl"));
    store = createTestRedisStore(io, { clock: () => clock.ms });
  });
  afterAll(async () => {
    await io.quit();
  });
  const hashOf = (prefix: string, key: string) => `{${prefix}::${key}}`;
  const control = (bound: BoundStore, key: string, command: StoreCommand) => (bound.control as NonNullable<BoundStore["control"]>)(key, command);

  it("an override without an end keeps the hash (no TTL, also after decisions that push @expires); clearing it gives the TTL back", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [fixedWindow({ limit: 5, window: "1s", name: "w" })] });
    await bound.consume("k", 1);
    const key = (await io.keys(`{${prefix}*`))[0] as string;
    expect(key).toBe(hashOf(prefix, "k"));
    expect(await io.pttl(key)).toBeGreaterThan(0);
    await control(bound, "k", { op: "setOverride", override: "s,2", ttlMs: 0 });
    expect(await io.pttl(key)).toBe(-1);
    for (let i = 0; i < 5; i++) {
      clock.ms += 1000; // a new window each time: every write pushes @expires
      expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: true, limit: 10 });
      expect(await io.pttl(key)).toBe(-1);
    }
    await control(bound, "k", { op: "block", durationMs: 60_000 });
    expect(await io.pttl(key)).toBe(-1);
    await control(bound, "k", { op: "clearOverride" });
    // the block's end (and its slack) now sets the TTL
    const ttl = await io.pttl(key);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
    expect(await io.hexists(key, "|override")).toBe(0);
  });

  it("a hash holding nothing live but an override without an end goes when the override is cleared", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [tokenBucket({ capacity: 5, refillRate: 1, name: "b" })] });
    await control(bound, "k", { op: "setOverride", override: "u", ttlMs: 0 });
    expect(await io.exists(hashOf(prefix, "k"))).toBe(1);
    expect(await io.pttl(hashOf(prefix, "k"))).toBe(-1);
    expect((await bound.consume("k", 1)).override).toEqual({ unlimited: true });
    await control(bound, "k", { op: "clearOverride" });
    expect(await io.exists(hashOf(prefix, "k"))).toBe(0);
  });

  it("an override with an end, or a manual block, keeps the hash at least until its end", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [slidingLog({ limit: 5, window: "1s", name: "l" })] });
    await bound.consume("k", 1);
    const key = hashOf(prefix, "k");
    expect(await io.pttl(key)).toBeLessThanOrEqual(2000);
    await control(bound, "k", { op: "setOverride", override: "q,l=50", ttlMs: 3_600_000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(3_600_000);
    await control(bound, "k", { op: "block", durationMs: 7_200_000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(7_200_000);
    // a shorter block later does not shorten it
    await control(bound, "k", { op: "block", durationMs: 1000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(7_100_000);
  });

  it("an override or manual block that ended is ignored, and dropped at the next write (not by a read)", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("stale");
    const bound = store.bind({ prefix, policies: [fixedWindow({ limit: 3, window: "1m", name: "w" })] });
    const key = hashOf(prefix, "k");
    await control(bound, "k", { op: "setOverride", override: "s,10", ttlMs: 100 });
    await control(bound, "k", { op: "block", durationMs: 50 });
    expect((await bound.peek("k")).policies[0]).toMatchObject({ allowed: false, blocked: true, limit: 30, retryAfterMs: 50 });
    clock.ms += 50; // the block ends exactly now
    expect((await bound.peek("k")).policies[0]).toMatchObject({ allowed: true, limit: 30 });
    clock.ms += 50; // and the override
    const peeked = await bound.peek("k");
    expect(peeked.policies[0]).toMatchObject({ allowed: true, limit: 3, remaining: 3 });
    expect(peeked.override).toBeUndefined();
    expect(await io.hmget(key, "|override", "|block")).toEqual(["100000,s,10".replace("100000", String((T0 + 100) * 1000)), String((T0 + 50) * 1000)]);
    expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: true, limit: 3, remaining: 2 });
    expect(await io.hmget(key, "|override", "|block")).toEqual([null, null]);
    expect(await control(bound, "k", { op: "getOverride" })).toEqual({ now: T0 + 100 });
  });

  it("unblock lifts the manual block and the penalty boxes of the calling namespace's policies, not another namespace's", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("unblock");
    const mine = store.bind({ prefix, policies: [fixedWindow({ limit: 1, window: "1m", name: "mine", block: "10m" })] });
    const theirs = store.bind({ prefix, policies: [fixedWindow({ limit: 1, window: "1m", name: "theirs", block: "10m" })] });
    const key = hashOf(prefix, "k");
    for (const bound of [mine, theirs]) {
      await bound.consume("k", 1);
      expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 600_000 });
    }
    await control(mine, "k", { op: "block", durationMs: 3_600_000 });
    expect((await mine.peek("k")).policies[0]).toMatchObject({ blocked: true, retryAfterMs: 3_600_000 });
    expect(await io.hexists(key, "mine|fw|block")).toBe(1);
    await control(mine, "k", { op: "unblock" });
    expect(await io.hmget(key, "|block", "mine|fw|block", "theirs|fw|block")).toEqual([null, null, expect.any(String)]);
    // mine: its limit applies again (its count is kept); theirs: still in its penalty box
    const after = (await mine.peek("k")).policies[0];
    expect(after).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    expect(after?.blocked).toBeUndefined();
    expect((await theirs.peek("k")).policies[0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 600_000 });
  });

  it("a bad command is a SluiceInputError naming the field, and nothing is sent", async () => {
    let calls = 0;
    const counted: IORedisLike = {
      evalsha: (...args) => (calls++, io.evalsha(...args)),
      eval: (...args) => (calls++, io.eval(...args)),
      del: (...keys) => (calls++, io.del(...keys)),
      defineCommand: () => undefined,
    };
    const bound = new RedisStore(counted).bind({ prefix: uniquePrefix("bad"), policies: [fixedWindow({ limit: 1, window: "1m" })] });
    const bad: [unknown, string][] = [
      [{ op: "setOverride", override: "x,1", ttlMs: 0 }, "command.override"],
      [{ op: "setOverride", override: "s,-1", ttlMs: 0 }, "command.override"],
      [{ op: "setOverride", override: "s,2", ttlMs: -1 }, "command.ttlMs"],
      [{ op: "setOverride", override: "s,2", ttlMs: 1.5 }, "command.ttlMs"],
      [{ op: "block", durationMs: 0 }, "command.durationMs"],
      [{ op: "block", durationMs: Number.NaN }, "command.durationMs"],
      [{ op: "explode" }, "command.op"],
      [null, "command.op"],
    ];
    for (const [command, option] of bad) {
      const error = await Promise.resolve()
        .then(() => (bound.control as NonNullable<BoundStore["control"]>)("k", command as StoreCommand))
        .then(() => undefined, (e: unknown) => e);
      expect(error, JSON.stringify(command)).toBeInstanceOf(SluiceInputError);
      expect((error as SluiceInputError).option).toBe(option);
      expect((error as Error).message).toMatch(/^\[sluice\] \[redis\] /);
    }
    expect(calls).toBe(0);
  });
});

describe("one round trip per call", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** Calls per client command in INFO commandstats (rejected ones included). */
  function commandCalls(info: string): Record<string, number> {
    const calls: Record<string, number> = {};
    for (const [, name, fields] of info.matchAll(/^cmdstat_([^:]+):(.*)$/gm)) {
      const field = (key: string) => Number(new RegExp(`(?:^|,)${key}=(\\d+)`).exec(fields as string)?.[1] ?? 0);
      calls[name as string] = field("calls") + field("rejected_calls");
    }
    return calls;
  }

  it("every decision (with or without an override, blocked, unlimited) and every control command is one EVALSHA, counted by the client and by the server", async () => {
    const io = new IORedis(server.url);
    const admin = new IORedis(server.url);
    const sent: string[] = [];
    const counted: IORedisLike = {
      evalsha: (...args) => (sent.push("evalsha"), io.evalsha(...args)),
      eval: (...args) => (sent.push("eval"), io.eval(...args)),
      del: (...keys) => (sent.push("del"), io.del(...keys)),
      defineCommand: () => undefined,
    };
    const limiter = new RateLimiter({
      store: new RedisStore(counted),
      limits: [fixedWindow({ limit: 3, window: "1h", name: "hour" }), tokenBucket({ capacity: 5, refillRate: 1, name: "burst", block: "1m" })],
      denyCache: false,
    });
    // the first calls load the two scripts (NOSCRIPT, then EVAL): not counted below
    await limiter.limit("warm");
    await limiter.getOverride("warm");
    sent.length = 0;
    await admin.config("RESETSTAT");
    const ops: [string, () => Promise<unknown>][] = [
      ["limit, no override", () => limiter.limit("a")],
      ["peek, no override", () => limiter.peek("a")],
      ["setOverride scale", () => limiter.setOverride("a", { scale: 3 })],
      ["limit under scale", () => limiter.limit("a")],
      ["getOverride", () => limiter.getOverride("a")],
      ["setOverride quotas with ttl", () => limiter.setOverride("a", { quotas: { hour: 10 } }, { ttl: "1h" })],
      ["limit under quotas", () => limiter.limit("a")],
      ["setOverride unlimited", () => limiter.setOverride("a", { unlimited: true })],
      ["limit unlimited", () => limiter.limit("a")],
      ["block", () => limiter.block("a", "1m")],
      ["limit blocked", () => limiter.limit("a")],
      ["unblock", () => limiter.unblock("a")],
      ["clearOverride", () => limiter.clearOverride("a")],
      ["limit after clear", () => limiter.limit("a")],
    ];
    for (const [what, op] of ops) {
      const before = sent.length;
      await op();
      expect(sent.slice(before), what).toEqual(["evalsha"]);
    }
    const calls = commandCalls(String(await admin.info("commandstats")));
    expect(calls.evalsha).toBe(ops.length);
    expect(calls.eval ?? 0).toBe(0);
    // everything else the server counted ran inside those scripts (the one admin call aside)
    expect(Object.keys(calls).filter((name) => !["evalsha", "hmget", "hset", "hdel", "pexpire", "persist", "time", "config|resetstat", "info"].includes(name))).toEqual([]);
    io.disconnect();
    admin.disconnect();
  });

  it("after SCRIPT FLUSH, a burst of control commands loads the control script once (EVAL), like the decide script", async () => {
    const io = new IORedis(server.url);
    const admin = new IORedis(server.url);
    const limiter = new RateLimiter({ store: new RedisStore(io), limits: fixedWindow({ limit: 3, window: "1h", name: "hour" }), prefix: uniquePrefix("flush") });
    await limiter.getOverride("warm");
    await admin.script("FLUSH");
    await admin.config("RESETSTAT");
    const burst = 200;
    const answers = await Promise.all(
      Array.from({ length: burst }, (_, i) => (i % 2 === 0 ? limiter.setOverride(`k${i}`, { scale: 2 }) : limiter.block(`k${i}`, "1m"))),
    );
    expect(answers).toHaveLength(burst);
    const calls = commandCalls(String(await admin.info("commandstats")));
    expect(calls.eval).toBe(1);
    // every other call: its EVALSHA, and one more for those whose first met NOSCRIPT before the load ended
    expect(calls.evalsha).toBeGreaterThanOrEqual(burst - 1);
    expect(calls.evalsha).toBeLessThanOrEqual(2 * burst);
    expect(await limiter.getOverride("k0")).toEqual({ scale: 2 });
    expect((await limiter.limit("k1")).reason).toBe("blocked");
    io.disconnect();
    admin.disconnect();
  });

  it('clock: "client" on a server that refuses TIME in scripts: the control script takes this process\'s time too', async () => {
    const timeless = await startRedisServer({ args: ["--rename-command", "TIME", '""'] });
    const io = new IORedis(timeless.url);
    try {
      const limiter = new RateLimiter({ store: new RedisStore(io, { clock: "client" }), limits: slidingLog({ limit: 2, window: "1h", name: "log" }), onStoreError: "deny" });
      await limiter.setOverride("k", { quotas: { log: 4 } }, { ttl: "1h" });
      expect(await limiter.getOverride("k")).toEqual({ quotas: { log: 4 } });
      const decisions = [];
      for (let i = 0; i < 5; i++) decisions.push(await limiter.limit("k"));
      expect(decisions.map((d) => d.reason)).toEqual(["ok", "ok", "ok", "ok", "limit"]);
      await limiter.block("k", "1m");
      expect((await limiter.limit("k")).reason).toBe("blocked");
      await limiter.unblock("k");
      await limiter.clearOverride("k");
      expect(await limiter.getOverride("k")).toBeUndefined();
      // without the option the server refuses the script
      await expect(new RateLimiter({ store: new RedisStore(io), limits: slidingLog({ limit: 2, window: "1h", name: "log" }) }).getOverride("k")).rejects.toThrow(/clock: "client"/);
    } finally {
      io.disconnect();
      await timeless.stop();
    }
  });

  it("node-redis and Upstash: one script call per decision and per control command too", async () => {
    const node = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
    await node.connect();
    const upstash = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
    const sent: string[] = [];
    const stores = [
      new RedisStore({
        evalSha: (sha: string, o: { keys: string[]; arguments: string[] }) => (sent.push("evalsha"), node.evalSha(sha, o)),
        eval: (script: string, o: { keys: string[]; arguments: string[] }) => (sent.push("eval"), node.eval(script, o)),
        del: (keys: string[]) => (sent.push("del"), node.del(keys)),
      }),
      new UpstashStore({
        evalsha: (sha, keys, args) => (sent.push("evalsha"), upstash.evalsha(sha, keys, args)),
        eval: (script, keys, args) => (sent.push("eval"), upstash.eval(script, keys, args)),
        del: (...keys) => (sent.push("del"), upstash.del(...keys)),
      }),
    ];
    for (const store of stores) {
      const limiter = new RateLimiter({ store, limits: slidingWindow({ limit: 4, window: "1h", name: "sw" }), prefix: uniquePrefix("rt"), denyCache: false });
      await limiter.limit("warm");
      await limiter.getOverride("warm");
      for (const op of [
        () => limiter.setOverride("a", { scale: 2 }),
        () => limiter.limit("a"),
        () => limiter.block("a", 1000),
        () => limiter.limit("a"),
        () => limiter.unblock("a"),
        () => limiter.clearOverride("a"),
        () => limiter.limit("a"),
      ]) {
        sent.length = 0;
        await op();
        expect(sent).toEqual(["evalsha"]);
      }
    }
    await node.quit();
  });
});

describe(`${MAX_POLICIES} policies of each kind under every override (the generated Lua's locals and registers)`, () => {
  const each = (make: (i: number) => Policy): Policy[] => Array.from({ length: MAX_POLICIES }, (_, i) => make(i));
  const configs: [string, Policy[]][] = [
    ["fixedWindow", each((i) => fixedWindow({ limit: 10 + i, window: "1m", name: `p${i}`, block: "1s" }))],
    ["slidingWindow", each((i) => slidingWindow({ limit: 10 + i, window: "1m", name: `p${i}`, block: "1s" }))],
    ["slidingLog", each((i) => slidingLog({ limit: 10 + i, window: "1m", name: `p${i}`, block: { base: "1s", factor: 2, max: "1m" } }))],
    ["tokenBucket", each((i) => tokenBucket({ capacity: 10 + i, refillRate: 1, name: `p${i}`, block: "1s" }))],
    ["leakyBucket", each((i) => leakyBucket({ rate: 1, period: "1s", burst: 10 + i, queue: 2, name: `p${i}`, block: "1s" }))],
    ["concurrency", each((i) => concurrency({ limit: 10 + i, name: `p${i}` }))],
  ];
  const bodies = (policies: Policy[]) => ["s,2.5", `q,${policies.map((p) => `${p.name}=7`).sort().join(",")}`, "u"];

  it.each(configs)("%s", async (_kind, policies) => {
    const io = new IORedis(inject("sluiceRedisUrl"));
    const clock = { ms: T0 };
    const bound = createTestRedisStore(io, { clock: () => clock.ms }).bind({ prefix: uniquePrefix("max"), policies });
    const control = (bound.control as NonNullable<BoundStore["control"]>).bind(bound);
    for (const body of bodies(policies)) {
      clock.ms += 120_000;
      await bound.reset("k");
      await control("k", { op: "setOverride", override: body, ttlMs: 0 });
      let state: StoredState | undefined = controlState(policies, undefined, clock.ms * 1000, { op: "setOverride", override: body, ttlMs: 0 }).state;
      for (let i = 0; i < 30; i++) {
        const nowUs = clock.ms * 1000;
        const expected = decideState(policies, state, nowUs, 1, i + 1);
        if (expected.state !== undefined) state = expected.state;
        const actual = await bound.consume("k", 1, i + 1);
        expect(actual.policies, `${body} #${i}`).toEqual(expected.policies);
        expect(actual.override).toEqual(expected.override);
      }
      expect((await bound.peek("k")).policies).toEqual(peekState(policies, state, clock.ms * 1000).policies);
      await control("k", { op: "block", durationMs: 5000 });
      state = controlState(policies, state, clock.ms * 1000, { op: "block", durationMs: 5000 }).state;
      expect((await bound.consume("k", 1)).policies).toEqual(decideState(policies, state, clock.ms * 1000, 1).policies);
      await control("k", { op: "unblock" });
    }
    await io.quit();
  });
});

describe("two processes on one Redis", () => {
  function runWorker(env: Record<string, string>): Promise<string> {
    const worker = fileURLToPath(new URL("../test/override-worker.ts", import.meta.url));
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", worker], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      child.stderr.on("data", (chunk) => (err += chunk));
      child.on("error", reject);
      child.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`override worker exited with ${code}:\n${err}`))));
    });
  }

  it("one sets { scale: 10 } for a key; the other admits exactly ten times the quota for it at its next decision, and the base quota for another key", async () => {
    const io = new IORedis(inject("sluiceRedisUrl"));
    const store = new RedisStore(io); // Redis's own clock, as in production
    const prefixes = [uniquePrefix("two-log"), uniquePrefix("two-bucket")];
    const limiters = [
      new RateLimiter({ store, prefix: prefixes[0], limits: slidingLog({ limit: 5, window: "1h", name: "log" }) }),
      // one token a day: nothing refills during the test
      new RateLimiter({ store, prefix: prefixes[1], limits: tokenBucket({ capacity: 5, refillRate: 1, interval: "1d", name: "bucket" }) }),
    ];
    // this process has limiters in use (its scripts are loaded), and has decided for the other key
    for (const limiter of limiters) expect((await limiter.limit("other")).allowed).toBe(true);
    expect(await runWorker({ REDIS_URL: inject("sluiceRedisUrl"), PREFIXES: prefixes.join(","), KEY: "vip" })).toBe("done");
    const admitted = async (limiter: RateLimiter, key: string) => {
      let allowed = key === "other" ? 1 : 0; // the decision made before
      for (;;) {
        const d = await limiter.limit(key);
        if (!d.allowed) return { allowed, last: d };
        expect(d.override).toEqual(key === "vip" ? { scale: 10 } : undefined);
        allowed++;
        if (allowed > 100) throw new Error("runaway");
      }
    };
    for (const limiter of limiters) {
      const vip = await admitted(limiter, "vip");
      expect(vip.allowed).toBe(50);
      expect(vip.last).toMatchObject({ reason: "limit", limit: 50, override: { scale: 10 } });
      const other = await admitted(limiter, "other");
      expect(other.allowed).toBe(5);
      expect(other.last).toMatchObject({ reason: "limit", limit: 5 });
      expect(other.last.override).toBeUndefined();
      expect(await limiter.getOverride("vip")).toEqual({ scale: 10 });
    }
    await io.quit();
  }, 60_000);
});
