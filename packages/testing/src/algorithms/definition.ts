/**
 * What every algorithm gives the test kit ({@link ReferenceAlgorithm}): its naive reference model,
 * the admission bound the invariant suite holds every store to, the spans on which its state
 * changes, its random options for property tests and what the vectors' generator needs to know of
 * it. The registry (`algorithms/index.ts`) maps every policy kind to one, so the compiler refuses a
 * kind without a model; nothing outside the `algorithms/` folders branches on a kind.
 *
 * The models are written from the textbook description of each algorithm, never from core's
 * engine (nothing here imports core's evaluation): slow and obviously right, so that the property
 * tests and the recorded vectors compare every store with something independent.
 *
 * @module
 */
import type { Decision, Duration, Policy, PolicyKind } from "@sluice/core";
import fc from "fast-check";

/** A policy's `block` option as data. */
export type BlockSpecData = number | string | { base: number | string; factor?: number; max?: number | string };

/** The options every spec may carry beside its algorithm's own: a name and (for the kinds that take one) a penalty box. */
export interface SpecCommon {
  name?: string;
  block?: BlockSpecData;
}

/** A policy of one kind. */
export type PolicyOf<K extends PolicyKind> = Extract<Policy, { kind: K }>;

/**
 * One policy's model: `check` must not change state; `commit` applies an allowed request.
 *
 * Time is whole milliseconds (the stores' test clocks are ms). Internally µs where the design says
 * µs (a bucket's emission interval), so the models match the design's integer definitions.
 */
export interface Model {
  readonly policy: Policy;
  /** Would `cost` pass at `nowMs`? Also `remaining`/`resetAt` (after, if allowed; now, if not) and `delayMs`. */
  check(nowMs: number, cost: number): { allowed: boolean; remaining: number; resetAt: number; delayMs: number };
  /** `lease`: the id under which a policy that holds leases keeps the request's slot (ignored by the others). */
  commit(nowMs: number, cost: number, lease?: number): void;
  /** The state now: remaining and resetAt without consuming. */
  now(nowMs: number): { remaining: number; resetAt: number };
  /**
   * Gives `cost` units back for the request `charge` describes (`undefined`: the latest charges),
   * never above the quota, never more than the charge still weighs.
   */
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined): void;
  /** What a refund of the charge just committed needs to know (a bucket's deficit or backlog right after it, in µs: the same under any quota). */
  snapshot(): number;
  /**
   * What one unit of a charge made now weighs, for a model whose units are not plain counts (a
   * bucket: its emission interval under the quota it judges by now, µs); absent otherwise. A refund
   * gives back at the price its charge was made at.
   */
  price?(): number;
  /** The largest cost the policy can ever admit. */
  readonly maxCost: number;
  /**
   * When the policy's available quota next grows, if the model knows it directly; absent: the
   * reference limiter searches for it (the first moment one unit more than passes now would pass).
   */
  refillAt?(nowMs: number): number;
  /**
   * The most a denial's `retryAfterMs` says, when it is a hint rather than an exact time (a slot
   * held by a lease may free at any moment); absent: the exact least wait.
   */
  readonly retryCapMs?: number;
  /** Frees the slot `lease` holds (a policy that holds leases); idempotent. */
  release?(nowMs: number, lease: number): void;
  /**
   * Judges the same state under `policy` from now on: the model's own policy with another quota
   * (a key's override, `limiter.setOverride`; the model's own policy again when it ends). The model
   * works out the rest from the override contract by itself — a window keeps its length; a bucket
   * of quota `Q'` (its own `Q`) has `queue' = floor(queue × Q'/Q)` and emission interval
   * `T' = max(1, ceil(T × Q/Q'))` — and throws when `policy` (core's effective policy) says
   * otherwise. The state carries over as a store keeps it: window counts, log entries and leases
   * as they are; a bucket's theoretical arrival time (its backlog, in µs) unchanged.
   */
  retarget(policy: Policy): void;
}

/** The largest refund shift a bucket keeps (2^50 µs), as the design says: a refund past it gives back only what fits. */
export const MAX_GCRA_SHIFT_US = 2 ** 50;

/**
 * One model's view of a charge to refund: when it was made, the model's {@link Model.snapshot}
 * right after it, and how many of its units were given back already.
 */
export interface ModelCharge {
  atMs: number;
  snapshot: number;
  refunded: number;
  /** What one unit of it weighed (the model's {@link Model.price} then); absent or 0: the price now. */
  price?: number | undefined;
}

