/**
 * Hostile sequences, mixed: `limit`, `peek`, `refund`, `setOverride`/`clearOverride` (with and
 * without `ttl`), `block`/`unblock`, cached denials, policy names and keys drawn from the names
 * `Object.prototype` answers for, and limits and costs up to the maxima — on the store under test,
 * checked against what a user relies on rather than against a model:
 *
 * - **Bounds.** Net admissions (each request's cost less what was refunded for it) stay within
 *   each policy's bound under the largest quota the run has set.
 * - **A refund never gives more than the request took.** A twin limiter (another prefix, the same
 *   store and clock) is sent the same commands and the same admitted requests, but never the ones
 *   the run refunds later; once those are refunded, the key is never more permissive than its twin
 *   (no policy reports more `remaining`), whatever override was set, changed or cleared between a
 *   charge and its refund.
 * - **Sane answers.** `remaining` never below 0, `now` never before the store's clock, every 429's
 *   headers agree with its body.
 *
 * @module
 */
import { type Decision, type Override, type Policy, RateLimiter, type Store, SluiceInputError, fixedWindow, slidingWindow, tokenBucket } from "@sluice/core";
import { type BoundStore, type StoreNamespace, effectivePolicies } from "@sluice/core/store";
import fc from "fast-check";
import { it } from "vitest";
import type { Admission } from "../algorithms/index.js";
import type { SuiteContext } from "./context.js";
import { headersDisagree, violatedBound } from "./invariants.js";
import { PROTOTYPE_NAMES } from "./names.js";
import { overrideBody } from "../reference.js";

/** `inner` answering through promises, so that a limiter's deny cache is on whatever the store. */
function remote(inner: Store): Store {
  return {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      return {
        consume: async (key, cost, lease) => (lease === undefined ? bound.consume(key, cost) : bound.consume(key, cost, lease)),
        peek: async (key) => bound.peek(key),
        reset: async (key) => bound.reset(key),
        refund: async (key, cost, charge) => bound.refund(key, cost, charge),
        release: async (key, lease) => bound.release(key, lease),
        control: async (key, command) => (bound.control as NonNullable<BoundStore["control"]>)(key, command),
      };
    },
  };
}

/** Names for policies and keys: the prototype's, and two ordinary ones. */
const NAME = fc.constantFrom(...PROTOTYPE_NAMES, "plain", "other");

/**
 * The largest quota a factory takes (the configuration maximum that keeps every number a store
 * returns exact on every client), found by asking the factory: the suite holds the stores to it
 * without restating it.
 */
function largestLimit(): number {
  let limit = 2 ** 53 - 1;
  while (limit > 1) {
    try {
      fixedWindow({ limit, window: "1h" });
      return limit;
    } catch {
      limit = Math.floor(limit / 2);
    }
  }
  return 1;
}

/** A policy of the run: small and quick to exhaust, or as large as the factories allow. */
function policyArbitrary(name: string, huge: number): fc.Arbitrary<Policy> {
  const limit = fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 8 }) }, { weight: 1, arbitrary: fc.constantFrom(huge, huge - 1, Math.floor(huge / 3)) });
  return fc.oneof(
    fc.record({ limit, window: fc.constantFrom(250, 1000, 3000) }).map((o) => fixedWindow({ ...o, name })),
    fc.record({ limit: fc.integer({ min: 1, max: 8 }), window: fc.constantFrom(250, 1000, 3000) }).map((o) => slidingWindow({ ...o, name })),
    fc.record({ capacity: fc.integer({ min: 1, max: 8 }), refillRate: fc.integer({ min: 1, max: 5 }), interval: fc.constantFrom(250, 1000) }).map((o) => tokenBucket({ ...o, name })),
  );
}

/**
 * The steps of a run, loose or in episodes. `later`: a limit whose admitted requests the run
 * refunds afterwards (its twin never makes them).
 */
