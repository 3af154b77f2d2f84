/**
 * The five algorithms and the concurrency cap, one folder each, and the registry that maps a policy
 * kind to its definition. Each folder holds everything Sluice's TypeScript knows about its kind:
 * the factory and its validation, the plain data it travels as, its header parameters, its state
 * (width, stored form, expiry) and its semantics (evaluate, refund, release). `@sluice/redis` keeps
 * the Lua side of each kind in `src/algorithms/<kind>.ts`, `@sluice/testing` the reference model in
 * `src/algorithms/<kind>.ts`.
 *
 * Adding an algorithm: a folder here with its policy type, factory and {@link AlgorithmDefinition},
 * its policy type in {@link Policy} and its line in {@link ALGORITHMS} (the compiler then asks for
 * the Lua part and the reference model); see CONTRIBUTING.md.
 *
 * @module
 */
import { SluiceConfigError, describe } from "../errors.js";
import type { PolicyResult } from "../results.js";
import { type ConcurrencyPolicy, concurrencyAlgorithm } from "./concurrency/index.js";
import { type AlgorithmDefinition, MAX_QUOTA, isCount, isName } from "./definition.js";
import { type FixedWindowPolicy, fixedWindowAlgorithm } from "./fixedWindow/index.js";
import { type LeakyBucketPolicy, leakyBucketAlgorithm } from "./leakyBucket/index.js";
import { isBlockSpec } from "./penalty-box.js";
import { type SlidingLogPolicy, slidingLogAlgorithm } from "./slidingLog/index.js";
import { type SlidingWindowPolicy, slidingWindowAlgorithm } from "./slidingWindow/index.js";
import { type TokenBucketPolicy, tokenBucketAlgorithm } from "./tokenBucket/index.js";

export type { AlgorithmDefinition, PolicyCommon, BlockSpec } from "./definition.js";
export { MAX_QUOTA, validateName } from "./definition.js";
export { type BlockOption, blockDurationMs } from "./penalty-box.js";
export type { WindowOptions } from "./window.js";
export { type FixedWindowPolicy, fixedWindow } from "./fixedWindow/index.js";
export { type SlidingWindowPolicy, slidingWindow } from "./slidingWindow/index.js";
export { type SlidingLogPolicy, slidingLog } from "./slidingLog/index.js";
export { type TokenBucketOptions, type TokenBucketPolicy, tokenBucket } from "./tokenBucket/index.js";
export { type LeakyBucketOptions, type LeakyBucketPolicy, leakyBucket } from "./leakyBucket/index.js";
export { MAX_GCRA_SHIFT_US } from "./gcra.js";
export { CONCURRENCY_RETRY_MS, type ConcurrencyOptions, type ConcurrencyPolicy, concurrency } from "./concurrency/index.js";

/** One configured limit, as returned by the algorithm factories. */
export type Policy = FixedWindowPolicy | SlidingWindowPolicy | SlidingLogPolicy | TokenBucketPolicy | LeakyBucketPolicy | ConcurrencyPolicy;

/** The algorithm of a policy. */
export type PolicyKind = Policy["kind"];

/** Every kind's definition: the compiler refuses a kind of {@link Policy} without one. */
export const ALGORITHMS: { readonly [K in PolicyKind]: AlgorithmDefinition<Extract<Policy, { kind: K }>, any> } = {
  fixedWindow: fixedWindowAlgorithm,
  slidingWindow: slidingWindowAlgorithm,
  slidingLog: slidingLogAlgorithm,
  tokenBucket: tokenBucketAlgorithm,
  leakyBucket: leakyBucketAlgorithm,
  concurrency: concurrencyAlgorithm,
};

/** Every policy kind, in the registry's order. */
export const POLICY_KINDS = Object.freeze(Object.keys(ALGORITHMS) as PolicyKind[]);

/** Whether `kind` names an algorithm of the registry. */
export function isPolicyKind(kind: unknown): kind is PolicyKind {
  return typeof kind === "string" && Object.prototype.hasOwnProperty.call(ALGORITHMS, kind);
}

/** The definition of a policy's algorithm (typed for any policy). */
export function algorithmOf(policy: Pick<Policy, "kind">): AlgorithmDefinition<Policy> {
  return ALGORITHMS[policy.kind] as AlgorithmDefinition<Policy>;
}

/** Whether a policy's allowed requests hold leases (a concurrency cap). */
export function holdsLeases(policy: Pick<Policy, "kind">): boolean {
  return algorithmOf(policy).leases;
}

/** A policy's quota unit when it is not requests per window (`"concurrent-requests"`); `undefined` for a policy with a window. */
export function quotaUnitOf(policy: Pick<Policy, "kind">): string | undefined {
  return algorithmOf(policy).quotaUnit;
}

/**
 * True if `value` is a policy as the factories make them: a kind of the registry, a valid name and
 * every parameter its algorithm reads, as positive safe integers, its quota at most {@link MAX_QUOTA}
 * (so a hand-made object cannot slip non-integers, or numbers no client reads back exactly, into
 * the arithmetic).
 */
