import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { slidingLog, slidingLogAlgorithm } from "./index.js";

testAlgorithm(slidingLogAlgorithm);

describe("slidingLog, request by request", () => {
  it("each entry leaves exactly one window after it: a denial waits for the oldest", () => {
    expect(decideSequence(slidingLogAlgorithm, slidingLog({ limit: 2, window: "1s" }), [[0, 1], [400, 1], [800, 1], [1000, 1], [1001, 1], [1400, 1]])).toEqual([
      "allow r=1 reset=1000 refill=1000",
      "allow r=0 reset=1400 refill=1000",
      "deny r=0 retry=200 reset=1400",
      "allow r=0 reset=2000 refill=1400",
      "deny r=0 retry=399 reset=2000",
      "allow r=0 reset=2400 refill=2000",
    ]);
  });
});