function stepsArbitrary(names: readonly string[], keys: readonly string[], huge: number) {
  const key = fc.constantFrom(...keys);
  const cost = fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 3 }) }, { weight: 1, arbitrary: fc.constantFrom(huge, Math.floor(huge / 2), Math.min(huge + 1, Number.MAX_SAFE_INTEGER)) });
  const override = fc.oneof(
    fc.constantFrom(0.5, 2, 10).map((scale): Override => ({ scale })),
    fc.tuple(fc.constantFrom(...names), fc.integer({ min: 1, max: 20 })).map(([name, quota]): Override => ({ quotas: JSON.parse(`{${JSON.stringify(name)}:${quota}}`) as Record<string, number> })),
    fc.constant<Override>({ unlimited: true }),
  );
  const loose = fc.oneof(
    { weight: 8, arbitrary: fc.record({ op: fc.constant("limit" as const), key, n: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 12 })), cost, later: fc.boolean() }) },
    { weight: 4, arbitrary: fc.record({ op: fc.constant("wait" as const), dt: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 3000 })) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("refund" as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("peek" as const), key }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant("set" as const), key, override, ttl: fc.option(fc.integer({ min: 1, max: 3000 }), { nil: undefined }) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("clear" as const), key }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("block" as const), key, ms: fc.integer({ min: 1, max: 2000 }) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("unblock" as const), key }) },
  );
  // the order that matters, often: requests made under one override (some to be refunded), the
  // override changed or cleared, then the refunds
  const limit = (later: boolean) => fc.record({ op: fc.constant("limit" as const), key, n: fc.integer({ min: 1, max: 12 }), cost: fc.integer({ min: 1, max: 2 }), later: fc.constant(later) });
  const set = fc.record({ op: fc.constant("set" as const), key, override, ttl: fc.constant(undefined) });
  const change = fc.oneof(set, fc.record({ op: fc.constant("clear" as const), key }));
  const refunds = fc.array(fc.record({ op: fc.constant("refund" as const), pick: fc.nat() }), { minLength: 1, maxLength: 12 });
  const episode = fc.tuple(set, limit(false), limit(true), change, refunds).map(([a, b, c, d, e]) => [a, b, c, d, ...e]);
  return fc.array(fc.oneof({ weight: 1, arbitrary: episode }, { weight: 3, arbitrary: loose.map((x) => [x]) }), { minLength: 1, maxLength: 12 }).map((xs) => xs.flat());
}

/** A key's requests that the run refunds later, not yet refunded: their twin never made them. */
interface Pending {
  key: string;
  decision: Decision;
  admission: Admission;
}

/** Registers the mixed-sequence fuzz (call inside a store's `describe`). */
export function testMixedSequences(suite: SuiteContext): void {
  const huge = largestLimit();
  const scenario = fc
    .uniqueArray(NAME, { minLength: 1, maxLength: 2 })
    .chain((names) => fc.tuple(fc.constant(names), fc.tuple(...names.map((name) => policyArbitrary(name, huge)))))
    .chain(([names, policies]) =>
      fc.tuple(fc.constant(policies as Policy[]), fc.uniqueArray(NAME, { minLength: 1, maxLength: 2 }).chain((keys) => stepsArbitrary(names, keys, huge))),
    );

  it("mixed sequences (limit, peek, refund, overrides with and without ttl, blocks, cached denials, prototype names, limits and costs up to the maxima): bounds hold, and a refunded key is never more permissive than its twin that never made those requests", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ([policies, steps]) => {
        const run = new Run(suite, policies);
        for (const step of steps) await run.step(step);
        await run.settle();
      }),
      { numRuns: suite.runs.invariants },
    );
  });
}

type Step = ReturnType<typeof stepsArbitrary> extends fc.Arbitrary<(infer S)[]> ? S : never;

/** One run: the limiter under test (a deny cache on), its twin, what was admitted, what is to be refunded. */
class Run {
  readonly l: RateLimiter;
  readonly twin: RateLimiter;
  readonly admissions: Admission[] = [];
  readonly pending: Pending[] = [];
  /** Per policy, the effective policy with the largest quota set so far. */
  readonly largest: Policy[];
  t = 0;
  local = 0;

  constructor(
    readonly suite: SuiteContext,
    readonly policies: Policy[],
  ) {
    const common = { store: remote(suite.store()), limits: policies, onStoreError: "deny" as const, timeoutMs: suite.storeTimeoutMs };
    this.l = new RateLimiter({ ...common, prefix: suite.prefix(), denyCache: { clock: () => this.local } });
    this.twin = new RateLimiter({ ...common, prefix: suite.prefix(), denyCache: false });
    this.largest = [...policies];
    suite.setNow(suite.t0);
  }

