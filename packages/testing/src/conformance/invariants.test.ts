/**
 * The admission bounds of the invariant suite can fail: for each algorithm, admissions exactly at
 * its bound pass and one unit more is reported (a store that over-admits by one is caught), units
 * refunded for an admission do not count, and what leaves the bound's span (a window that rolled,
 * a log entry older than the window, a refill, a released or expired lease) frees room.
 */
import { type Decision, type Policy, concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { violatedBound } from "./invariants.js";

type Admission = Parameters<typeof violatedBound>[1][number];

/** An admission of `cost` units at `atMs` (key "k"); `lease`: the decision held one. */
function admitted(atMs: number, cost: number, more: { refunded?: number; released?: boolean; lease?: string } = {}): Admission {
  const decision = (more.lease === undefined ? {} : { lease: more.lease }) as Decision;
  return { key: "k", atMs, cost, refunded: more.refunded ?? 0, decision, released: more.released ?? false };
}

/** The bound's verdict after the last admission (at its time). */
function verdict(policy: Policy, admissions: Admission[]): string | undefined {
  return violatedBound([policy], admissions, "k", admissions[admissions.length - 1]!.atMs);
}

describe("violatedBound", () => {
  it("fixedWindow: at most limit units per window", () => {
    const p = fixedWindow({ limit: 3, window: 1000, name: "fw" });
    expect(verdict(p, [admitted(0, 2), admitted(999, 1)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 2), admitted(999, 1), admitted(999, 1)])).toBe("fixedWindow fw: 4 units admitted in window 0 (limit 3)");
    expect(verdict(p, [admitted(0, 2, { refunded: 1 }), admitted(999, 1), admitted(999, 1)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 3), admitted(1000, 3)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 3), admitted(1000, 3), admitted(1999, 1)])).toBe("fixedWindow fw: 4 units admitted in window 1 (limit 3)");
  });

  it("slidingWindow: at most limit units in its current window", () => {
    const p = slidingWindow({ limit: 3, window: 1000, name: "sw" });
    expect(verdict(p, [admitted(500, 3), admitted(1000, 3)])).toBeUndefined();
    expect(verdict(p, [admitted(500, 3), admitted(1000, 3), admitted(1500, 1)])).toBe("slidingWindow sw: 4 units admitted in window 1 (limit 3)");
  });

  it("slidingLog: at most limit units in every span (now - window, now]", () => {
    const p = slidingLog({ limit: 3, window: 1000, name: "sl" });
    expect(verdict(p, [admitted(0, 2), admitted(999, 1)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 2), admitted(999, 1), admitted(1000, 2)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 2), admitted(999, 1), admitted(1000, 2), admitted(1000, 1)])).toBe(
      "slidingLog sl: 4 units admitted in (0, 1000] (limit 3)",
    );
    expect(verdict(p, [admitted(0, 2), admitted(999, 1, { refunded: 1 }), admitted(1000, 2), admitted(1000, 1)])).toBeUndefined();
  });

  it("tokenBucket: at most capacity units at once, then one per emission interval", () => {
    const p = tokenBucket({ capacity: 3, refillRate: 1, interval: "1s", name: "tb" });
    expect(verdict(p, [admitted(0, 3)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 3), admitted(0, 1)])).toBe("tokenBucket tb: 4 units admitted in [0, 0] (at most 3 + 0 µs / 1000000 µs)");
    expect(verdict(p, [admitted(0, 3), admitted(1000, 1)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 3), admitted(1000, 1), admitted(1000, 1)])).toBe(
      "tokenBucket tb: 5 units admitted in [0, 1000] (at most 3 + 1000000 µs / 1000000 µs)",
    );
    expect(verdict(p, [admitted(0, 3, { refunded: 1 }), admitted(1000, 1), admitted(1000, 1)])).toBeUndefined();
  });

  it("leakyBucket: at most burst + queue units at once, then one per emission interval", () => {
    const p = leakyBucket({ rate: 2, period: "1s", burst: 2, queue: 1, name: "lb" });
    expect(verdict(p, [admitted(0, 3)])).toBeUndefined();
    expect(verdict(p, [admitted(0, 3), admitted(0, 1)])).toBe("leakyBucket lb: 4 units admitted in [0, 0] (at most 3 + 0 µs / 500000 µs)");
    expect(verdict(p, [admitted(0, 3), admitted(499, 1)])).toBe("leakyBucket lb: 4 units admitted in [0, 499] (at most 3 + 499000 µs / 500000 µs)");
    expect(verdict(p, [admitted(0, 3), admitted(500, 1)])).toBeUndefined();
  });

  it("concurrency: at most limit leases held at once (released or expired ones hold none)", () => {
    const p = concurrency({ limit: 2, lease: 1000, name: "cc" });
    const held = (atMs: number, more: { released?: boolean } = {}) => admitted(atMs, 1, { ...more, lease: `l${atMs}` });
    expect(verdict(p, [held(0), held(100)])).toBeUndefined();
    expect(verdict(p, [held(0), held(100), held(500)])).toBe("concurrency cc: 3 leases held at 500 (limit 2)");
    expect(verdict(p, [held(0, { released: true }), held(100), held(500)])).toBeUndefined();
    expect(verdict(p, [held(0), held(100), held(1000)])).toBeUndefined(); // the first expired at 1000
    expect(verdict(p, [held(0), held(100), admitted(500, 1)])).toBeUndefined(); // a decision without a lease holds no slot
  });

  it("checks every policy of the list, and only the key's admissions", () => {
    const policies = [fixedWindow({ limit: 5, window: 1000, name: "wide" }), slidingLog({ limit: 2, window: 1000, name: "tight" })];
    const admissions = [admitted(0, 1), { ...admitted(0, 4), key: "other" }, admitted(10, 1)];
    expect(violatedBound(policies, admissions, "k", 10)).toBeUndefined();
    expect(violatedBound(policies, [...admissions, admitted(20, 1)], "k", 20)).toBe("slidingLog tight: 3 units admitted in (-980, 20] (limit 2)");
  });
});
