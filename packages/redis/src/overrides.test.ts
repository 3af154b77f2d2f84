/**
 * Overrides and manual blocks in Redis decide exactly as core's reference (`decideState`,
 * `peekState`, `refundState`, `releaseState`, `controlState` over a JSON state): random sequences of
 * decisions, peeks, refunds, releases, resets, override and block commands and clock moves, on every
 * kind, through each client; and the most policies a namespace takes, of each kind, under every
 * override (the generated Lua's locals and registers). What the reference cannot show is in
 * `overrides-storage.test.ts` (the hash in Redis, two processes sharing it) and
 * `overrides-round-trips.test.ts` (one script call per call).
 */
import {
  MAX_POLICIES,
  type Policy,
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
import { Redis as UpstashRedis } from "@upstash/redis";
import fc from "fast-check";
import IORedis from "ioredis";
import { createClient } from "redis";
import { describe, expect, inject, it } from "vitest";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

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
