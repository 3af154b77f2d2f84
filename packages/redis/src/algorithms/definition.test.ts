import fc from "fast-check";
import IORedis from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { digits } from "./definition.js";

// digits() must write exactly what fmt('%.0f:…') writes, for every integer a script stores (0 to
// 2^53 − 1), on the side of 2^31 where it takes %d and on the side where it falls back: a stored
// string that differed would read as another state. Run in the project's redis-server.

let redis: IORedis;
beforeAll(async () => {
  redis = new IORedis(inject("sluiceRedisUrl"), { maxRetriesPerRequest: 0 });
});
afterAll(() => redis?.disconnect());

/** What digits() and fmt('%.0f:…') write for the numbers in ARGV, as [digits, %.0f]. */
async function both(values: readonly number[]): Promise<[string, string]> {
  const names = values.map((_, i) => `v${i + 1}`);
  const script = [
    "local fmt = string.format",
    ...names.map((name, i) => `local ${name} = tonumber(ARGV[${i + 1}])`),
    `return { ${digits(...names)}, fmt('${names.map(() => "%.0f").join(":")}', ${names.join(", ")}) }`,
  ].join("\n");
  return (await redis.eval(script, 0, ...values.map(String))) as [string, string];
}

describe("digits()", () => {
  it("writes what %.0f writes at the edges: 0, 2^31 − 1 (%d), 2^31 and 2^53 − 1 (%.0f), alone and mixed", async () => {
    const edges = [0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 28_123_456, 1_733_390_000_123_456, Number.MAX_SAFE_INTEGER];
    for (const v of edges) expect(await both([v]), String(v)).toEqual([String(v), String(v)]);
    expect(await both([28_123_456, 17, 42])).toEqual(["28123456:17:42", "28123456:17:42"]);
    expect(await both([28_123_456, 2 ** 31, 42])).toEqual([`28123456:${2 ** 31}:42`, `28123456:${2 ** 31}:42`]);
    expect(await both([Number.MAX_SAFE_INTEGER, 0])).toEqual([`${Number.MAX_SAFE_INTEGER}:0`, `${Number.MAX_SAFE_INTEGER}:0`]);
  });

  it("writes what %.0f writes for any integers below 2^53 (and the JavaScript digits of each)", async () => {
    const value = fc.oneof(fc.integer({ min: 0, max: 2 ** 31 + 10 }), fc.maxSafeNat());
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 3 }), async (values) => {
        const [written, reference] = await both(values);
        expect(written).toBe(reference);
        expect(written).toBe(values.join(":"));
      }),
      { numRuns: 200 },
    );
  });

  it("is one parenthesized expression (it is spliced into argument lists and concatenations)", () => {
    expect(digits("a", "b")).toBe("(a < 2147483648 and b < 2147483648 and fmt('%d:%d', a, b) or fmt('%.0f:%.0f', a, b))");
  });
});
