import { POLICY_KINDS } from "@sluice/core/store";
import { describe, expect, it } from "vitest";
import { PLAYGROUND_ALGORITHMS } from "../src/algorithms/index.js";
import { ALGORITHMS, FIELDS, policiesFor, presetSettings } from "../src/simulation.js";

describe("the playground's table of algorithms", () => {
  it("has an entry for every policy kind of core, and plots the five rate algorithms in core's order (not the concurrency cap)", () => {
    expect(Object.keys(PLAYGROUND_ALGORITHMS).sort()).toEqual([...POLICY_KINDS].sort());
    expect(ALGORITHMS).toEqual(["fixedWindow", "slidingWindow", "slidingLog", "tokenBucket", "leakyBucket"]);
    expect(PLAYGROUND_ALGORITHMS.concurrency).toBeNull();
  });

  it("gives each plotted algorithm its settings, under its own name, and builds its policy from them", () => {
    const settings = presetSettings("window-edge");
    for (const algorithm of ALGORITHMS) {
      const fields = FIELDS.filter((f) => f.group === algorithm);
      expect(fields.map((f) => f.key)).toEqual(PLAYGROUND_ALGORITHMS[algorithm].fields.map((f) => `${algorithm}.${f.name}`));
      expect(fields.every((f) => settings[f.key] !== undefined)).toBe(true);
      expect(policiesFor(algorithm, settings).map((p) => p.kind)).toEqual([algorithm]);
    }
  });
});
