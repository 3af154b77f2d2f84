/** The token bucket's column: `capacity` tokens, `refillRate` per `interval`. @module */
import { tokenBucket } from "@sluice/core";
import type { PlaygroundAlgorithm } from "./definition.js";

export const tokenBucketColumn: PlaygroundAlgorithm = {
  title: "Token bucket",
  fields: [
    { name: "capacity", label: "capacity", kind: "count", default: "100" },
    { name: "refillRate", label: "refillRate", kind: "count", default: "100" },
    { name: "interval", label: "interval", kind: "duration", default: "1m" },
  ],
  // the plan's burst at once, refilled at its rate per minute
  plan: ({ perMinute, burst }) => ({ capacity: String(burst), refillRate: String(perMinute), interval: "1m" }),
  policy: (read) => tokenBucket({ capacity: read.count("capacity"), refillRate: read.count("refillRate"), interval: read.duration("interval") }),
};
