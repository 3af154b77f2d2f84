/**
 * `storeResultProblem` and `storeClockProblem`: what a store that crossed a wire may answer. Every
 * answer the algorithms give passes (the JSON-state store of `@sluice/testing` checks each one of
 * the conformance suite's); these pin the ranges and their messages.
 */
import { describe, expect, it } from "vitest";
import { concurrency, fixedWindow, leakyBucket, tokenBucket } from "./index.js";
import { MAX_AHEAD_US, MAX_CLOCK_SKEW_MS, controlState, decideState, peekState, storeClockProblem, storeResultProblem } from "./store.js";
import type { PolicyResult, StoreResult } from "./types.js";

const NOW = 1_767_225_600_000; // a multiple of a minute
const fw = fixedWindow({ limit: 5, window: "1m", name: "fw" });
const ok: PolicyResult = { policy: "fw", allowed: true, limit: 5, remaining: 4, resetAt: NOW + 60_000, retryAfterMs: 0, delayMs: 0, refillAt: NOW + 60_000 };
const denied: PolicyResult = { ...ok, allowed: false, remaining: 0, retryAfterMs: 60_000 };
const problem = (policies: PolicyResult[], cost = 1, extra: Partial<StoreResult> = {}) =>
  storeResultProblem([fw], { now: NOW, policies, ...extra }, { nowMs: NOW, cost });