  async step(step: Step): Promise<void> {
    if (step.op === "wait") {
      this.t += step.dt;
      this.local = this.t;
      this.suite.setNow(this.suite.t0 + this.t);
    } else if (step.op === "limit") await this.limit(step.key, step.n, step.cost, step.later);
    else if (step.op === "refund") await this.refund(step.pick);
    else if (step.op === "peek") this.sane(await this.l.peek(step.key));
    else if (step.op === "set") await this.setOverride(step.key, step.override, step.ttl);
    else if (step.op === "clear") await Promise.all([this.l.clearOverride(step.key), this.twin.clearOverride(step.key)]);
    else if (step.op === "block") await Promise.all([this.l.block(step.key, step.ms), this.twin.block(step.key, step.ms)]);
    else await Promise.all([this.l.unblock(step.key), this.twin.unblock(step.key)]);
  }

  async limit(key: string, n: number, cost: number, later: boolean): Promise<void> {
    for (let i = 0; i < n; i++) {
      const d = await this.l.limit(key, { cost });
      this.sane(d);
      if (!d.allowed) {
        const disagreement = await headersDisagree(d, this.policies);
        if (disagreement !== undefined) throw new Error(`a 429 whose headers disagree with its body: ${disagreement}`);
        continue;
      }
      // under an unlimited override nothing is counted: in no bound, nothing to refund
      if (d.override !== undefined && "unlimited" in d.override) continue;
      const admission: Admission = { key, atMs: d.now, cost, refunded: 0, decision: d, released: false };
      this.admissions.push(admission);
      const broken = violatedBound(this.largest, this.admissions, key, d.now);
      if (broken !== undefined) throw new Error(`over-admission: ${broken}`);
      if (later) this.pending.push({ key, decision: d, admission });
      else await this.twin.limit(key, { cost });
    }
  }

  /** Refunds a request the run marked to refund: wholly, through its decision. Then the key is compared with its twin. */
  async refund(pick: number): Promise<void> {
    const p = this.pending.splice(pick % Math.max(1, this.pending.length), 1)[0];
    if (p === undefined) return;
    const after = await this.l.refund(p.key, { decision: p.decision });
    p.admission.refunded = p.admission.cost;
    this.sane(after);
    if (!this.pending.some((q) => q.key === p.key)) await this.compare(p.key);
  }

  /** The key under test is never more permissive than its twin: no policy has more remaining. */
  async compare(key: string): Promise<void> {
    const [mine, theirs] = await Promise.all([this.l.peek(key), this.twin.peek(key)]);
    mine.policies.forEach((p, i) => {
      const twin = theirs.policies[i]!;
      if (p.remaining > twin.remaining) {
        throw new Error(`after its refunds, ${key} has ${p.remaining} left of ${p.policy} where its twin, which never made those requests, has ${twin.remaining} (override ${JSON.stringify(mine.override)})`);
      }
    });
  }

  async setOverride(key: string, override: Override, ttl: number | undefined): Promise<void> {
    const options = ttl === undefined ? undefined : { ttl };
    try {
      await this.l.setOverride(key, override, options);
    } catch (error) {
      if (error instanceof SluiceInputError) return; // refused (a scale that leaves a quota 0): nothing changed
      throw error;
    }
    await this.twin.setOverride(key, override, options);
    if ("unlimited" in override) return;
    effectivePolicies(this.policies, overrideBody(override)).forEach((p, i) => {
      if (p.limit > this.largest[i]!.limit) this.largest[i] = p;
    });
  }

  /** What any answer must be: whole units left, never below 0; the store's clock, not the past. */
  sane(d: Decision): void {
    for (const p of [d, ...d.policies]) if (!(Number.isSafeInteger(p.remaining) && p.remaining >= 0)) throw new Error(`remaining ${p.remaining} (${d.policy}, ${d.reason})`);
    if (d.now < this.suite.t0 + this.t) throw new Error(`now ${d.now} is before the store's clock ${this.suite.t0 + this.t}`);
  }

  /** The requests still to refund, refunded, and the last comparisons made. */
  async settle(): Promise<void> {
    while (this.pending.length > 0) await this.refund(0);
  }
}
