/**
 * The store against the naive reference models (`../reference.ts`, one per algorithm), on random
 * sequences of limits, peeks, resets, refunds and releases, and then with overrides and manual
 * blocks set, replaced, cleared and ending between the requests: every answer must be the
 * reference's, field by field.
 *
 * @module
 */
import { type Decision, type Override, type RateLimiter, SluiceInputError } from "@sluice/core";
import fc from "fast-check";
import { expect, it } from "vitest";
import { holdsLeases } from "../algorithms/index.js";
import { type ReferenceCharge, ReferenceLimiter, plain } from "../reference.js";
import { T0 } from "../suite-shared.js";
import { policySpecArbitrary } from "../vectors.js";
import type { SuiteContext } from "./context.js";
import { namedPolicies } from "./helpers.js";

/** The limiter over the store under test and the reference model, driven by the same steps and compared at each. */
class Twins {
  /** The decisions that acquired a lease, per key (released or not: a release is idempotent). */
  readonly #leases = new Map<string, Decision[]>();

  constructor(
    readonly limiter: RateLimiter,
    readonly ref: ReferenceLimiter,
  ) {}

  async reset(key: string): Promise<void> {
    await this.limiter.reset(key);
    this.ref.reset(key);
  }

  /** Releases one of the leases `key` acquired (`pick` chooses which), if it acquired any. */
  async release(key: string, pick: number, t: number): Promise<void> {
    const held = this.#leases.get(key) ?? [];
    const decision = held[pick % Math.max(1, held.length)];
    if (decision === undefined) return;
    expect(plain(await this.limiter.release(key, decision))).toEqual(this.ref.release(key, Number(decision.lease), t));
  }

  /** A `limit` of `cost`, or a `peek`; returns the store's decision. */
  async decide(op: "limit" | "peek", key: string, cost: number, t: number): Promise<Decision> {
    const decision = op === "peek" ? await this.limiter.peek(key) : await this.limiter.limit(key, { cost });
    const want = op === "peek" ? this.ref.peek(key, t) : this.ref.limit(key, cost, t, Number(decision.lease ?? 0));
    expect(plain(decision)).toEqual(want);
    if (op === "limit" && decision.allowed && decision.lease !== undefined) this.#leases.set(key, [...(this.#leases.get(key) ?? []), decision]);
    return decision;
  }

  /** A refund of `cost` units without a decision: the latest charges give them back. */
  async refund(key: string, cost: number, t: number): Promise<void> {
    expect(plain(await this.limiter.refund(key, { cost }))).toEqual(this.ref.refund(key, cost, undefined, t));
  }
}

/**
 * What each allowed decision charged, for refunds that name it: the latest allowed decision per
 * key, the units it may still give back, the units given back so far, and the reference's record
 * of its charge.
 */
class Charges {
  readonly #latest = new Map<string, Decision>();
  readonly #left = new Map<Decision, number>();
  readonly #refunded = new Map<Decision, number>();
  readonly #ref = new Map<Decision, ReferenceCharge>();

  constructor(readonly twins: Twins) {}

  /** Records an allowed decision's charge of `cost` units. */
  charged(key: string, decision: Decision, cost: number): void {
    this.#latest.set(key, decision);
    this.#left.set(decision, cost);
    this.#ref.set(decision, this.twins.ref.lastCharge!);
  }

  /** A refund of `cost` units, of the key's latest decision (`withDecision`) or of none. */
  async refund(key: string, cost: number, withDecision: boolean, t: number): Promise<void> {
    const decision = withDecision ? this.#latest.get(key) : undefined;
    if (decision === undefined) return this.twins.refund(key, cost, t);
    const got = plain(await this.twins.limiter.refund(key, { cost, decision }));
    const left = this.#left.get(decision) ?? 0;
    const units = Math.min(cost, left);
    this.#left.set(decision, left - units);
    const before = this.#refunded.get(decision) ?? 0;
    this.#refunded.set(decision, before + units);
    const ref = this.twins.ref;
    expect(got).toEqual(units === 0 ? ref.peek(key, t) : ref.refund(key, units, { ...this.#ref.get(decision)!, refunded: before }, t));
  }
}

/** Gaps between steps: none, a few ms, or up to a few windows of the generated policies. */
const gap = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 3000 }));

