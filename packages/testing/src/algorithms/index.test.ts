/**
 * The test kit's registry covers every kind core knows, in core's order, and what the suites draw
 * from it reaches every kind: the random specs (with and without the policies that hold leases),
 * the agreement runs' policies, and `policyFromSpec` through each kind's factory.
 */
import { POLICY_KINDS } from "@sluice/core/store";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { policyFromSpec, policySpecArbitrary } from "../vectors.js";
import { REFERENCE_ALGORITHMS, REFERENCE_ALGORITHM_LIST, holdsLeases, modelOf } from "./index.js";

/** The kinds of 400 samples of an arbitrary (fixed seed), sorted. */
const kindsDrawn = (arbitrary: fc.Arbitrary<{ kind: string }>) => [...new Set(fc.sample(arbitrary, { numRuns: 400, seed: 42 }).map((x) => x.kind))].sort();

describe("REFERENCE_ALGORITHMS", () => {
  it("has one entry per policy kind of core, in core's order, each under its own kind", () => {
    expect(Object.keys(REFERENCE_ALGORITHMS)).toEqual([...POLICY_KINDS]);
    expect(REFERENCE_ALGORITHM_LIST.map((a) => a.kind)).toEqual([...POLICY_KINDS]);
  });

  it("policySpecArbitrary draws every kind; with { leases: false } every kind but those that hold leases, and a penalty box only where one is taken", () => {
    const leasing = REFERENCE_ALGORITHM_LIST.filter((a) => a.leases).map((a) => a.kind);
    expect(leasing).toEqual(["concurrency"]);
    expect(kindsDrawn(policySpecArbitrary())).toEqual([...POLICY_KINDS].sort());
    expect(kindsDrawn(policySpecArbitrary({ leases: false }))).toEqual(POLICY_KINDS.filter((k) => !leasing.includes(k)).sort());
    const specs = fc.sample(policySpecArbitrary(), { numRuns: 400, seed: 7 });
    expect(specs.some((s) => "block" in s.options)).toBe(true);
    expect(specs.filter((s) => leasing.includes(s.kind)).every((s) => !("block" in s.options))).toBe(true);
    // every spec builds (the factories validate what the arbitraries make)
    for (const spec of specs) expect(policyFromSpec(spec).kind).toBe(spec.kind);
  });

  it("the agreement runs draw every kind whose agreementArbitrary is not null", () => {
    const kinds = REFERENCE_ALGORITHM_LIST.filter((a) => a.agreementArbitrary !== null);
    expect(kinds.map((a) => a.kind)).toEqual(["fixedWindow", "slidingWindow", "slidingLog", "tokenBucket", "leakyBucket"]);
    for (const a of kinds) expect(kindsDrawn(a.agreementArbitrary!("p"))).toEqual([a.kind]);
  });

  it("holdsLeases and modelOf look the kind up", () => {
    expect(holdsLeases([{ kind: "fixedWindow" }, { kind: "tokenBucket" }])).toBe(false);
    expect(holdsLeases([{ kind: "fixedWindow" }, { kind: "concurrency" }])).toBe(true);
    const policy = policyFromSpec({ kind: "slidingLog", options: { limit: 2, window: 1000 } });
    const model = modelOf(policy);
    expect(model.policy).toBe(policy);
    model.commit(0, 2);
    expect(model.check(999, 1).allowed).toBe(false);
    expect(model.check(1000, 1).allowed).toBe(true);
  });
});