/** An admitted request, as the invariant suite accounts for it. */
export interface Admission {
  key: string;
  atMs: number;
  cost: number;
  /** Units refunded for it, by the rules (never more than it was charged). */
  refunded: number;
  decision: Decision;
  released: boolean;
}

/**
 * Everything the test kit knows about one algorithm. `O` is the options of its factory as plain
 * data (a {@link PolicySpec}'s `options`).
 */
export interface ReferenceAlgorithm<K extends PolicyKind, O extends object> {
  /** The policy kind (`Policy["kind"]`). */
  readonly kind: K;
  /**
   * Whether an allowed request holds a lease (a cap on requests in flight rather than a rate):
   * such a policy's denials carry a retry hint, not an exact time (a slot frees on a release at
   * any moment), and it takes no penalty box.
   */
  readonly leases: boolean;
  /** Builds the policy a spec's options describe (core's factory). */
  create(options: O): PolicyOf<K>;
  /** The naive reference model of one policy, for one key. */
  model(policy: PolicyOf<K>): Model;
  /**
   * The admission bound for the spans that end at `nowMs` (the time of an admission): `mine` are
   * the key's admissions so far. A description of the violation, or `undefined`.
   */
  violatedBound(policy: PolicyOf<K>, mine: readonly Admission[], nowMs: number): string | undefined;
  /** Spans (ms) on which a policy's state changes (a window and half of it, a unit's refill, a lease): the waits the invariant suite tries. */
  timeScalesMs(policy: PolicyOf<K>): number[];
  /**
   * Small random options for property tests (limits that run out quickly, windows under a few
   * seconds; no name, no penalty box), and the weight of this kind among all kinds.
   */
  readonly arbitrary: { readonly options: fc.Arbitrary<O>; readonly weight: number };
  /**
   * A random policy of this kind for the header/body agreement runs (`agreement.ts`), named
   * `name`; `null` for a kind those runs leave out.
   */
  readonly agreementArbitrary: ((name: string) => fc.Arbitrary<Policy>) | null;
  /** The largest cost a policy with these options can ever admit (`Infinity`: one slot whatever the cost). */
  maxCost(options: O): number;
  /** How far apart (ms, at most ×1.5) the requests of a random recorded vector of this kind alone fall. */
  vectorSpanMs(options: O): number;
}

/** A reference algorithm of any kind (what the registry hands out for a policy whose kind is not known statically). */
export type AnyReferenceAlgorithm = ReferenceAlgorithm<PolicyKind, object>;

/** `ceil(a / b)`. */
export const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);

/** The window lengths (ms) of random window options and bucket intervals. */
export const smallWindowMs: fc.Arbitrary<number> = fc.constantFrom(100, 250, 1000, 1500, 3000);

/** Net units of an admission: its cost less what was refunded for it. */
export const netUnits = (a: Admission): number => a.cost - a.refunded;

/** The bound of a fixed window (and of a sliding window's current window): at most `limit` units per window. */
export function perWindowBound(policy: PolicyOf<"fixedWindow" | "slidingWindow">, mine: readonly Admission[], nowMs: number): string | undefined {
  const W = policy.windowMs;
  const idx = Math.floor(nowMs / W);
  const sum = mine.filter((a) => Math.floor(a.atMs / W) === idx).reduce((s, a) => s + netUnits(a), 0);
  return sum > policy.limit ? `${policy.kind} ${policy.name}: ${sum} units admitted in window ${idx} (limit ${policy.limit})` : undefined;
}

/** The bound of a bucket: at most `burst + queue` units at once, then one per emission interval, in any span. */
export function bucketBound(policy: PolicyOf<"tokenBucket" | "leakyBucket">, mine: readonly Admission[], nowMs: number): string | undefined {
  const T = policy.emissionIntervalUs;
  const size = policy.burst + policy.queue;
  for (const start of mine) {
    if (start.atMs > nowMs) continue;
    const sum = mine.filter((a) => a.atMs >= start.atMs && a.atMs <= nowMs).reduce((s, a) => s + netUnits(a), 0);
    // at most size units at once, then one per T µs
    if (sum * T > (nowMs - start.atMs) * 1000 + size * T) {
      return `${policy.kind} ${policy.name}: ${sum} units admitted in [${start.atMs}, ${nowMs}] (at most ${size} + ${(nowMs - start.atMs) * 1000} µs / ${T} µs)`;
    }
  }
  return undefined;
}

