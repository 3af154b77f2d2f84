/**
 * The invariant reservations must keep, checked directly on the store under test: 2 to 8 limiter
 * instances with reservations, sharing one store and one clock, with random arrivals, keys, costs,
 * refunds and options, never admit more than a policy allows in any span (the same bounds as
 * `invariants.ts`: a window at most its limit, a bucket at most its burst plus one unit per
 * emission interval). And the other side: under an offered load above the limit, the instances
 * together admit nearly what deciding every request in the store admits.
 *
 * @module
 */
import { type Decision, type Policy, RateLimiter, type Store, fixedWindow } from "@sluice/core";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Admission, referenceOf } from "../algorithms/index.js";
import type { SuiteContext } from "./context.js";
import { violatedBound } from "./invariants.js";
import { type ReservationHooks, reservable, reservationHooks, reservingLimiter, testReservationsAcrossInstances, testReserveCall, testReservedDecisions } from "./reservations.js";
import { T0, uniquePrefix } from "../suite-shared.js";
import { type PolicySpec, policyFromSpec, policySpecArbitrary } from "../vectors.js";

/** Policies for the fuzz: mostly kinds that reserve (so reservations happen), now and then one that declines. */
const specsArbitrary: fc.Arbitrary<PolicySpec[]> = fc.array(
  fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant("fixedWindow" as const), options: fc.record({ limit: fc.integer({ min: 2, max: 60 }), window: fc.constantFrom(100, 250, 1000, 3000) }) }) },
    { weight: 5, arbitrary: fc.record({ kind: fc.constant("slidingWindow" as const), options: fc.record({ limit: fc.integer({ min: 2, max: 60 }), window: fc.constantFrom(250, 1000, 3000) }) }) },
    {
      weight: 6,
      arbitrary: fc.record({ kind: fc.constant("tokenBucket" as const), options: fc.record({ capacity: fc.integer({ min: 2, max: 60 }), refillRate: fc.integer({ min: 1, max: 40 }), interval: fc.constantFrom(250, 1000) }) }),
    },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("leakyBucket" as const), options: fc.record({ rate: fc.integer({ min: 1, max: 40 }), period: fc.constantFrom(250, 1000), burst: fc.integer({ min: 2, max: 40 }) }) }) },
    { weight: 1, arbitrary: policySpecArbitrary({ leases: false }) },
  ) as fc.Arbitrary<PolicySpec>,
  { minLength: 1, maxLength: 2 },
);

/**
 * One step of a run: a burst of requests from one instance, a wait (often one of the policies' own
 * time scales: a unit's refill and fractions of it, where a bucket refills beneath held units; a
 * window), a refund, or an instance giving its units back.
 */
function stepArbitrary(policies: readonly Policy[]) {
  const scales = policies.flatMap((p) => referenceOf(p.kind).timeScalesMs(p));
  const dt = fc.oneof(fc.integer({ min: 0, max: 20 }), fc.constantFrom(...scales), fc.constantFrom(...scales).map((ms) => ms * 2), fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 3000 }));
  return fc.oneof(
    { weight: 8, arbitrary: fc.record({ op: fc.constant("limit" as const), who: fc.nat(), key: fc.constantFrom("a", "a", "b"), n: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 24 })), cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3 })), settle: fc.boolean() }) },
    { weight: 4, arbitrary: fc.record({ op: fc.constant("wait" as const), dt }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("refund" as const), pick: fc.nat(), partial: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("return" as const), who: fc.nat() }) },
  );
}

type Step = ReturnType<typeof stepArbitrary> extends fc.Arbitrary<infer S> ? S : never;

/** Per-instance reservation options: short and long ages, small and whole shares. */
const reserveArbitrary = fc.record({ maxAgeMs: fc.constantFrom(50, 200, 1000, 5000), share: fc.constantFrom(0.1, 0.5, 1, 1) });

