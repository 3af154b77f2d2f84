import { type Policy, type PolicyKind, concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { POLICY_KINDS, decideState } from "@sluice/core/store";
import { describe, expect, it } from "vitest";
import { LUA_ALGORITHMS, luaOf } from "./index.js";

// One policy of every kind; the type makes this list grow with core's kinds.
const SAMPLES: { readonly [K in PolicyKind]: Extract<Policy, { kind: K }> } = {
  fixedWindow: fixedWindow({ limit: 4, window: "1m" }),
  slidingWindow: slidingWindow({ limit: 5, window: "1m" }),
  slidingLog: slidingLog({ limit: 6, window: "1m" }),
  tokenBucket: tokenBucket({ capacity: 7, refillRate: 1 }),
  leakyBucket: leakyBucket({ rate: 1, period: "1s", burst: 3, queue: 2 }),
  concurrency: concurrency({ limit: 2 }),
};
const NOW_US = 1_700_000_000_000_000;

describe("the Lua registry (LUA_ALGORITHMS)", () => {
  it("has the Lua of every kind of core's registry, and nothing else", () => {
    expect(Object.keys(LUA_ALGORITHMS).sort()).toEqual([...POLICY_KINDS].sort());
  });

  it.each(POLICY_KINDS.map((kind) => [kind] as const))("%s: marks and leases agree with core's decision and with its Lua part", (kind) => {
    const policy = SAMPLES[kind];
    const lua = luaOf(policy);
    // core hands out a mark for an allowed charge exactly for the kinds whose reply carries one
    const charged = decideState([policy], undefined, NOW_US, 1, 7);
    expect(charged.policies[0]!.allowed).toBe(true);
    expect((charged.marks?.[0] ?? 0) !== 0).toBe(lua.marks);
    // a kind with leases stores the lease id under which the request holds its slot
    expect(JSON.stringify(charged.state).includes(",7]")).toBe(lua.leases);
    const part = lua.part(policy, "x1", 1);
    expect(part.mark !== undefined).toBe(lua.marks);
    expect(part.release !== "").toBe(lua.leases);
  });

  it.each(POLICY_KINDS.map((kind) => [kind] as const))("%s: maxCost is the largest cost core ever admits", (kind) => {
    const policy = SAMPLES[kind];
    const max = luaOf(policy).maxCost(policy);
    if (max === Infinity) {
      // one slot per request, whatever its cost
      expect(decideState([policy], undefined, NOW_US, Number.MAX_SAFE_INTEGER).policies[0]).toMatchObject({ allowed: true });
      return;
    }
    expect(decideState([policy], undefined, NOW_US, max).policies[0]).toMatchObject({ allowed: true });
    expect(decideState([policy], undefined, NOW_US, max + 1).policies[0]).toMatchObject({ allowed: false, retryAfterMs: Infinity });
  });
});
