import { decideSequence, testAlgorithm } from "@sluice/testing/algorithm-suite";
import { describe, expect, it } from "vitest";
import { leakyBucket, leakyBucketAlgorithm } from "./index.js";

testAlgorithm(leakyBucketAlgorithm);

describe("leakyBucket, request by request", () => {
  it("serves the burst at once and queues the rest, one drop per interval, each with its delay; past the queue it denies", () => {
    expect(decideSequence(leakyBucketAlgorithm, leakyBucket({ rate: 2, period: "1s", burst: 1, queue: 2 }), [[0, 1], [0, 1], [0, 1], [0, 1], [1000, 1]])).toEqual([
      "allow r=0 reset=500 refill=500",
      "allow r=0 reset=1000 refill=500 delay=500",
      "allow r=0 reset=1500 refill=500 delay=1000",
      "deny r=0 retry=500 reset=1500",
      "allow r=0 reset=2000 refill=1500 delay=500",
    ]);
  });
});