/** A run: the policies (named p0, p1), 2 to 8 instances' options, and the steps. */
const scenarioArbitrary = specsArbitrary.chain((specs) => {
  const policies = specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
  return fc.tuple(fc.constant(policies), fc.array(reserveArbitrary, { minLength: 2, maxLength: 8 }), fc.array(stepArbitrary(policies), { minLength: 1, maxLength: 40 }));
});

/** A run that reserves on every store: one window policy, two instances taking whole shares, a busy key. */
const RESERVING_SCENARIO: [Policy[], { maxAgeMs: number; share: number }[], Step[]] = [
  [fixedWindow({ limit: 60, window: 3000, name: "p0" })],
  [
    { maxAgeMs: 5000, share: 1 },
    { maxAgeMs: 5000, share: 1 },
  ],
  [
    { op: "limit", who: 0, key: "a", n: 24, cost: 1, settle: true },
    { op: "wait", dt: 20 },
    { op: "limit", who: 1, key: "a", n: 24, cost: 1, settle: true },
  ],
];

/** The multi-instance invariant fuzz (call inside a store's `describe`). */
export function testReservationInvariants(suite: SuiteContext): void {
  const h = reservationHooks(suite);
  testReserveRule(suite);

  it("2 to 8 instances reserving on one store never admit more than a policy allows in any span (random arrivals, keys, costs, refunds, ages and shares)", async () => {
    // the property is about reserved decisions: some runs must have made them
    let reserved = 0;
    await fc.assert(
      fc.asyncProperty(scenarioArbitrary, async ([policies, options, steps]) => {
        const store = reservable(suite.store());
        const prefix = suite.prefix();
        const instances = options.map((o) => reservingLimiter(h, store, policies, prefix, o));
        const admissions: Admission[] = [];
        const owners = new Map<Decision, RateLimiter>();
        const background: Promise<void>[] = [];
        let t = 0;
        h.at(t);
        try {
          for (const step of steps) {
            if (step.op === "wait") {
              t += step.dt;
              h.at(t);
            } else if (step.op === "return") {
              await instances[step.who % instances.length]!.returnReservations();
            } else if (step.op === "refund") {
              await refundOne(owners, admissions, step.pick, step.partial);
            } else {
              const l = instances[step.who % instances.length]!;
              for (let i = 0; i < step.n; i++) {
                const d = await l.limit(step.key, { cost: step.cost });
                if (step.settle) await d.pending;
                else background.push(d.pending);
                if (!d.allowed) continue;
                if (d.reserved === true) reserved++;
                owners.set(d, l);
                admissions.push({ key: step.key, atMs: suite.t0 + t, cost: step.cost, refunded: 0, decision: d, released: false });
                const broken = violatedBound(policies, admissions, step.key, suite.t0 + t);
                if (broken !== undefined) throw new Error(`over-admission with reservations: ${broken} (the last decision ${d.reserved === true ? "reserved" : d.reason})`);
              }
            }
          }
        } finally {
          await Promise.allSettled(background);
          await Promise.all(instances.map((l) => l.returnReservations()));
        }
      }),
      // the first run always reserves (two instances, a busy key), so that the count below holds
      // on every seed, however few runs a store's suite asks for
      { numRuns: suite.runs.invariants, examples: [[RESERVING_SCENARIO]] },
    );
    expect(reserved).toBeGreaterThan(0);
  });

  it("seldom under: 4 instances offered 120% of a fixed window's limit admit at least 98% of it, every window", async () => {
    // a window of a minute: a store's TTLs run on real time, and a slow store must not see the
    // key expire (and forget its count) while the test's clock is still inside the window
    await offered(h, fixedWindow({ limit: 600, window: "1m", name: "per-minute" }), 4, 1.2, 3, 0.98);
  });
}

/**
 * The rule a store's reservation keeps, checked at the store's own level: units reserved with
 * `BoundStore.reserve` and used at any moment before their end (a window's units inside the window
 * they were charged in, a bucket's before their hold is over), among requests other instances make
 * meanwhile, never let a span admit more than its bound. The design's rule, stated here on its own
 * (not read from core): that is what a limiter relies on when it serves from them.
 */
