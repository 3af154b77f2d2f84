import { describe, expect, it } from "vitest";
import { type CpuProfile, selfTimes, topLines } from "./lib/cpu-profile.js";

const frame = (functionName: string, url = "", lineNumber = 0) => ({ functionName, url, lineNumber });

/** Nodes 1–4 and samples that land on them, each sample weighing its time delta (µs). */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame("(idle)") },
    { id: 2, callFrame: frame("consume", "file:///app/dist/store.js", 41) },
    { id: 3, callFrame: frame("", "file:///app/dist/store.js", 9) },
    { id: 4, callFrame: frame("exec") },
  ],
  samples: [1, 2, 2, 3, 4, 1, 4],
  timeDeltas: [500, 10, 30, 5, 20, 700, 15],
};

describe("selfTimes", () => {
  it("sums each function's sample times, names it by its script's last two parts and 1-based line, and leaves idle time out", () => {
    expect([...selfTimes(profile)]).toEqual([
      ["consume dist/store.js:42", 40],
      ["(anonymous) dist/store.js:10", 5],
      ["exec", 35],
    ]);
  });
});

describe("topLines", () => {
  it("lists the functions by self time, per operation and as a share of all busy time", () => {
    expect(topLines(selfTimes(profile), 10, 2)).toEqual(["    4.00   50.0%  consume dist/store.js:42", "    3.50   43.8%  exec"]);
  });
});
