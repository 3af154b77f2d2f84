/**
 * Names are data, never members: a name a user chose (a policy, an override's quota key, a header)
 * is looked up as an own property or in a Map, never through `Object.prototype`. The same names
 * run through every store in the conformance suite (`@sluice/testing`'s names section); these are
 * the parts of core that no store reaches.
 */
import { describe, expect, it } from "vitest";
import { fixedWindow, tokenBucket } from "./algorithms/index.js";
import { RateLimiter } from "./limiter/index.js";
import { MemoryStore } from "./memory-store.js";
import { type Override, effectivePolicies, overrideFromText } from "./overrides.js";
import { limitedResponse } from "./response.js";
import { type StoredState, controlState, decideState } from "./store.js";
import type { Decision } from "./types.js";

const T0 = 1_700_000_000_000;
const NAMES = ["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"];

describe("an override's body, read back", () => {
  it.each(NAMES)("a quota for %j is an own entry, and a policy that no entry names keeps its own quota", (name) => {
    const override = overrideFromText(`q,${name}=5,zz=7`) as { quotas: Record<string, number> };
    expect(Object.keys(override.quotas)).toEqual([name, "zz"]);
    expect(Object.getOwnPropertyDescriptor(override.quotas, name)).toEqual({ value: 5, enumerable: true, writable: false, configurable: false });
    expect(Object.getPrototypeOf(override.quotas)).toBe(Object.prototype);
    expect(JSON.stringify(override)).toBe(`{"quotas":{"${name}":5,"zz":7}}`);

    const named = fixedWindow({ limit: 2, window: "1m", name });
    const unnamed = tokenBucket({ capacity: 3, refillRate: 1, name: "other" });
    const [a, b] = effectivePolicies([named, unnamed], `q,${name}=5`);
    expect(a).toMatchObject({ name, limit: 5 });
    expect(b).toBe(unnamed);
    // a policy named like a member of Object.prototype, under quotas that do not name it
    const [c, d] = effectivePolicies([unnamed, named], "q,other=6");
    expect(c).toMatchObject({ name: "other", limit: 6 });
    expect(d).toBe(named);
  });
});

describe("an override given to setOverride", () => {
  it("is read by its own fields: a prototype that says unlimited does not make { quotas } unlimited", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 2, window: "1m", name: "m" }) });
    const override = Object.create({ unlimited: true }, { quotas: { value: { m: 3 }, enumerable: true } }) as Override;
    await limiter.setOverride("k", override);
    expect(await limiter.getOverride("k")).toEqual({ quotas: { m: 3 } });
    const seen: Decision[] = [];
    for (let i = 0; i < 4; i++) seen.push(await limiter.limit("k"));
    expect(seen.map((d) => [d.allowed, d.limit, d.remaining])).toEqual([
      [true, 3, 2],
      [true, 3, 1],
      [true, 3, 0],
      [false, 3, 0],
    ]);
  });
});

describe("the JSON-state functions", () => {
  const policies = [fixedWindow({ limit: 2, window: "1m", name: "m" })];
  const nowUs = T0 * 1000;
  /** A stored record holding, beside its own field, a field named `__proto__` (as a database may give back). */
  const hostile = (): StoredState => JSON.parse(`{"__proto__":[${nowUs + 60_000_000},1],"|override":"0,s,2"}`) as StoredState;

  it("decideState carries a field named __proto__ over as data, and leaves the state a plain object", () => {
    const d = decideState(policies, hostile(), nowUs, 1);
    expect(Object.getPrototypeOf(d.state)).toBe(Object.prototype);
    expect(Object.keys(d.state as object).sort()).toEqual(["__proto__", "m|fw", "|override"]);
    expect(JSON.parse(JSON.stringify(d.state))).toEqual(JSON.parse(`{"__proto__":[${nowUs + 60_000_000},1],"|override":"0,s,2","m|fw":${JSON.stringify((d.state as Record<string, unknown>)["m|fw"])}}`));
    expect(d.policies[0]).toMatchObject({ allowed: true, limit: 4, remaining: 3 });
  });

  it("controlState carries it over alike", () => {
    const c = controlState(policies, hostile(), nowUs, { op: "block", durationMs: 1000 });
    expect(Object.getPrototypeOf(c.state)).toBe(Object.prototype);
    expect(JSON.stringify(c.state)).toBe(`{"__proto__":[${nowUs + 60_000_000},1],"|override":"0,s,2","|block":[${nowUs + 1_000_000}]}`);
  });
});

describe("limitedResponse", () => {
  it("writes a header named __proto__ like any other", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m", name: "m" }) });
    await limiter.limit("k");
    const response = limitedResponse(await limiter.limit("k"), [
      ["__proto__", "kept"],
      ["Retry-After", "60"],
    ]);
    expect([...response.headers]).toEqual([
      ["__proto__", "kept"],
      ["content-type", "application/problem+json"],
      ["retry-after", "60"],
    ]);
    expect(response.headers.get("__proto__")).toBe("kept");
  });
});