function testReserveRule(suite: SuiteContext): void {
  const h = reservationHooks(suite);
  const endOf = (policies: readonly Policy[], atMs: number, holdMs: number) => {
    let end = atMs + holdMs;
    for (const p of policies) if ("windowMs" in p) end = Math.min(end, (Math.floor(atMs / p.windowMs) + 1) * p.windowMs);
    return end;
  };
  const scenario = specsArbitrary.chain((specs) => {
    const policies = specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
    const scales = policies.flatMap((p) => referenceOf(p.kind).timeScalesMs(p));
    const dt = fc.oneof(fc.integer({ min: 0, max: 20 }), fc.constantFrom(...scales), fc.integer({ min: 0, max: 2000 }));
    const hold = fc.oneof(fc.constant(0), fc.constantFrom(...scales), fc.constantFrom(...scales).map((ms) => ms * 3), fc.integer({ min: 0, max: 3000 }));
    const reserve = fc.record({ op: fc.constant("reserve" as const), units: fc.integer({ min: 1, max: 30 }), holdMs: hold });
    const use = fc.record({ op: fc.constant("use" as const), pick: fc.nat(), n: fc.integer({ min: 1, max: 30 }) });
    const consume = fc.record({ op: fc.constant("consume" as const), n: fc.integer({ min: 1, max: 30 }), cost: fc.integer({ min: 1, max: 3 }) });
    const wait = fc.record({ op: fc.constant("wait" as const), dt });
    // episodes in the order that matters (units reserved, time passing within their hold, others
    // draining what the store has, the units used), then the steps shuffled a little
    const episode = fc.tuple(reserve, wait, fc.boolean(), consume, use, wait).map(([r, w, first, c, u, w2]) => (first ? [r, w, c, u, w2] : [r, w, u, c, w2]));
    const loose = fc.oneof(reserve, use, consume, wait);
    const steps = fc.array(fc.oneof({ weight: 3, arbitrary: episode }, { weight: 1, arbitrary: loose.map((x) => [x]) }), { minLength: 1, maxLength: 6 }).map((xs) => xs.flat());
    return fc.tuple(fc.constant(policies), steps);
  });

  it("units reserved ahead and used any time before their end (a window's inside their window, a bucket's before the hold is over) never let a span admit more than its bound", async () => {
    let used = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ([policies, steps]) => {
        const bound = suite.store().bind({ prefix: suite.prefix(), policies });
        const held: { left: number; endMs: number }[] = [];
        const admissions: Admission[] = [];
        let t = 0;
        h.at(t);
        const admit = (cost: number) => {
          admissions.push({ key: "k", atMs: suite.t0 + t, cost, refunded: 0, decision: undefined as never, released: false });
          const broken = violatedBound(policies, admissions, "k", suite.t0 + t);
          if (broken !== undefined) throw new Error(`over-admission from reserved units: ${broken}`);
        };
        for (const step of steps) {
          if (step.op === "wait") {
            t += step.dt;
            h.at(t);
          } else if (step.op === "reserve") {
            const r = await bound.reserve!("k", step.units, step.holdMs);
            expect(r.granted).toBeGreaterThanOrEqual(0);
            expect(r.granted).toBeLessThanOrEqual(step.units);
            if (r.granted > 0) held.push({ left: r.granted, endMs: endOf(policies, suite.t0 + t, step.holdMs) });
          } else if (step.op === "use") {
            const r = held[step.pick % Math.max(1, held.length)];
            if (r === undefined || suite.t0 + t >= r.endMs) continue;
            const n = Math.min(step.n, r.left);
            r.left -= n;
            used += n;
            for (let i = 0; i < n; i++) admit(1);
          } else {
            for (let i = 0; i < step.n; i++) if ((await bound.consume("k", step.cost)).policies.every((p) => p.allowed)) admit(step.cost);
          }
        }
      }),
      // the first run always uses reserved units, so that the count below holds on every seed
      {
        numRuns: suite.runs.invariants,
        examples: [
          [
            [
              [fixedWindow({ limit: 60, window: 3000, name: "p0" })],
              [
                { op: "reserve", units: 10, holdMs: 1000 },
                { op: "use", pick: 0, n: 5 },
              ],
            ],
          ],
        ],
      },
    );
    expect(used).toBeGreaterThan(0);
  });
}

