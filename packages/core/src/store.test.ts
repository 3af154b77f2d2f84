import { policyFromSpec, policySpecArbitrary } from "@sluice/testing/vectors";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Policy, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "./algorithms/index.js";
import { SluiceConfigError, SluiceInputError } from "./errors.js";
import { MemoryStore } from "./memory-store.js";
import { type StoredState, allowedFromState, assertNamespace, decideState, encodeKeyPart, peekState, policyField, storageKey, toDecision } from "./store.js";
import type { StoreResult } from "./types.js";

const T0 = 1_767_225_600_000;
const us = (ms: number) => ms * 1000;

/** Freezes `value` and everything in it: a pure function must not change what it is given. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

describe("decideState / peekState", () => {
  const window = fixedWindow({ limit: 3, window: "1m", name: "w" });
  const log = slidingLog({ limit: 3, window: "1m", name: "log" });

  it("decides from no state, and hands back the state to write with its expiry", () => {
    const d = decideState([window, log], undefined, us(T0 + 5), 2);
    expect(d.policies.map((r) => [r.policy, r.allowed, r.remaining])).toEqual([
      ["w", true, 1],
      ["log", true, 1],
    ]);
    const windowEnd = Math.ceil((T0 + 5) / 60_000) * 60_000;
    expect(d.state).toEqual({
      [policyField(window)]: [us(windowEnd), Math.floor((T0 + 5) / 60_000), 2],
      [policyField(log)]: [us(T0 + 5 + 60_000), us(T0 + 5), 2],
    });
    expect(d.expiresAtUs).toBe(us(T0 + 5 + 60_000));
  });

  it("a denial writes nothing; a peek writes nothing", () => {
    const first = decideState([window], undefined, us(T0), 3);
    const denied = decideState([window], first.state, us(T0 + 1), 1);
    expect(denied).toEqual({ policies: [expect.objectContaining({ allowed: false, remaining: 0 })], state: undefined, expiresAtUs: first.expiresAtUs });
    const peek = peekState([window], first.state, us(T0 + 1));
    expect(peek.state).toBeUndefined();
    expect(peek.policies[0]).toMatchObject({ allowed: false, remaining: 0 });
    expect(peekState([window], undefined, us(T0))).toEqual({ policies: [expect.objectContaining({ allowed: true, remaining: 3 })], state: undefined, expiresAtUs: 0 });
  });

  it("is pure: the state given is never changed, and the state handed back survives JSON", () => {
    const policies = [log, tokenBucket({ capacity: 5, refillRate: 1, name: "tb" })];
    let state: StoredState | undefined;
    for (let i = 0; i < 6; i++) {
      const frozen = state === undefined ? undefined : deepFreeze(JSON.parse(JSON.stringify(state)) as StoredState);
      const d = decideState(policies, frozen, us(T0 + i * 7000), 1);
      if (d.state !== undefined) state = d.state;
    }
    expect(state?.[policyField(log)]?.length).toBe(1 + 2 * 3);
  });

  it("carries other limiters' live fields over and drops the expired ones", () => {
    const other = { "other|fw": [us(T0 + 10_000), 1, 1], "gone|tb": [us(T0 - 1)], "junk|fw": "not a list" } as unknown as StoredState;
    const d = decideState([window], other, us(T0), 1);
    expect(Object.keys(d.state ?? {}).sort()).toEqual(["other|fw", policyField(window)].sort());
    expect(d.state?.["other|fw"]).toEqual([us(T0 + 10_000), 1, 1]);
  });

  it.each([
    ["not a list", "x"],
    ["empty", []],
    ["not integers", [us(T0 + 60_000), 1.5, 3]],
    ["too short", [us(T0 + 60_000), 0]],
    ["expired", [us(T0), Math.floor(T0 / 60_000), 3]],
    ["a string number", [us(T0 + 60_000), "1", 3]],
  ])("a malformed field (%s) reads as empty: forgetting, never a cost-exceeds-limit", (_label, value) => {
    const state = { [policyField(window)]: value } as unknown as StoredState;
    expect(decideState([window], state, us(T0), 3).policies[0]).toMatchObject({ allowed: true, remaining: 0 });
  });

  it.each([
    ["odd entries", [us(T0 + 60_000), us(T0)]],
    ["a cost of 0", [us(T0 + 60_000), us(T0), 0]],
    ["a negative cost", [us(T0 + 60_000), us(T0), -3]],
    ["times out of order", [us(T0 + 60_000), us(T0), 1, us(T0 - 5), 1]],
    ["only the expiry", [us(T0 + 60_000)]],
  ])("a malformed sliding log (%s) reads as empty", (_label, value) => {
    const state = { [policyField(log)]: value } as unknown as StoredState;
    expect(decideState([log], state, us(T0 + 1), 3).policies[0]).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("the sliding log's sum is recomputed from its entries", () => {
    // entries of costs 1 + 1: whatever a sum field would say, 1 unit is left
    const state: StoredState = { [policyField(log)]: [us(T0 + 60_000), us(T0 - 1000), 1, us(T0), 1] };
    expect(decideState([log], state, us(T0 + 1), 1).policies[0]).toMatchObject({ allowed: true, remaining: 0 });
  });

  it.each([0, -1, 1.5, Number.NaN, "1"])("refuses cost %j with SluiceInputError", (cost) => {
    expect(() => decideState([window], undefined, us(T0), cost as number)).toThrow(SluiceInputError);
  });

  it("decides exactly like MemoryStore on random sequences", () => {
    const configs: Policy[][] = [
      [fixedWindow({ limit: 4, window: "1s" })],
      [slidingWindow({ limit: 5, window: "2s" })],
      [slidingLog({ limit: 4, window: "1500ms" })],
      [tokenBucket({ capacity: 3, refillRate: 2 })],
      [leakyBucket({ rate: 2, period: "1s", burst: 2, queue: 2 })],
      [
        tokenBucket({ capacity: 4, refillRate: 1, name: "a" }),
        slidingLog({ limit: 6, window: "3s", name: "b" }),
        slidingWindow({ limit: 5, window: "1s", name: "c" }),
        fixedWindow({ limit: 7, window: "2s", name: "d" }),
      ],
    ];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: configs.length - 1 }),
        fc.array(
          fc.record({
            dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 4000 })),
            cost: fc.integer({ min: 1, max: 8 }),
            op: fc.constantFrom("consume", "consume", "consume", "peek", "json"),
          }),
          { maxLength: 60 },
        ),
        (config, steps) => {
          const policies = configs[config]!;
          let now = T0 + 3;
          const memory = new MemoryStore({ clock: () => now }).bind({ prefix: "p", policies });
          let state: StoredState | undefined;
          for (const step of steps) {
            now += step.dt;
            if (step.op === "json") {
              state = state === undefined ? undefined : (JSON.parse(JSON.stringify(state)) as StoredState);
              continue;
            }
            if (step.op === "peek") {
              expect(peekState(policies, state, us(now)).policies).toEqual((memory.peek("k") as StoreResult).policies);
              continue;
            }
            const d = decideState(policies, state, us(now), step.cost);
            expect(d.policies).toEqual((memory.consume("k", step.cost) as StoreResult).policies);
            if (d.state !== undefined) state = d.state;
            if (d.state !== undefined) expect(d.expiresAtUs).toBeGreaterThan(us(now));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("assertNamespace", () => {
  const p = fixedWindow({ limit: 1, window: "1s" });
  it.each([
    ["no namespace", undefined, "[sluice] [X] namespace must be an object { prefix, tier?, policies }; got undefined", "namespace"],
    ["a bad prefix", { prefix: "a b", policies: [p] }, "[sluice] [X] prefix must be 1-128 visible ASCII characters", "prefix"],
    ["a bad tier", { prefix: "a", tier: "", policies: [p] }, "[sluice] [X] tier must be 1-128 visible ASCII characters", "tier"],
    ["no policies", { prefix: "a", policies: [] }, "[sluice] [X] policies must hold at least one policy; got an empty array", "policies"],
    ["policies not a list", { prefix: "a", policies: p }, "[sluice] [X] policies must be a list of policies; got an object", "policies"],
    [
      "13 policies",
      { prefix: "a", policies: Array.from({ length: 13 }, (_, i) => fixedWindow({ limit: 1, window: "1s", name: `p${i}` })) },
      "[sluice] [X] policies must hold at most 12 policies (the same on every store); got 13",
      "policies",
    ],
    ["a hand-made policy", { prefix: "a", policies: [{ ...p, limit: -1 }] }, "[sluice] [X] policies[0] must be a policy from fixedWindow()", "policies[0]"],
    ["two policies with one name", { prefix: "a", policies: [p, p] }, '[sluice] [X] policies[1].name must differ from the other policies\' names (give one a distinct name option); got "1-per-1s" twice', "policies[1].name"],
  ])("refuses %s with SluiceConfigError", (_label, namespace, message, option) => {
    expect(() => assertNamespace(namespace as never, "X")).toThrow(SluiceConfigError);
    expect(() => assertNamespace(namespace as never, "X")).toThrow(message);
    expect(() => assertNamespace(namespace as never, "X")).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("MemoryStore.bind checks the same, in core's messages", () => {
    expect(() => new MemoryStore().bind({ prefix: "a", policies: Array.from({ length: 13 }, (_, i) => fixedWindow({ limit: 1, window: "1s", name: `p${i}` })) })).toThrow(
      "[sluice] policies must hold at most 12 policies",
    );
    expect(() => new MemoryStore().bind({ prefix: "a b", policies: [p] })).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "prefix" }));
  });
});

describe("storageKey / encodeKeyPart", () => {
  it("escapes %, :, { and } and joins prefix, tier and key with ':'", () => {
    expect(storageKey({ prefix: "app" }, "team:alice")).toBe("app::team%3Aalice");
    expect(storageKey({ prefix: "app:team" }, "alice")).toBe("app%3Ateam::alice");
    expect(storageKey({ prefix: "P", tier: "free" }, "bob")).toBe("P:free:bob");
    expect(encodeKeyPart("%:{}")).toBe("%25%3A%7B%7D");
    expect(encodeKeyPart(":a::b:")).toBe("%3Aa%3A%3Ab%3A");
    expect(encodeKeyPart("ip:2001:db8::1")).toBe("ip%3A2001%3Adb8%3A%3A1");
    expect(encodeKeyPart("100%")).toBe("100%25");
    expect(encodeKeyPart("plain-key_42")).toBe("plain-key_42");
  });

  it("is undone by decoding, never yields ':', '{' or '}', and agrees with a one-pass regular expression", () => {
    const decode = (s: string) => s.replace(/%(25|3A|7B|7D)/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    const reference = (s: string) => s.replace(/[%:{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    const part = fc.string({ unit: fc.constantFrom("%", ":", "{", "}", "a", "Z", "3", "A", "é", "😀", "2", "5", "7", "D") });
    fc.assert(
      fc.property(part, (s) => {
        const encoded = encodeKeyPart(s);
        expect(encoded).toBe(reference(s));
        expect(decode(encoded)).toBe(s);
        expect(/[:{}]/.test(encoded)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("is injective over (prefix, tier, key)", () => {
    const part = fc.string({ unit: fc.constantFrom("%", ":", "{", "}", "a", "3", "A"), minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(part, fc.option(part, { nil: undefined }), part, part, fc.option(part, { nil: undefined }), part, (p1, t1, k1, p2, t2, k2) => {
        const same = p1 === p2 && t1 === t2 && k1 === k2;
        expect(storageKey({ prefix: p1, tier: t1 }, k1) === storageKey({ prefix: p2, tier: t2 }, k2)).toBe(same);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("allowedFromState", () => {
  it("gives an allowed request's answer from the state it left, for every algorithm (a queue's delayMs aside)", () => {
    let allowed = 0;
    fc.assert(
      fc.property(
        policySpecArbitrary({ leases: false }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2500 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 25 }),
        (spec, steps) => {
          const policy = policyFromSpec(spec);
          let state: StoredState | undefined;
          let nowUs = us(T0) + 123;
          for (const [advanceMs, cost] of steps) {
            nowUs += advanceMs * 1000 + 7;
            const d = decideState([policy], state, nowUs, cost);
            const r = d.policies[0]!;
            if (r.allowed && d.state !== undefined) {
              allowed++;
              const stored = d.state[policyField(policy)] as number[];
              expect(allowedFromState(policy, stored, nowUs)).toEqual({ ...r, delayMs: 0 });
            }
            if (d.state !== undefined) state = d.state;
          }
        },
      ),
    );
    // not vacuous: fast-check's 100 runs compared many allowed answers
    expect(allowed).toBeGreaterThan(200);
  });

  it("answers undefined for a stored form its algorithm cannot read", () => {
    expect(allowedFromState(fixedWindow({ limit: 3, window: "1m" }), [0, 1], us(T0))).toBeUndefined();
    expect(allowedFromState(tokenBucket({ capacity: 3, refillRate: 1 }), [0, 1, -5], us(T0))).toBeUndefined();
  });
});

describe("penalty box over JSON records", () => {
  it("escalates a denial exactly maxMs after the previous block ended, as the rule says (the box is kept until then)", () => {
    const login = fixedWindow({ limit: 1, window: "1h", name: "login", block: { base: 500, factor: 2, max: 1000 } });
    const first = decideState([login], undefined, us(T0), 1);
    expect(first.policies[0]!.allowed).toBe(true);
    const denied = decideState([login], first.state, us(T0), 1);
    expect(denied.policies[0]).toMatchObject({ allowed: false, blocked: true, blockedUntil: T0 + 500 });
    // the block ended at T0 + 500; a denial at its end + maxMs is a repeat offence: blocked for 1000 ms, not 500
    const repeat = decideState([login], denied.state, us(T0 + 500 + 1000), 1);
    expect(repeat.policies[0]).toMatchObject({ allowed: false, blocked: true, blockedUntil: T0 + 1500 + 1000 });
    // one ms later it is a first offence again
    const later = decideState([login], denied.state, us(T0 + 500 + 1000) + 1000, 1);
    expect(later.policies[0]).toMatchObject({ allowed: false, blocked: true, blockedUntil: T0 + 1501 + 500 });
  });
});

describe("toDecision", () => {
  const r = (policy: string, allowed: boolean, remaining: number, retryAfterMs: number, delayMs = 0) => ({
    policy,
    allowed,
    limit: 10,
    remaining,
    resetAt: T0 + remaining,
    retryAfterMs,
    delayMs,
    refillAt: T0 + remaining,
  });

  it("allowed: the least remaining binds (first on ties); delayMs is the largest", () => {
    const d = toDecision({ now: T0, policies: [r("a", true, 5, 0), r("b", true, 2, 0, 30), r("c", true, 2, 0, 70)] });
    expect(d).toMatchObject({ allowed: true, policy: "b", remaining: 2, resetAt: T0 + 2, retryAfterMs: 0, delayMs: 70, reason: "ok", now: T0 });
  });

  it("denied: the denying policy with the largest retryAfterMs binds (first on ties)", () => {
    const d = toDecision({ now: T0, policies: [r("a", true, 0, 0), r("b", false, 3, 500), r("c", false, 1, 900), r("d", false, 4, 900)] });
    expect(d).toMatchObject({ allowed: false, policy: "c", remaining: 1, retryAfterMs: 900, delayMs: 0, reason: "limit" });
  });

  it("denied with an infinite retry: cost-exceeds-limit; a reason given wins", () => {
    const policies = [r("a", false, 3, 500), r("b", false, 1, Number.POSITIVE_INFINITY)];
    expect(toDecision({ now: T0, policies })).toMatchObject({ policy: "b", reason: "cost-exceeds-limit", retryAfterMs: Infinity });
    expect(toDecision({ now: T0, policies }, "store-error").reason).toBe("store-error");
  });
});
