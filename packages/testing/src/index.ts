/**
 * Private test kit of Sluice: the store conformance suite (whole, or one module at a time), the
 * naive reference models, the recorded vectors, and (for the Redis stores) a private redis-server
 * and an Upstash-REST bridge.
 *
 * @module
 */
export { SECTIONS, testStore, type SuiteContext, type SuiteModule, type TestStoreOptions } from "./conformance.js";
export { storeSuite } from "./conformance/context.js";
// the modules of the suite, each runnable alone with storeSuite(options, module)
export { testCachedDenials } from "./conformance/cached-denials.js";
export { testConcurrency } from "./conformance/concurrency.js";
export { testFixedWindow, testLeakyBucket, testSlidingLog, testSlidingWindow, testTokenBucket } from "./conformance/decisions.js";
export { testEffectiveWindow, testEffectiveWindowEdges } from "./conformance/effective-window.js";
export { testHostileSequences } from "./conformance/hostile-sequences.js";
export { testInvariants, testOverrideInvariants } from "./conformance/invariants.js";
export { testIsolation } from "./conformance/isolation.js";
export { testKeySchemaIn } from "./conformance/key-schema.js";
export { testManualBlocks } from "./conformance/manual-blocks.js";
export { testMixedSequences } from "./conformance/mixed-sequences.js";
export { testNames } from "./conformance/names.js";
export { testOverrideCalls } from "./conformance/override-calls.js";
export { testOverrideVisibility } from "./conformance/override-visibility.js";
export { testOverrides } from "./conformance/overrides.js";
export { testScaleOverrides } from "./conformance/overrides-scale.js";
export { testPeekAndReset } from "./conformance/peek-and-reset.js";
export { testPenaltyBox } from "./conformance/penalty-box.js";
export { replayCase, testRecordedVectors } from "./conformance/recorded-vectors.js";
export { testReferenceModel, testReferenceModelWithOverrides } from "./conformance/reference-models.js";
export { testBucketRefunds, testRefunds } from "./conformance/refunds.js";
export { testReservationsAcrossInstances, testReserveCall, testReservedDecisions } from "./conformance/reservations.js";
export { testReservationInvariants } from "./conformance/reservations-fuzz.js";
export { testSeveralLimits } from "./conformance/several-limits.js";
export { testTightRetry } from "./conformance/tight-retry.js";
export { T0, uniquePrefix } from "./suite-shared.js";
export { ReferenceLimiter, plain, type PlainDecision } from "./reference.js";
export { policyFromSpec, policySpecArbitrary, type PolicySpec, type VectorCase, type VectorStep } from "./vectors.js";
// The redis-server helper and the Upstash bridge need Node: import them from their subpaths,
// "@sluice/testing/redis-server" and "@sluice/testing/upstash-bridge", so that this entry also
// loads inside workerd.
