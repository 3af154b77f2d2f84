/**
 * The policy factories: each validates its options at once, with a SluiceConfigError that names
 * the option, the value and what is allowed; names a policy readably and distinctly per
 * configuration; parses durations; and returns a frozen policy holding the parsed parameters.
 */
import { describe, expect, it } from "vitest";
import { DURATION_HINT, NAME_HINT, expectConfigError } from "../test/helpers.js";
import { MAX_DURATION_MS, formatMs } from "./duration.js";
import { fixedWindow, leakyBucket, slidingLog, slidingWindow, toMs, tokenBucket } from "./index.js";

type Case = [string, () => unknown, string | RegExp];

describe("factory validation", () => {
  const windowCases = (kind: "fixedWindow" | "slidingWindow" | "slidingLog", make: (o: unknown) => unknown): Case[] => [
    [`${kind} limit 0`, () => make({ limit: 0, window: "1m" }), `[sluice] limit must be a positive safe integer; got 0`],
    [`${kind} limit 1.5`, () => make({ limit: 1.5, window: "1m" }), `[sluice] limit must be a positive safe integer; got 1.5`],
    [`${kind} limit -1`, () => make({ limit: -1, window: "1m" }), `[sluice] limit must be a positive safe integer; got -1`],
    [`${kind} limit "10"`, () => make({ limit: "10", window: "1m" }), `[sluice] limit must be a positive safe integer; got "10"`],
    [`${kind} limit NaN`, () => make({ limit: Number.NaN, window: "1m" }), `[sluice] limit must be a positive safe integer; got NaN`],
    [`${kind} limit 2^53`, () => make({ limit: 2 ** 53, window: "1m" }), `[sluice] limit must be a positive safe integer; got 9007199254740992`],
    [`${kind} limit missing`, () => make({ window: "1m" }), `[sluice] limit must be a positive safe integer; got undefined`],
    [`${kind} window "abc"`, () => make({ limit: 1, window: "abc" }), `[sluice] window ${DURATION_HINT}; got "abc"`],
    [`${kind} window "1y"`, () => make({ limit: 1, window: "1y" }), `[sluice] window ${DURATION_HINT}; got "1y"`],
    [`${kind} window "1.5s"`, () => make({ limit: 1, window: "1.5s" }), `[sluice] window ${DURATION_HINT}; got "1.5s"`],
    [`${kind} window "-5s"`, () => make({ limit: 1, window: "-5s" }), `[sluice] window ${DURATION_HINT}; got "-5s"`],
    [`${kind} window 0`, () => make({ limit: 1, window: 0 }), `[sluice] window must be a positive whole number of milliseconds; got 0`],
    [`${kind} window "0s"`, () => make({ limit: 1, window: "0s" }), `[sluice] window must be a positive whole number of milliseconds; got "0s"`],
    [`${kind} window -5`, () => make({ limit: 1, window: -5 }), `[sluice] window must be a positive whole number of milliseconds; got -5`],
    [`${kind} window 1.5`, () => make({ limit: 1, window: 1.5 }), `[sluice] window must be a positive whole number of milliseconds; got 1.5`],
    [`${kind} window 2^31 ms`, () => make({ limit: 1, window: 2 ** 31 }), `[sluice] window must be at most 2147483647 ms (about 24.8 days); got 2147483648`],
    [`${kind} window "25d"`, () => make({ limit: 1, window: "25d" }), `[sluice] window must be at most 2147483647 ms (about 24.8 days); got "25d"`],
    [`${kind} window missing`, () => make({ limit: 1 }), `[sluice] window must be a duration (milliseconds or a string like "10s", "1m"); got undefined`],
    [`${kind} window null`, () => make({ limit: 1, window: null }), /window must be a duration .*; got null$/],
    [`${kind} no options`, () => make(undefined), `[sluice] options must be an object (the options of ${kind}()); got undefined`],
    [`${kind} options array`, () => make([10, "1m"]), `[sluice] options must be an object (the options of ${kind}()); got an array`],
    [`${kind} name ""`, () => make({ limit: 1, window: "1m", name: "" }), `[sluice] name ${NAME_HINT}; got ""`],
    [`${kind} name 5`, () => make({ limit: 1, window: "1m", name: 5 }), `[sluice] name ${NAME_HINT}; got 5`],
  ];

  const cases: Case[] = [
    ...windowCases("fixedWindow", (o) => fixedWindow(o as never)),
    ...windowCases("slidingWindow", (o) => slidingWindow(o as never)),
    ...windowCases("slidingLog", (o) => slidingLog(o as never)),
    [
      "slidingWindow limit × window beyond 2^53",
      () => slidingWindow({ limit: 2 ** 30, window: "1d" }),
      "[sluice] limit × window (in ms) must be at most 2^53-1 so the weighted count stays exact; got limit 1073741824 and window 86400000 ms",
    ],
    ["tokenBucket capacity 0", () => tokenBucket({ capacity: 0, refillRate: 1 }), "[sluice] capacity must be a positive safe integer; got 0"],
    ["tokenBucket capacity 1.5", () => tokenBucket({ capacity: 1.5, refillRate: 1 }), "[sluice] capacity must be a positive safe integer; got 1.5"],
    ["tokenBucket capacity -1", () => tokenBucket({ capacity: -1, refillRate: 1 }), "[sluice] capacity must be a positive safe integer; got -1"],
    ["tokenBucket capacity \"10\"", () => tokenBucket({ capacity: "10" as never, refillRate: 1 }), '[sluice] capacity must be a positive safe integer; got "10"'],
    ["tokenBucket refillRate 0", () => tokenBucket({ capacity: 10, refillRate: 0 }), "[sluice] refillRate must be a positive safe integer; got 0"],
    ["tokenBucket refillRate 1.5", () => tokenBucket({ capacity: 10, refillRate: 1.5 }), "[sluice] refillRate must be a positive safe integer; got 1.5"],
    ["tokenBucket refillRate -1", () => tokenBucket({ capacity: 10, refillRate: -1 }), "[sluice] refillRate must be a positive safe integer; got -1"],
    ["tokenBucket refillRate \"1\"", () => tokenBucket({ capacity: 10, refillRate: "1" as never }), '[sluice] refillRate must be a positive safe integer; got "1"'],
    ["tokenBucket interval \"abc\"", () => tokenBucket({ capacity: 10, refillRate: 1, interval: "abc" as never }), `[sluice] interval ${DURATION_HINT}; got "abc"`],
    ["tokenBucket interval 0", () => tokenBucket({ capacity: 10, refillRate: 1, interval: 0 }), "[sluice] interval must be a positive whole number of milliseconds; got 0"],
    ["tokenBucket interval -5", () => tokenBucket({ capacity: 10, refillRate: 1, interval: -5 }), "[sluice] interval must be a positive whole number of milliseconds; got -5"],
    ["tokenBucket interval \"1y\"", () => tokenBucket({ capacity: 10, refillRate: 1, interval: "1y" as never }), `[sluice] interval ${DURATION_HINT}; got "1y"`],
    ["tokenBucket interval 2^31", () => tokenBucket({ capacity: 10, refillRate: 1, interval: 2 ** 31 }), "[sluice] interval must be at most 2147483647 ms (about 24.8 days); got 2147483648"],
    [
      "tokenBucket that never drains",
      () => tokenBucket({ capacity: 2 ** 40, refillRate: 1, interval: "1d" }),
      "[sluice] capacity must be small enough for the bucket to drain within 2^50 µs (about 35 years) at its rate; lower it or raise the rate; got 1099511627776 units at 86400000000 µs each",
    ],
    ["tokenBucket name", () => tokenBucket({ capacity: 10, refillRate: 1, name: "a b" }), `[sluice] name ${NAME_HINT}; got "a b"`],
    ["tokenBucket no options", () => tokenBucket(null as never), "[sluice] options must be an object (the options of tokenBucket()); got null"],
    ["leakyBucket rate 0", () => leakyBucket({ rate: 0, period: "1s", burst: 5 }), "[sluice] rate must be a positive safe integer; got 0"],
    ["leakyBucket rate 1.5", () => leakyBucket({ rate: 1.5, period: "1s", burst: 5 }), "[sluice] rate must be a positive safe integer; got 1.5"],
    ["leakyBucket rate -1", () => leakyBucket({ rate: -1, period: "1s", burst: 5 }), "[sluice] rate must be a positive safe integer; got -1"],
    ["leakyBucket rate \"10\"", () => leakyBucket({ rate: "10" as never, period: "1s", burst: 5 }), '[sluice] rate must be a positive safe integer; got "10"'],
    ["leakyBucket burst 0", () => leakyBucket({ rate: 10, period: "1s", burst: 0 }), "[sluice] burst must be a positive safe integer; got 0"],
    ["leakyBucket burst 1.5", () => leakyBucket({ rate: 10, period: "1s", burst: 1.5 }), "[sluice] burst must be a positive safe integer; got 1.5"],
    ["leakyBucket burst -1", () => leakyBucket({ rate: 10, period: "1s", burst: -1 }), "[sluice] burst must be a positive safe integer; got -1"],
    ["leakyBucket burst \"5\"", () => leakyBucket({ rate: 10, period: "1s", burst: "5" as never }), '[sluice] burst must be a positive safe integer; got "5"'],
    ["leakyBucket burst missing", () => leakyBucket({ rate: 10, period: "1s" } as never), "[sluice] burst must be a positive safe integer; got undefined"],
    ["leakyBucket period \"abc\"", () => leakyBucket({ rate: 10, period: "abc" as never, burst: 5 }), `[sluice] period ${DURATION_HINT}; got "abc"`],
    ["leakyBucket period 0", () => leakyBucket({ rate: 10, period: 0, burst: 5 }), "[sluice] period must be a positive whole number of milliseconds; got 0"],
    ["leakyBucket period missing", () => leakyBucket({ rate: 10, burst: 5 } as never), /^\[sluice\] period must be a duration .*; got undefined$/],
    ["leakyBucket queue -1", () => leakyBucket({ rate: 10, period: "1s", burst: 5, queue: -1 }), "[sluice] queue must be a non-negative safe integer; got -1"],
    ["leakyBucket queue 1.5", () => leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 1.5 }), "[sluice] queue must be a non-negative safe integer; got 1.5"],
    ["leakyBucket queue \"3\"", () => leakyBucket({ rate: 10, period: "1s", burst: 5, queue: "3" as never }), '[sluice] queue must be a non-negative safe integer; got "3"'],
    ["leakyBucket name", () => leakyBucket({ rate: 10, period: "1s", burst: 5, name: "a,b" }), `[sluice] name ${NAME_HINT}; got "a,b"`],
  ];

  it.each(cases)("%s", (_name, make, message) => expectConfigError(make, message));

  it.each([
    ["a b"],
    ['a"b'],
    ["a,b"],
    ["a;b"],
    ["a=b"],
    ["{a}"],
    ["(a)"],
    ["a\\b"],
    ["tab\there"],
    ["é"],
    ["x".repeat(129)],
  ])("rejects the name %j", (name) => {
    expectConfigError(() => fixedWindow({ limit: 1, window: "1m", name }), `[sluice] name ${NAME_HINT}; got ${JSON.stringify(name)}`);
  });

  it("accepts names of visible ASCII without separators, up to 128 characters", () => {
    for (const name of ["x".repeat(128), "api:v1/users[GET]", "per-user_1.5~|!#$%&'*+^`<>?@"]) {
      expect(fixedWindow({ limit: 1, window: "1m", name }).name).toBe(name);
    }
  });
});

