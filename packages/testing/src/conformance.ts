/**
 * The conformance suite every store must pass: `testStore({ name, makeStore })` registers, in one
 * `describe` per store, every module of `./conformance/` under its section's title — each
 * algorithm's exact decisions on window edges (through the store's test clock), several limits,
 * peek and reset, isolation, tight `retryAfterMs`, the effective window, refunds, the penalty box,
 * concurrency caps, the reference models, the invariants, hostile sequences, overrides and manual
 * blocks, reservations, names as data, cached denials, the key schema and the recorded vectors.
 *
 * A module is a function of the {@link SuiteContext} (the store, its clock, a limiter factory,
 * fresh prefixes, the property runs) that registers its tests; `storeSuite(options, module)` runs
 * one alone. A new feature is a new module and a line in {@link SECTIONS}.
 *
 * @example
 * ```ts
 * import { MemoryStore } from "@sluice/core";
 * import { testStore } from "@sluice/testing";
 *
 * testStore({ name: "memory", makeStore: ({ clock }) => new MemoryStore({ clock }) });
 * ```
 *
 * @module
 */
import { describe } from "vitest";
import { testCachedDenials } from "./conformance/cached-denials.js";
import { testConcurrency } from "./conformance/concurrency.js";
import { type SuiteModule, type TestStoreOptions, storeSuite } from "./conformance/context.js";
import { testFixedWindow, testLeakyBucket, testSlidingLog, testSlidingWindow, testTokenBucket } from "./conformance/decisions.js";
import { testEffectiveWindow, testEffectiveWindowEdges } from "./conformance/effective-window.js";
import { testHostileSequences } from "./conformance/hostile-sequences.js";
import { testInvariants, testOverrideInvariants } from "./conformance/invariants.js";
import { testIsolation } from "./conformance/isolation.js";
import { testKeySchemaIn } from "./conformance/key-schema.js";
import { testManualBlocks } from "./conformance/manual-blocks.js";
import { testMixedSequences } from "./conformance/mixed-sequences.js";
import { testNames } from "./conformance/names.js";
import { testOverrideCalls } from "./conformance/override-calls.js";
import { testOverrideVisibility } from "./conformance/override-visibility.js";
import { testOverrides } from "./conformance/overrides.js";
import { testScaleOverrides } from "./conformance/overrides-scale.js";
import { testPeekAndReset } from "./conformance/peek-and-reset.js";
import { testPenaltyBox } from "./conformance/penalty-box.js";
import { testRecordedVectors } from "./conformance/recorded-vectors.js";
import { testReferenceModel, testReferenceModelWithOverrides } from "./conformance/reference-models.js";
import { testBucketRefunds, testRefunds } from "./conformance/refunds.js";
import { testReservationsAcrossInstances, testReserveCall, testReservedDecisions } from "./conformance/reservations.js";
import { testReservationInvariants } from "./conformance/reservations-fuzz.js";
import { testSeveralLimits } from "./conformance/several-limits.js";
import { testTightRetry } from "./conformance/tight-retry.js";

export type { SuiteContext, SuiteModule, TestStoreOptions } from "./conformance/context.js";

/** The suite's sections, in the order they run: each a `describe` title and the modules it groups. */
export const SECTIONS: readonly (readonly [title: string, modules: readonly SuiteModule[]])[] = [
  ["fixedWindow", [testFixedWindow]],
  ["slidingWindow", [testSlidingWindow]],
  ["slidingLog", [testSlidingLog]],
  ["tokenBucket", [testTokenBucket]],
  ["leakyBucket", [testLeakyBucket]],
  ["several limits", [testSeveralLimits]],
  ["peek and reset", [testPeekAndReset]],
  ["isolation", [testIsolation]],
  ["tight retryAfterMs", [testTightRetry]],
  ["effective window: the IETF t", [testEffectiveWindow, testEffectiveWindowEdges]],
  ["refund", [testRefunds, testBucketRefunds]],
  ["penalty box (block)", [testPenaltyBox]],
  ["concurrency", [testConcurrency]],
  ["reference models", [testReferenceModel, testReferenceModelWithOverrides]],
  // what a user relies on, tested directly rather than through the reference models
  ["invariants", [testInvariants]],
  ["hostile sequences", [testHostileSequences, testMixedSequences]],
  ["overrides and manual blocks", [testScaleOverrides, testOverrides, testOverrideCalls, testManualBlocks, testOverrideVisibility, testOverrideInvariants]],
  // the store call, what a limiter with reserve promises, and the multi-instance invariant
  ["reservations", [testReserveCall, testReservedDecisions, testReservationsAcrossInstances, testReservationInvariants]],
  // names that Object.prototype answers for, as policy, quota key, key, prefix and tier: ordinary data
  ["names as data", [testNames]],
  // the deny cache's answers, which no store call makes: every field of the store's own denial, moved on
  ["decisions made without the store", [testCachedDenials]],
  // prefix and tier collisions, escapes, lone surrogates, long keys, on this store
  ["key schema", [testKeySchemaIn]],
  ["recorded vectors", [testRecordedVectors]],
];

/** Registers the conformance suite for one store: every section of {@link SECTIONS}, in order. */
export function testStore(options: TestStoreOptions): void {
  storeSuite(options, (suite) => {
    for (const [title, modules] of SECTIONS) {
      describe(title, () => {
        for (const register of modules) register(suite);
      });
    }
  });
}
