import { createHash } from "node:crypto";
import { MAX_POLICIES, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { policySpecArbitrary, policyFromSpec } from "@sluice/testing";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { controlScript, decideScript, luaListItems } from "./scripts.js";
import { sha1 } from "./sha1.js";

const nodeSha1 = (text: string) => createHash("sha1").update(text).digest("hex");

describe("sha1", () => {
  it("matches node:crypto on edge lengths and non-ASCII text", () => {
    for (const text of ["", "abc", "a".repeat(55), "a".repeat(56), "a".repeat(64), "caf\u00e9 \u2603 \u{1f600}".repeat(50)]) {
      expect(sha1(text)).toBe(nodeSha1(text));
    }
    fc.assert(fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => sha1(text) === nodeSha1(text)));
  });
});

describe("decideScript", () => {
  const tier = [
    tokenBucket({ capacity: 10, refillRate: 1, name: "burst" }),
    slidingWindow({ limit: 30, window: "1m", name: "per-minute" }),
    fixedWindow({ limit: 1000, window: "1d", name: "per-day" }),
    slidingLog({ limit: 5, window: "5m", name: "login" }),
    leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3, name: "shaper" }),
  ];

  it("names every generated script by the SHA-1 of its text", () => {
    const { script, sha } = decideScript(tier);
    expect(sha).toBe(nodeSha1(script));
    fc.assert(
      fc.property(fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 4 }), (specs) => {
        const generated = decideScript(specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p~'${i}` } } as never)));
        return generated.sha === nodeSha1(generated.script);
      }),
    );
  });

  it("runs on stock Redis: no script flags, no globals, constants written out in full", () => {
    const { script } = decideScript(tier);
    expect(script.startsWith("#!")).toBe(false);
    // every assignment at column 0 is a local declaration (Redis forbids globals)
    expect(script.split("\n").filter((line) => /^[A-Za-z_][\w.]*\s*=/.test(line))).toEqual([]);
    expect(script).not.toMatch(/\de[+-]?\d/); // no exponent notation anywhere
    expect(script).toContain("'HMGET', KEYS[1], \"burst|tb\", \"per-minute|sw\", \"per-day|fw\", \"login|sl\", \"shaper|lb\"");
  });

  it("reads the key's override and manual block in the same HMGET as the policies' state, and answers the override's body last", () => {
    const { script } = decideScript(tier.slice(0, 2));
    expect(script).toContain(`'HMGET', KEYS[1], "burst|tb", "per-minute|sw", '@expires', '|override', '|block')`);
    expect(script.match(/redis\.call\('HMGET'/g)).toHaveLength(1);
    expect(script).toContain("out[#out + 1] = override");
  });

  it("answers the fast path in the compact form: now_us, each policy's new state (or its answer's 4 numbers), then the marks and the override", () => {
    const fastOf = (script: string) => script.split("\n").find((line) => line.startsWith("  return { now_us, ") && line.endsWith(", override }"));
    // a fixed window sends its new count (the store answers with core's stateNow)
    expect(fastOf(decideScript([fixedWindow({ limit: 10, window: "1m" })]).script)).toBe("  return { now_us, fw1_new_count, override }");
    // a three-limit tier: now_us, the bucket's TAT, the sliding window's two counts, the fixed window's count, the bucket's mark
    expect(fastOf(decideScript(tier.slice(0, 3)).script)).toBe(
      "  return { now_us, tb1_new_tat, sw2_new_previous, sw2_new_current, fw3_new_count, tb1_new_tat + tb1_new_shift, override }",
    );
    // the tier runs none of its answers' arithmetic on the fast path (a sliding window's refill time)
    expect(decideScript(tier.slice(0, 3)).script.split("-- the general code")[0]).not.toContain("sw2_refill_at");
    // a sliding log and a leaky bucket with a queue send the 4 numbers of their answer: 1 + 2 × 4 + one mark
    const logAndQueue = fastOf(decideScript(tier.slice(3)).script);
    expect(luaListItems(logAndQueue!.slice("  return { ".length, -" }".length))).toHaveLength(1 + 2 * 4 + 1 + 1);
    expect(logAndQueue).toContain("lb2_delay");
  });

  it("splits a Lua list at its top-level commas only", () => {
    expect(luaListItems("1, max(a, b), 0, { x, y }, t[i], ceil((a + 1) / 2)")).toEqual(["1", "max(a, b)", "0", "{ x, y }", "t[i]", "ceil((a + 1) / 2)"]);
  });

  it("is the same text for the same policies and different for different ones", () => {
    expect(decideScript(tier).sha).toBe(decideScript([...tier]).sha);
    expect(decideScript(tier.slice(0, 2)).sha).not.toBe(decideScript(tier).sha);
  });

  it(`refuses more than core's MAX_POLICIES (${MAX_POLICIES}, the same on every store) with a clear error`, () => {
    expect(MAX_POLICIES).toBe(12);
    const many = Array.from({ length: MAX_POLICIES + 1 }, (_, i) => fixedWindow({ limit: 1, window: "1m", name: `p${i}` }));
    expect(() => decideScript(many)).toThrow(/^\[sluice\] \[redis\] policies must hold 1 to 12 policies \(the same limit on every store\); got 13$/);
    expect(() => decideScript(many.slice(0, MAX_POLICIES))).not.toThrow();
  });

  it("names each policy's locals after its kind, position and what they hold", () => {
    const { script } = decideScript(tier);
    for (const name of [
      "tb1_tat",
      "tb1_new_tat",
      "sw2_window",
      "sw2_previous",
      "sw2_current",
      "fw3_window",
      "fw3_count",
      "sl4_times",
      "sl4_costs",
      "sl4_new_log",
      "lb5_tat",
      "local function fw3_decide(c)",
      "fw3_result",
    ]) {
      expect(script).toContain(name);
    }
    // one Redis key per identifier: the script names no key but KEYS[1]
    expect(script.match(/KEYS\[\d+\]/g)?.every((k) => k === "KEYS[1]")).toBe(true);
  });
});

describe("controlScript", () => {
  const policies = [fixedWindow({ limit: 5, window: "1m", name: "login", block: "15m" }), tokenBucket({ capacity: 10, refillRate: 1, name: "burst" })];

  it("is named by the SHA-1 of its text and runs on stock Redis: no script flags, no globals, constants written out in full", () => {
    const { script, sha } = controlScript(policies);
    expect(sha).toBe(nodeSha1(script));
    expect(script.startsWith("#!")).toBe(false);
    expect(script.split("\n").filter((line) => /^[A-Za-z_][\w.]*\s*=/.test(line))).toEqual([]);
    expect(script).not.toMatch(/\de[+-]?\d/);
    expect(script.match(/KEYS\[\d+\]/g)?.every((k) => k === "KEYS[1]")).toBe(true);
  });

  it("unblock drops the manual block and the penalty boxes of the namespace's policies (those that have one)", () => {
    expect(controlScript(policies).script).toContain(`redis.call('HDEL', KEYS[1], '|block', "login|fw|block")`);
    expect(controlScript(policies.slice(1)).script).toContain(`redis.call('HDEL', KEYS[1], '|block')`);
  });
});