describe("storeResultProblem", () => {
  it("passes what decideState and peekState answer, under overrides and blocks too", () => {
    const policies = [fw, tokenBucket({ capacity: 3, refillRate: 1, name: "tb" }), leakyBucket({ rate: 1, period: "1s", burst: 1, queue: 2, name: "lb" }), concurrency({ limit: 2, name: "cc" })];
    const nowUs = NOW * 1000;
    let state = controlState(policies, undefined, nowUs, { op: "setOverride", override: "s,2", ttlMs: 0 }).state;
    for (let i = 0; i < 8; i++) {
      const d = decideState(policies, state, nowUs, 1, i + 1);
      if (d.state !== undefined) state = d.state;
      expect(storeResultProblem(policies, { now: NOW, policies: d.policies, marks: d.marks, override: d.override }, { nowMs: NOW, cost: 1 })).toBeUndefined();
    }
    const tooMuch = decideState(policies, state, nowUs, 100);
    expect(storeResultProblem(policies, { now: NOW, policies: tooMuch.policies, override: tooMuch.override }, { nowMs: NOW, cost: 100 })).toBeUndefined();
    state = controlState(policies, state, nowUs, { op: "block", durationMs: 5000 }).state;
    const blocked = peekState(policies, state, nowUs);
    expect(blocked.policies.every((r) => r.blocked)).toBe(true);
    expect(storeResultProblem(policies, { now: NOW, policies: blocked.policies, override: blocked.override }, { nowMs: NOW, cost: 1 })).toBeUndefined();
  });

  it("names the first value out of range, with its path", () => {
    expect(problem([ok])).toBeUndefined();
    expect(problem([{ ...ok, remaining: 6 }])).toBe("policies[0].remaining is 6, outside [0, 5]");
    expect(problem([{ ...ok, remaining: 1.5 }])).toBe("policies[0].remaining is 1.5, outside [0, 5]");
    expect(problem([{ ...ok, limit: 6 }])).toBe("policies[0].limit is 6, not the policy's quota 5");
    expect(problem([{ ...ok, policy: "other" }])).toBe('policies[0].policy is "other", not "fw"');
    expect(problem([{ ...ok, resetAt: NOW - 1 }])).toBe(`policies[0].resetAt is ${NOW - 1}, outside [${NOW}, ${NOW + Math.ceil(MAX_AHEAD_US / 1000)}]`);
    expect(problem([{ ...ok, delayMs: -1 }])).toMatch(/^policies\[0\]\.delayMs is -1, outside \[0, /);
    expect(problem([{ ...denied, delayMs: 5 }])).toBe("policies[0].delayMs is 5, outside [0, 0]");
    expect(problem([ok, ok])).toBe("policies must hold 1 results; got an array");
  });

  it("an allowed policy waits 0; a denial waits at least 1 ms, and no less than its refill", () => {
    expect(problem([{ ...ok, retryAfterMs: 1 }])).toBe("policies[0].retryAfterMs is 1, outside [0, 0]");
    expect(problem([denied])).toBeUndefined();
    expect(problem([{ ...denied, retryAfterMs: 0 }])).toMatch(/^policies\[0\]\.retryAfterMs is 0, outside \[1, /);
    expect(problem([{ ...denied, retryAfterMs: 1000 }])).toBe(`policies[0].refillAt is ${NOW + 60_000}, after the retry at ${NOW + 1000}`);
  });

  it("never (Infinity) exactly for a cost the policy can never admit, unless an unlimited override lets anything through", () => {
    expect(problem([{ ...denied, retryAfterMs: Infinity }])).toMatch(/^policies\[0\]\.retryAfterMs is Infinity, outside \[1, /);
    expect(problem([{ ...denied, retryAfterMs: Infinity, remaining: 5 }], 6)).toBeUndefined();
    expect(problem([{ ...denied, remaining: 5 }], 6)).toBe("policies[0].retryAfterMs is 60000 for a cost that can never pass (Infinity)");
    expect(problem([ok], 6)).toBe("policies[0].allowed is true for a cost the policy can never admit");
    const unlimited = { policy: "fw", allowed: true, limit: 5, remaining: 5, resetAt: NOW, retryAfterMs: 0, delayMs: 0, refillAt: NOW };
    expect(problem([unlimited], 6, { override: { unlimited: true } })).toBeUndefined();
  });

  it("under an override, each limit is the effective quota", () => {
    expect(problem([{ ...ok, limit: 10, remaining: 9 }], 1, { override: { scale: 2 } })).toBeUndefined();
    expect(problem([ok], 1, { override: { scale: 2 } })).toBe("policies[0].limit is 5, not the policy's quota 10");
  });

  it("a block comes with a denial, and ends after now", () => {
    const blocked = { ...denied, blocked: true as const, blockedUntil: NOW + 1000 };
    expect(problem([blocked])).toBeUndefined();
    expect(problem([{ ...blocked, blockedUntil: NOW }])).toMatch(/^policies\[0\]\.blockedUntil is \d+, outside \[/);
    expect(problem([{ ...ok, blocked: true, blockedUntil: NOW + 1000 }])).toBe("policies[0].blocked is true on an allowed policy");
    expect(problem([{ ...denied, blockedUntil: NOW + 1000 }])).toBe("policies[0].blocked is undefined, not true or absent");
  });

  it("marks: one per policy, µs, from 0 to now + MAX_AHEAD_US", () => {
    expect(problem([ok], 1, { marks: [0] })).toBeUndefined();
    expect(problem([ok], 1, { marks: [NOW * 1000 + MAX_AHEAD_US] })).toBeUndefined();
    expect(problem([ok], 1, { marks: [-1] })).toMatch(/^marks\[0\] is -1, outside \[0, /);
    expect(problem([ok], 1, { marks: [1, 2] })).toBe("marks must hold 1 numbers; got an array");
  });
});

describe("storeClockProblem", () => {
  it("a time sent must come back exactly", () => {
    expect(storeClockProblem(NOW, NOW)).toBeUndefined();
    expect(storeClockProblem(NOW + 1, NOW)).toBe(`now is ${NOW + 1}, but the store was sent the time ${NOW}`);
  });

  it("the store's own clock: within a day of this process's", () => {
    const local = Date.now();
    expect(MAX_CLOCK_SKEW_MS).toBe(86_400_000);
    expect(storeClockProblem(local - MAX_CLOCK_SKEW_MS + 1000, undefined)).toBeUndefined();
    expect(storeClockProblem(local + MAX_CLOCK_SKEW_MS + 1000, undefined)).toMatch(/more than 24 h from this process's clock/);
    expect(storeClockProblem(0, undefined)).toMatch(/^now is 0, more than 24 h from this process's clock/);
    expect(storeClockProblem(-1, undefined)).toBe("now is -1, not an epoch time in ms");
    expect(storeClockProblem("1", undefined)).toBe('now is "1", not an epoch time in ms');
  });
});