/** The spans of a window algorithm: its window, half of it, and one ms more than it. */
export function windowTimeScalesMs(policy: { readonly windowMs: number }): number[] {
  return [policy.windowMs, Math.ceil(policy.windowMs / 2), policy.windowMs + 1];
}

/** The spans of a bucket: a unit's refill, a full refill, three of them, half a unit. */
export function bucketTimeScalesMs(policy: PolicyOf<"tokenBucket" | "leakyBucket">): number[] {
  const unit = Math.ceil(policy.emissionIntervalUs / 1000);
  return [unit, unit * (policy.burst + policy.queue), unit * (policy.burst + policy.queue) * 3, Math.ceil(unit / 2)];
}

/** The options of a window algorithm's spec. */
export interface WindowSpecOptions extends SpecCommon {
  limit: number;
  window: number | string;
}

/** Random window options: a limit of 1 to 8 over one of {@link smallWindowMs}. */
export const windowOptionsArbitrary: fc.Arbitrary<WindowSpecOptions> = fc.record({ limit: fc.integer({ min: 1, max: 8 }), window: smallWindowMs });

/** How far apart the requests of a window algorithm's random vector fall: 20 s for a day's window, else 12 s. */
export function windowVectorSpanMs(options: WindowSpecOptions): number {
  return options.window === "1d" ? 20_000 : 12_000;
}

/**
 * Random windows for the header/body agreement runs: 1 to 5 units per 1 to 90 whole seconds
 * (`windowMs` overrides the window's arbitrary).
 */
export function windowAgreementArbitrary(
  factory: (options: { limit: number; window: number; name: string }) => Policy,
  name: string,
  windowMs: fc.Arbitrary<number> = fc.integer({ min: 1, max: 90 }).map((s) => s * 1000),
): fc.Arbitrary<Policy> {
  return fc.record({ limit: fc.integer({ min: 1, max: 5 }), windowMs }).map(({ limit, windowMs }) => factory({ limit, window: windowMs, name }));
}

/**
 * The check every model makes of an effective policy it is retargeted to: the same kind, name and
 * penalty box as its own policy, a positive safe-integer quota, and `same` (what the kind keeps:
 * a window's length, a lease's) equal. Throws when one differs.
 */
export function assertRetarget(base: Policy, policy: Policy, same: readonly string[]): void {
  const b = base as unknown as Record<string, unknown>;
  const p = policy as unknown as Record<string, unknown>;
  const differs = ["kind", "name", ...same].filter((k) => b[k] !== p[k]);
  if (policy.block !== base.block && JSON.stringify(policy.block) !== JSON.stringify(base.block)) differs.push("block");
  if (!Number.isSafeInteger(policy.limit) || policy.limit < 1) differs.push("limit");
  if (differs.length > 0) {
    throw new Error(`reference: the effective policy of ${JSON.stringify(base.name)} (${base.kind}) is not its own with another quota: ${differs.map((k) => `${k} ${JSON.stringify(b[k])} → ${JSON.stringify(p[k])}`).join(", ")}`);
  }
}

/** A window algorithm's kind. */
export type WindowKind = "fixedWindow" | "slidingWindow" | "slidingLog";

/**
 * The reference algorithm of a window kind: `limit` per `window`, its factory and model, the
 * per-window bound unless `bound` says otherwise, the agreement runs' windows unless `agreementWindowMs`
 * says otherwise.
 */
export function windowReference<K extends WindowKind>(
  kind: K,
  factory: (options: { limit: number; window: number | Duration; name?: string }) => PolicyOf<K>,
  model: (policy: PolicyOf<K>) => Model,
  more: { bound?: (policy: PolicyOf<K>, mine: readonly Admission[], nowMs: number) => string | undefined; agreementWindowMs?: fc.Arbitrary<number> } = {},
): ReferenceAlgorithm<K, WindowSpecOptions> {
  return {
    kind,
    leases: false,
    create: (options) => factory(options as Parameters<typeof factory>[0]),
    model,
    violatedBound: more.bound ?? (perWindowBound as (policy: PolicyOf<K>, mine: readonly Admission[], nowMs: number) => string | undefined),
    timeScalesMs: windowTimeScalesMs,
    arbitrary: { options: windowOptionsArbitrary, weight: 5 },
    agreementArbitrary: (name) => windowAgreementArbitrary(factory, name, more.agreementWindowMs),
    maxCost: (options) => options.limit,
    vectorSpanMs: windowVectorSpanMs,
  };
}
