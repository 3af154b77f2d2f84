import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { tokenBucket, tokenBucketAlgorithm } from "./index.js";

testAlgorithm(tokenBucketAlgorithm);

describe("tokenBucket, request by request", () => {
  it("starts full, refills one token per interval; a full bucket pays a cost of its capacity at once", () => {
    expect(decideSequence(tokenBucketAlgorithm, tokenBucket({ capacity: 2, refillRate: 1, interval: "1s" }), [[0, 1], [0, 1], [0, 1], [500, 1], [1000, 1], [1000, 1], [3000, 2]])).toEqual([
      "allow r=1 reset=1000 refill=1000",
      "allow r=0 reset=2000 refill=1000",
      "deny r=0 retry=1000 reset=2000",
      "deny r=0 retry=500 reset=2000",
      "allow r=0 reset=3000 refill=2000",
      "deny r=0 retry=1000 reset=3000",
      "allow r=0 reset=5000 refill=4000",
    ]);
  });
});
