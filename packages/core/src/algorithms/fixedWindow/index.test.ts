import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { fixedWindow, fixedWindowAlgorithm } from "./index.js";

testAlgorithm(fixedWindowAlgorithm);

describe("fixedWindow, request by request", () => {
  it("counts per window floor(now / window): the 4th request of a second waits for the next; a cost that does not fit is denied with what is left", () => {
    expect(decideSequence(fixedWindowAlgorithm, fixedWindow({ limit: 3, window: "1s" }), [[0, 1], [100, 1], [200, 1], [300, 1], [999, 1], [1000, 2], [1500, 2]])).toEqual([
      "allow r=2 reset=1000 refill=1000",
      "allow r=1 reset=1000 refill=1000",
      "allow r=0 reset=1000 refill=1000",
      "deny r=0 retry=700 reset=1000",
      "deny r=0 retry=1 reset=1000",
      "allow r=1 reset=2000 refill=2000",
      "deny r=1 retry=500 reset=2000",
    ]);
  });
});
