/**
 * One algorithm's definition tested by itself, beside its folder in core
 * (`packages/core/src/algorithms/<kind>/index.test.ts` calls {@link testAlgorithm} with it): its
 * decisions over its own state, read and written by name, with no store, limiter or engine
 * around it. Three properties over random policies of the kind and random arrivals:
 *
 * - it decides as the kind's reference model (`algorithms/<kind>.ts` here, written from the
 *   textbook) does: the same `allowed`, `remaining`, `resetAt` and `delayMs` for every request;
 * - whatever it decides, no span admits more than the kind's bound (the invariant itself, not the
 *   model: a model can share a mistake);
 * - its stored form (`encode`) read back (`decode`) into a fresh state decides every later
 *   request as the state it came from.
 *
 * @example
 * ```ts
 * import { testAlgorithm } from "@sluice/testing/algorithm-suite";
 * import { fixedWindowAlgorithm } from "./index.js";
 * testAlgorithm(fixedWindowAlgorithm);
 * ```
 *
 * @module
 */
import type { Decision, Policy, PolicyKind } from "@sluice/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Admission, referenceOf } from "./algorithms/index.js";

/** What the suite needs of core's `AlgorithmDefinition` (structurally: the kit reaches core only through its entries). */
export interface TestedAlgorithm {
  readonly kind: PolicyKind;
  readonly leases: boolean;
  readonly state: {
    readonly numWidth: number;
    readonly objWidth: number;
    at(num: Float64Array, off: number, obj: unknown[], oOff: number): unknown;
  };
  evaluate(policy: never, state: unknown, nowUs: number, cost: number, write: boolean, lease: number): DecisionPart;
  release?(policy: never, state: unknown, nowUs: number, lease: number): boolean;
  encode(policy: never, state: unknown, nowUs: number, out: number[]): boolean;
  decode(policy: never, value: readonly number[], state: unknown, nowUs: number): boolean;
  expiresAtUs(policy: never, state: unknown): number;
}

/** The fields of a policy's result the suite compares. */
interface DecisionPart {
  allowed: boolean;
  remaining: number;
  resetAt: number;
  delayMs: number;
  retryAfterMs: number;
}

/** Where every run's clock starts (ms): a whole minute plus 42 s, so windows do not start with the run. */
const T0_MS = 1_700_000_022_000;

/** One step of a run: a request (`wait` ms after the previous step) of `cost`, or the release of the `pick`-th lease held. */
type Step = { op: "limit"; wait: number; cost: number } | { op: "release"; wait: number; pick: number };

/** One key's state for one policy of `algorithm`: its own arrays, and the view over them. */
class Cell {
  readonly num: Float64Array;
  readonly obj: unknown[];
  constructor(readonly algorithm: TestedAlgorithm) {
    this.num = new Float64Array(algorithm.state.numWidth);
    this.obj = new Array(algorithm.state.objWidth).fill(undefined);
  }
  get state(): unknown {
    return this.algorithm.state.at(this.num, 0, this.obj, 0);
  }
}

/** The steps of a run over `policy`: waits on its own time scales, small costs, releases where leases are held. */
function stepsArbitrary(kind: PolicyKind, policy: Policy): fc.Arbitrary<Step[]> {
  const reference = referenceOf(kind);
  const scales = reference.timeScalesMs(policy as never);
  const wait = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.constantFrom(...scales), fc.integer({ min: 0, max: Math.max(...scales) * 2 }));
  const limit = fc.record({ op: fc.constant("limit" as const), wait, cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })) });
  const release = fc.record({ op: fc.constant("release" as const), wait, pick: fc.nat() });
  return fc.array(reference.leases ? fc.oneof({ weight: 3, arbitrary: limit }, { weight: 1, arbitrary: release }) : limit, { minLength: 1, maxLength: 60 });
}

/** A random policy of the kind (the reference's small options) and a run over it. */
function runArbitrary(kind: PolicyKind): fc.Arbitrary<[Policy, Step[]]> {
  const reference = referenceOf(kind);
  return reference.arbitrary.options.chain((options) => {
    const policy = reference.create(options as never) as Policy;
    return fc.tuple(fc.constant(policy), stepsArbitrary(kind, policy));
  });
}

/** The result of a request on a cell: allowed ones are written (with lease `lease`). */
function decide(cell: Cell, policy: Policy, nowMs: number, cost: number, lease: number): DecisionPart {
  return cell.algorithm.evaluate(policy as never, cell.state, nowMs * 1000, cost, true, lease);
}

/**
 * The suite of one algorithm's definition (call it at the top level of the kind's test file in
 * core, with the kind's definition).
 */
