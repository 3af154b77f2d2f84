/** The leaky bucket's column: `rate` per `period`, a `burst` and a `queue`. @module */
import { leakyBucket } from "@sluice/core";
import type { PlaygroundAlgorithm } from "./definition.js";

export const leakyBucketColumn: PlaygroundAlgorithm = {
  title: "Leaky bucket",
  fields: [
    { name: "rate", label: "rate", kind: "count", default: "100" },
    { name: "period", label: "period", kind: "duration", default: "1m" },
    { name: "burst", label: "burst", kind: "count", default: "10" },
    { name: "queue", label: "queue", kind: "count0", default: "10" },
  ],
  // a queue as deep as the burst: the leaky bucket shapes (delays) what the token bucket would deny
  plan: ({ perMinute, burst }) => ({ rate: String(perMinute), period: "1m", burst: String(burst), queue: String(burst) }),
  policy: (read) =>
    leakyBucket({ rate: read.count("rate"), period: read.duration("period"), burst: read.count("burst"), queue: read.count("queue") }),
};