/** Refunds an admission (its whole cost, or one unit) through the instance that made it, and books it by the rules. */
async function refundOne(owners: ReadonlyMap<Decision, RateLimiter>, admissions: Admission[], pick: number, partial: boolean): Promise<void> {
  const a = admissions[pick % Math.max(1, admissions.length)];
  if (a === undefined) return;
  const asked = partial ? 1 : undefined;
  await owners.get(a.decision)!.refund(a.key, asked === undefined ? { decision: a.decision } : { decision: a.decision, cost: asked });
  a.refunded += Math.min(asked ?? a.cost, a.cost - a.refunded);
}

/**
 * `count` instances, each offered `load / count` of `policy`'s limit per window, spread evenly,
 * over `windows` windows: every window, together they admit at least `atLeast` of the limit.
 */
async function offered(h: ReservationHooks, policy: Policy & { windowMs: number }, count: number, load: number, windows: number, atLeast: number): Promise<void> {
  const store = reservable(h.store());
  const prefix = h.prefix();
  const instances = Array.from({ length: count }, () => reservingLimiter(h, store, policy, prefix));
  const perInstance = Math.round((policy.limit * load) / count);
  const stepMs = policy.windowMs / perInstance;
  const admitted: number[] = Array.from({ length: windows }, () => 0);
  for (let i = 0; i < perInstance * windows; i++) {
    for (const [n, l] of instances.entries()) {
      // the instances' arrivals interleave, each a fraction of a step apart
      const atMs = Math.floor(i * stepMs + (n * stepMs) / count);
      h.at(atMs);
      const d: Decision = await l.limit("shared");
      await d.pending;
      if (d.allowed) admitted[Math.floor(atMs / policy.windowMs)]! += 1;
    }
  }
  await Promise.all(instances.map((l) => l.returnReservations()));
  for (const n of admitted) expect(n).toBeLessThanOrEqual(policy.limit);
  for (const n of admitted) expect(n).toBeGreaterThanOrEqual(Math.floor(policy.limit * atLeast));
}

/**
 * The reservation suites on their own, for a store the whole conformance suite does not run on (a
 * Redis Cluster): `makeStore` gets the test clock (epoch ms) the store must use.
 */
export function testReservations(options: { name: string; makeStore: (hooks: { clock: () => number }) => Store | Promise<Store>; teardown?: () => void | Promise<void>; numRuns?: number; timeoutMs?: number }): void {
  const clock = { now: T0 };
  let store: Store;
  const timeout = options.timeoutMs ?? 60_000;
  const storeTimeoutMs = Math.floor(timeout / 2);
  const runs = options.numRuns ?? 20;
  const suite: SuiteContext = {
    name: options.name,
    t0: T0,
    setNow: (ms) => {
      clock.now = ms;
    },
    at: (ms) => {
      clock.now = T0 + ms;
    },
    store: () => store,
    limiter: (limits, prefix = uniquePrefix("res")) => new RateLimiter({ store, limits, prefix, denyCache: false, timeoutMs: storeTimeoutMs }),
    prefix: (label = "res") => uniquePrefix(label),
    runs: { properties: runs, overrides: runs, invariants: runs },
    timeoutMs: timeout,
    storeTimeoutMs,
  };
  describe(`reservations: ${options.name}`, { timeout }, () => {
    beforeAll(async () => {
      store = await options.makeStore({ clock: () => clock.now });
    });
    afterAll(async () => {
      await options.teardown?.();
    });
    testReserveCall(suite);
    testReservedDecisions(suite);
    testReservationsAcrossInstances(suite);
    testReservationInvariants(suite);
  });
}