export function testAlgorithm(algorithm: TestedAlgorithm, options: { runs?: number } = {}): void {
  const kind = algorithm.kind;
  const numRuns = options.runs ?? 150;

  describe(`${kind}: the definition by itself, over its own state`, () => {
    it("decides every request as the reference model does (allowed, remaining, resetAt, delayMs)", () => {
      fc.assert(
        fc.property(runArbitrary(kind), ([policy, steps]) => {
          const cell = new Cell(algorithm);
          const model = referenceOf(kind).model(policy as never);
          const held: number[] = [];
          let t = T0_MS;
          steps.forEach((step, i) => {
            t += step.wait;
            if (step.op === "release") {
              const lease = held.splice(step.pick % Math.max(1, held.length), 1)[0];
              if (lease === undefined) return;
              algorithm.release?.(policy as never, cell.state, t * 1000, lease);
              model.release?.(t, lease);
              return;
            }
            const expected = model.check(t, step.cost);
            const got = decide(cell, policy, t, step.cost, i + 1);
            const context = `step ${i} at +${t - T0_MS} ms, cost ${step.cost}`;
            expect({ allowed: got.allowed, remaining: got.remaining, resetAt: got.resetAt, delayMs: got.delayMs }, context).toEqual({
              allowed: expected.allowed,
              remaining: expected.remaining,
              resetAt: expected.resetAt,
              delayMs: expected.delayMs,
            });
            if (got.allowed) {
              model.commit(t, step.cost, i + 1);
              held.push(i + 1);
            }
          });
        }),
        { numRuns },
      );
    });

    it("never admits more than the kind's bound in any span, whatever it decides", () => {
      fc.assert(
        fc.property(runArbitrary(kind), ([policy, steps]) => {
          const cell = new Cell(algorithm);
          const admissions: Admission[] = [];
          let t = T0_MS;
          steps.forEach((step, i) => {
            t += step.wait;
            if (step.op === "release") {
              const live = admissions.filter((a) => !a.released);
              const admission = live[step.pick % Math.max(1, live.length)];
              if (admission === undefined) return;
              algorithm.release?.(policy as never, cell.state, t * 1000, Number(admission.decision.lease));
              admission.released = true;
              return;
            }
            const got = decide(cell, policy, t, step.cost, i + 1);
            if (!got.allowed) return;
            // what the bound reads of a decision: the lease an allowed request of a concurrency cap holds
            const decision = (algorithm.leases ? { lease: String(i + 1) } : {}) as Decision;
            admissions.push({ key: "k", atMs: t, cost: step.cost, refunded: 0, decision, released: false });
            const broken = referenceOf(kind).violatedBound(policy as never, admissions, t);
            expect(broken, `step ${i} at +${t - T0_MS} ms`).toBeUndefined();
          });
        }),
        { numRuns },
      );
    });

    it("its stored form, read back into a fresh state, decides every later request as the state it came from", () => {
      fc.assert(
        fc.property(runArbitrary(kind), fc.nat(), ([policy, steps], cut) => {
          const cell = new Cell(algorithm);
          let t = T0_MS;
          const at = cut % steps.length;
          let copy: Cell | undefined;
          steps.forEach((step, i) => {
            t += step.wait;
            if (i === at) {
              copy = new Cell(algorithm);
              const stored = [algorithm.expiresAtUs(policy as never, cell.state)];
              const live = stored[0]! > t * 1000 && algorithm.encode(policy as never, cell.state, t * 1000, stored);
              // nothing live is stored: the copy starts empty, as a store that dropped the key
              if (live) expect(algorithm.decode(policy as never, stored, copy.state, t * 1000), `decode(${JSON.stringify(stored)})`).toBe(true);
            }
            if (step.op === "release") return;
            const a = decide(cell, policy, t, step.cost, i + 1);
            if (copy !== undefined) expect(decide(copy, policy, t, step.cost, i + 1), `step ${i}, after the copy at step ${at}`).toEqual(a);
          });
        }),
        { numRuns },
      );
    });
  });
}

/**
 * The decisions of `algorithm` for requests `[atMs, cost]` on one fresh key, each as
 * `"allow r=<remaining> reset=<resetAt> refill=<refillAt>"` or `"deny r=… retry=<retryAfterMs> …"`
 * (a queue's `delay=` when there is one): exact sequences read as the definition does.
 */
export function decideSequence(algorithm: TestedAlgorithm, policy: Policy, requests: readonly (readonly [atMs: number, cost: number])[]): string[] {
  const cell = new Cell(algorithm);
  return requests.map(([atMs, cost], i) => {
    const r = decide(cell, policy, atMs, cost, i + 1) as DecisionPart & { refillAt: number };
    const delay = r.delayMs > 0 ? ` delay=${r.delayMs}` : "";
    return r.allowed ? `allow r=${r.remaining} reset=${r.resetAt} refill=${r.refillAt}${delay}` : `deny r=${r.remaining} retry=${r.retryAfterMs} reset=${r.resetAt}`;
  });
}