describe("default names and durations", () => {
  it("names policies readably and distinctly per configuration", () => {
    expect(fixedWindow({ limit: 100, window: "1m" }).name).toBe("100-per-1m");
    expect(slidingWindow({ limit: 100, window: "60s" }).name).toBe("100-per-1m");
    expect(slidingLog({ limit: 5, window: 1500 }).name).toBe("5-per-1500ms");
    expect(fixedWindow({ limit: 7, window: 90_000 }).name).toBe("7-per-90s");
    expect(fixedWindow({ limit: 1000, window: "24h" }).name).toBe("1000-per-1d");
    expect(tokenBucket({ capacity: 100, refillRate: 10 }).name).toBe("100-burst-10-per-1s");
    expect(tokenBucket({ capacity: 100, refillRate: 10, interval: "1m" }).name).toBe("100-burst-10-per-1m");
    expect(leakyBucket({ rate: 10, period: "1s", burst: 100 }).name).toBe("100-burst-10-per-1s");
    expect(leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 0 }).name).toBe("5-burst-10-per-1s");
    expect(leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 }).name).toBe("5-burst-10-per-1s-queue-3");
  });

  it('parses "500ms" "10s" "1m" "1h" "1d" and milliseconds', () => {
    expect(toMs("500ms", "window")).toBe(500);
    expect(toMs("10s", "window")).toBe(10_000);
    expect(toMs("1m", "window")).toBe(60_000);
    expect(toMs("1h", "window")).toBe(3_600_000);
    expect(toMs("1d", "window")).toBe(86_400_000);
    expect(toMs(1500, "window")).toBe(1500);
    expect(toMs(MAX_DURATION_MS, "window")).toBe(2 ** 31 - 1);
    expect(toMs("24d", "window")).toBe(2_073_600_000);
    expect(() => toMs("1x", "myOption")).toThrow(/^\[sluice\] myOption must be a duration/);
    expect(formatMs(500)).toBe("500ms");
    expect(formatMs(1500)).toBe("1500ms");
    expect(formatMs(120_000)).toBe("2m");
    expect(formatMs(7_200_000)).toBe("2h");
  });

  it("returns frozen policies holding the parsed parameters", () => {
    const fw = fixedWindow({ limit: 100, window: "1m" });
    expect(fw).toEqual({ kind: "fixedWindow", name: "100-per-1m", limit: 100, windowMs: 60_000, windowSeconds: 60 });
    expect(Object.isFrozen(fw)).toBe(true);
    expect(slidingWindow({ limit: 10, window: "500ms", name: "sw" })).toEqual({
      kind: "slidingWindow",
      name: "sw",
      limit: 10,
      windowMs: 500,
      windowSeconds: 1,
    });
    expect(slidingLog({ limit: 5, window: "10s" })).toEqual({ kind: "slidingLog", name: "5-per-10s", limit: 5, windowMs: 10_000, windowSeconds: 10 });
    const tb = tokenBucket({ capacity: 10, refillRate: 3 });
    expect(tb).toEqual({
      kind: "tokenBucket",
      name: "10-burst-3-per-1s",
      limit: 10,
      windowSeconds: 4,
      capacity: 10,
      refillRate: 3,
      intervalMs: 1000,
      emissionIntervalUs: 333_334,
      burst: 10,
      queue: 0,
    });
    expect(Object.isFrozen(tb)).toBe(true);
    expect(leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 })).toEqual({
      kind: "leakyBucket",
      name: "5-burst-10-per-1s-queue-3",
      limit: 5,
      windowSeconds: 1,
      rate: 10,
      periodMs: 1000,
      burst: 5,
      queue: 3,
      emissionIntervalUs: 100_000,
    });
  });
});
