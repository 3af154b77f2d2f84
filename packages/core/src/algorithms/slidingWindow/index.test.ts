import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { slidingWindow, slidingWindowAlgorithm } from "./index.js";

testAlgorithm(slidingWindowAlgorithm);

describe("slidingWindow, request by request", () => {
  it("weighs the previous window by its overlap: 4 used in the first second count as 2 halfway through the next", () => {
    expect(decideSequence(slidingWindowAlgorithm, slidingWindow({ limit: 4, window: "1s" }), [[0, 2], [500, 2], [900, 1], [1500, 1], [1500, 1], [1750, 1]])).toEqual([
      "allow r=2 reset=2000 refill=1500",
      "allow r=0 reset=2000 refill=1250",
      "deny r=0 retry=350 reset=2000",
      "allow r=1 reset=3000 refill=1750",
      "allow r=0 reset=3000 refill=1750",
      "allow r=0 reset=3000 refill=2000",
    ]);
  });
});