export function isPolicy(value: unknown): value is Policy {
  if (typeof value !== "object" || value === null) return false;
  const p = value as Record<string, unknown>;
  if (!isPolicyKind(p.kind) || !isName(p.name) || !isCount(p.limit) || p.limit > MAX_QUOTA || !isCount(p.windowSeconds) || !isBlockSpec(p.block)) return false;
  return ALGORITHMS[p.kind].isValid(p);
}

/**
 * Rebuilds a policy from its plain data (`{ kind, name, ...options, block? }`, see
 * {@link policyData}) with its factory, which validates every field.
 */
export function policyFromData(data: Record<string, unknown>): Policy {
  const { kind, ...options } = data;
  if (!isPolicyKind(kind)) throw new SluiceConfigError(`kind must be one of ${POLICY_KINDS.join(", ")}; got ${describe(kind)}`, { option: "kind" });
  return ALGORITHMS[kind].create(options);
}

/** A policy as plain data: its kind, name, factory options (durations in ms) and penalty box. */
export function policyData(policy: Policy): Record<string, unknown> {
  const data: Record<string, unknown> = { kind: policy.kind, name: policy.name, ...algorithmOf(policy).options(policy) };
  const block = policy.block;
  if (block !== undefined) data.block = { base: block.baseMs, factor: block.factor, max: block.maxMs };
  return data;
}

/**
 * The state of `policy` whose numbers start at `off` in `num` and lists at `oOff` in `obj` (the
 * engine's arrays), as its algorithm reads it: by name (see `state.ts`). Valid until the next call.
 */
export function stateAt(policy: Pick<Policy, "kind">, num: Float64Array, off: number, obj: unknown[], oOff: number): unknown {
  return algorithmOf(policy).state.at(num, off, obj, oOff);
}

/** Evaluates one policy (see {@link AlgorithmDefinition.evaluate}) over its state in the engine's arrays. */
export function evaluate(policy: Policy, num: Float64Array, off: number, obj: unknown[], oOff: number, nowUs: number, cost: number, write: boolean, lease = 0): PolicyResult {
  const algorithm = algorithmOf(policy);
  return algorithm.evaluate(policy, algorithm.state.at(num, off, obj, oOff), nowUs, cost, write, lease);
}

/**
 * The policy's state now, consuming nothing, reported as allowed: used for a policy that would have
 * allowed a request another policy denied. (An infinite cost takes every algorithm's denial path,
 * which computes exactly the state now; the flags are then set for "would have allowed".)
 */
export function stateNow(policy: Policy, num: Float64Array, off: number, obj: unknown[], oOff: number, nowUs: number): PolicyResult {
  const r = evaluate(policy, num, off, obj, oOff, nowUs, Infinity, false);
  r.allowed = true;
  r.retryAfterMs = 0;
  return r;
}

/**
 * The answer of an allowed request from the state it left, given in its stored form (`[expiresUs,
 * ...numbers]`, as `StoredState` keeps a policy's field; the expiry is not read): the state
 * now, reported as allowed, which is that request's answer for every algorithm but a queue's
 * `delayMs` (always 0 here). For a store that gets the state back rather than the answer (the Redis
 * fast path), so that it answers with the same arithmetic as every other store. `undefined` when
 * the stored form is malformed.
 *
 * @example
 * ```ts
 * import { fixedWindow } from "@sluice/core";
 * import { allowedFromState } from "@sluice/core/store";
 * const policy = fixedWindow({ limit: 10, window: "1m" });
 * // window 0 (its first minute) holds 3 requests: 7 left, until the minute ends
 * allowedFromState(policy, [0, 0, 3], 1_000_000); // { allowed: true, remaining: 7, resetAt: 60000, ... }
 * ```
 */
export function allowedFromState(policy: Policy, stored: readonly number[], nowUs: number): PolicyResult | undefined {
  const algorithm = algorithmOf(policy);
  const num = new Float64Array(algorithm.state.numWidth);
  const obj: unknown[] = algorithm.state.objWidth === 0 ? NO_OBJECTS : new Array(algorithm.state.objWidth).fill(undefined);
  if (!algorithm.decode(policy, stored, algorithm.state.at(num, 0, obj, 0), nowUs)) return undefined;
  return stateNow(policy, num, 0, obj, 0, nowUs);
}

/** The object slots of an algorithm that keeps none. */
const NO_OBJECTS: unknown[] = [];

/** `peek`: whether a cost-1 request would pass now, with `remaining`/`resetAt` of the state now. */
export function peekPolicy(policy: Policy, num: Float64Array, off: number, obj: unknown[], oOff: number, nowUs: number): PolicyResult {
  const r = evaluate(policy, num, off, obj, oOff, nowUs, 1, false);
  if (r.allowed) {
    const now = stateNow(policy, num, off, obj, oOff, nowUs);
    r.remaining = now.remaining;
    r.resetAt = now.resetAt;
    r.refillAt = now.refillAt;
  }
  return r;
}
