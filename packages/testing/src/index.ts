/**
 * Private test kit of Sluice: the store conformance suite, the naive reference models, the
 * recorded vectors, and (for the Redis stores) a private redis-server and an Upstash-REST bridge.
 *
 * @module
 */
export { testStore, replayCase, type TestStoreOptions } from "./conformance.js";
export { T0, uniquePrefix } from "./suite-shared.js";
export { ReferenceLimiter, plain, type PlainDecision } from "./reference.js";
export { policyFromSpec, policySpecArbitrary, type PolicySpec, type VectorCase, type VectorStep } from "./vectors.js";
// The redis-server helper and the Upstash bridge need Node: import them from their subpaths,
// "@sluice/testing/redis-server" and "@sluice/testing/upstash-bridge", so that this entry also
// loads inside workerd.