/** The store decides like the reference model: limits, peeks, resets, refunds (of a decision or not) and releases. */
export function testReferenceModel(suite: SuiteContext): void {
  it("decides like the naive reference model on random sequences", async () => {
    const step = fc.record({
      dt: gap,
      key: fc.constantFrom("a", "b"),
      cost: fc.integer({ min: 1, max: 5 }),
      op: fc.constantFrom("limit", "limit", "limit", "limit", "peek", "reset", "refund", "refund", "release", "release"),
      withDecision: fc.boolean(),
      pick: fc.nat(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 3 }), fc.array(step, { minLength: 1, maxLength: 40 }), async (specs, steps) => {
        const policies = namedPolicies(specs);
        const twins = new Twins(suite.limiter(policies), new ReferenceLimiter(policies));
        const charges = new Charges(twins);
        const concurrent = holdsLeases(policies);
        let t = T0 + 7;
        for (const { dt, key, cost, op, withDecision, pick } of steps) {
          t += dt;
          suite.setNow(t);
          if (op === "reset") await twins.reset(key);
          else if (op === "refund") await charges.refund(key, cost, withDecision, t);
          else if (op === "release") await twins.release(key, pick, t);
          else {
            const decision = await twins.decide(op, key, cost, t);
            if (op === "limit") expect(decision.lease !== undefined).toBe(decision.allowed && concurrent);
            if (op === "limit" && decision.allowed) charges.charged(key, decision, cost);
          }
        }
      }),
      { numRuns: suite.runs.properties },
    );
  });
}

/** A generated override: a scale, one policy's quota (`pick` chooses which), or unlimited. */
const anOverride = fc.oneof(
  fc.record({ scale: fc.constantFrom(0.5, 1.5, 2, 3) }),
  fc.record({ pick: fc.nat(), quota: fc.integer({ min: 1, max: 12 }) }),
  fc.constant({ unlimited: true as const }),
);
type GeneratedOverride = typeof anOverride extends fc.Arbitrary<infer O> ? O : never;

/** The {@link Override} a generated one stands for, over `policyCount` policies named `p0`, `p1`, …. */
function overrideOf(o: GeneratedOverride, policyCount: number): Override {
  if ("unlimited" in o) return o;
  if ("scale" in o) return { scale: o.scale };
  return { quotas: { [`p${o.pick % policyCount}`]: o.quota } };
}

/** Sets `override` on both twins, unless the limiter refuses it (a scale that leaves a quota 0). */
async function setOverride(twins: Twins, key: string, override: Override, ttl: number | undefined, t: number): Promise<void> {
  const set = await twins.limiter.setOverride(key, override, ttl === undefined ? undefined : { ttl }).then(
    () => true,
    (error: unknown) => {
      if (error instanceof SluiceInputError) return false;
      throw error;
    },
  );
  if (set) twins.ref.setOverride(key, override, ttl ?? 0, t);
}

/**
 * The store decides like the reference model with overrides and manual blocks set, replaced,
 * cleared and ending between the requests. Quotas go below the counts and leases already held,
 * which the stores must answer exactly like the reference; refunds give back the latest charges
 * (a refund of one decision across a change of a bucket's rate is judged by the invariants instead).
 */
export function testReferenceModelWithOverrides(suite: SuiteContext): void {
  it("decides like the reference model with overrides and manual blocks set, replaced, cleared and ending between the requests", async () => {
    const step = fc.record({
      dt: gap,
      key: fc.constantFrom("a", "a", "b"),
      cost: fc.integer({ min: 1, max: 5 }),
      op: fc.constantFrom("limit", "limit", "limit", "limit", "limit", "limit", "peek", "refund", "release", "reset", "set", "set", "clear", "get", "block", "unblock"),
      override: anOverride,
      ttl: fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 3000 })),
      pick: fc.nat(),
    });
    // long enough for an override to meet counts made under another quota
    const steps = fc.array(step, { minLength: 20, maxLength: 50, size: "medium" });
    await fc.assert(
      fc.asyncProperty(fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 3 }), steps, async (specs, steps) => {
        const policies = namedPolicies(specs);
        const twins = new Twins(suite.limiter(policies), new ReferenceLimiter(policies));
        const { limiter: l, ref } = twins;
        let t = T0 + 11;
        for (const { dt, key, cost, op, override, ttl, pick } of steps) {
          t += dt;
          suite.setNow(t);
          switch (op) {
            case "set":
              await setOverride(twins, key, overrideOf(override, policies.length), ttl, t);
              break;
            case "clear":
              await l.clearOverride(key);
              ref.clearOverride(key, t);
              break;
            case "get":
              expect(JSON.parse(JSON.stringify((await l.getOverride(key)) ?? null))).toEqual(ref.getOverride(key, t) ?? null);
              break;
            case "block":
              await l.block(key, 1 + (pick % 3000));
              ref.block(key, 1 + (pick % 3000), t);
              break;
            case "unblock":
              await l.unblock(key);
              ref.unblock(key, t);
              break;
            case "reset":
              await twins.reset(key);
              break;
            case "refund":
              await twins.refund(key, cost, t);
              break;
            case "release":
              await twins.release(key, pick, t);
              break;
            default:
              await twins.decide(op, key, cost, t);
          }
        }
      }),
      { numRuns: suite.runs.overrides },
    );
  });
}
