/**
 * The registry of the test kit's algorithms: every policy kind's reference model, admission bound,
 * time scales, random options and vector settings, one file each (`algorithms/<kind>.ts`). The
 * compiler refuses a kind of core's `Policy` without one, and nothing outside this folder branches
 * on a kind: the reference limiter, the invariant suite, the vectors and their generator, the
 * conformance suite and the agreement runs look kinds up here.
 *
 * Adding an algorithm: a file here with its model and {@link ReferenceAlgorithm}, and its line in
 * {@link REFERENCE_ALGORITHMS}; see CONTRIBUTING.md.
 *
 * @module
 */
import type { Policy, PolicyKind } from "@sluice/core";
import { concurrencyReference } from "./concurrency.js";
import type { AnyReferenceAlgorithm, Model, ReferenceAlgorithm } from "./definition.js";
import { fixedWindowReference } from "./fixedWindow.js";
import { leakyBucketReference } from "./leakyBucket.js";
import { slidingLogReference } from "./slidingLog.js";
import { slidingWindowReference } from "./slidingWindow.js";
import { tokenBucketReference } from "./tokenBucket.js";

export type { Admission, BlockSpecData, Model, ModelCharge, ReferenceAlgorithm } from "./definition.js";

/** Every kind's reference algorithm, in core's registry order: the compiler refuses a kind of {@link Policy} without one. */
export const REFERENCE_ALGORITHMS = {
  fixedWindow: fixedWindowReference,
  slidingWindow: slidingWindowReference,
  slidingLog: slidingLogReference,
  tokenBucket: tokenBucketReference,
  leakyBucket: leakyBucketReference,
  concurrency: concurrencyReference,
} as const satisfies { readonly [K in PolicyKind]: ReferenceAlgorithm<K, object> };

/** The options (plain data) of a policy of kind `K`, as its spec carries them. */
export type SpecOptions<K extends PolicyKind> = Parameters<(typeof REFERENCE_ALGORITHMS)[K]["create"]>[0];

/** A policy as data: the factory's name and its options. */
export type PolicySpec = { [K in PolicyKind]: { kind: K; options: SpecOptions<K> } }[PolicyKind];

/** The reference algorithm of a kind (typed for any kind). */
export function referenceOf(kind: PolicyKind): AnyReferenceAlgorithm {
  return REFERENCE_ALGORITHMS[kind] as unknown as AnyReferenceAlgorithm;
}

/** The naive reference model of one policy (one key's state). */
export function modelOf(policy: Policy): Model {
  return referenceOf(policy.kind).model(policy);
}

/** Whether any of the policies (or specs) holds a lease for an allowed request (a concurrency cap). */
export function holdsLeases(policies: readonly { readonly kind: PolicyKind }[]): boolean {
  return policies.some((p) => referenceOf(p.kind).leases);
}

/** Every reference algorithm, in the registry's order. */
export const REFERENCE_ALGORITHM_LIST: readonly AnyReferenceAlgorithm[] = Object.values(REFERENCE_ALGORITHMS) as unknown as readonly AnyReferenceAlgorithm[];
