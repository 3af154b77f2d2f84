import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  DEFAULT_TIMEOUT_MS,
  MAX_KEY_LENGTH,
  MAX_POLICIES,
  MemoryStore,
  type Policy,
  RateLimiter,
  type RateLimiterOptions,
  SluiceConfigError,
  SluiceError,
  SluiceInputError,
  SluiceStoreError,
  SluiceTimeoutError,
  type Store,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  toMs,
  tokenBucket,
} from "./index.js";
import { MAX_DURATION_MS, formatMs } from "./duration.js";
import type { BoundStore, StoreNamespace, StoreResult } from "./types.js";
import { STORE_FAILURE_RETRY_MS } from "./decision.js";
import { toDecision } from "./store.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

// ---------------------------------------------------------------------------------------------
// Error classes
// ---------------------------------------------------------------------------------------------

describe("error classes", () => {
  it("share the SluiceError base, carry their names and the [sluice] prefix", () => {
    const config = new SluiceConfigError("limit must be a positive safe integer; got 0", { option: "limit" });
    const input = new SluiceInputError("key must be a non-empty string", { option: "key" });
    const base = new SluiceError("oops");
    for (const error of [config, input, base]) {
      expect(error).toBeInstanceOf(SluiceError);
      expect(error).toBeInstanceOf(Error);
    }
    expect(config).not.toBeInstanceOf(SluiceInputError);
    expect(input).not.toBeInstanceOf(SluiceConfigError);
    expect([base.name, config.name, input.name]).toEqual(["SluiceError", "SluiceConfigError", "SluiceInputError"]);
    expect(config.message).toBe("[sluice] limit must be a positive safe integer; got 0");
    expect(input.message).toBe("[sluice] key must be a non-empty string");
    expect(new SluiceConfigError("[sluice] [redis] client must be …", { option: "client" }).message).toBe("[sluice] [redis] client must be …");
    expect(String(config)).toBe("SluiceConfigError: [sluice] limit must be a positive safe integer; got 0");
  });

  it("keep their class across two copies of the module (ESM and CommonJS builds, or a subpath bundled apart)", async () => {
    const second = "./errors.js?second-copy"; // another query string: Vite loads the module again
    const copy = (await import(/* @vite-ignore */ second)) as typeof import("./errors.js");
    expect(copy.SluiceConfigError).not.toBe(SluiceConfigError);
    const config = new copy.SluiceConfigError("x", { option: "x" });
    const input = new copy.SluiceInputError("x", { option: "x" });
    expect(config).toBeInstanceOf(SluiceConfigError);
    expect(config).toBeInstanceOf(SluiceError);
    expect(config).not.toBeInstanceOf(SluiceInputError);
    expect(input).toBeInstanceOf(SluiceInputError);
    expect(new copy.SluiceTimeoutError("x")).toBeInstanceOf(SluiceTimeoutError);
    expect(new copy.SluiceStoreError("x")).toBeInstanceOf(SluiceStoreError);
    expect(new SluiceInputError("x", { option: "x" })).toBeInstanceOf(copy.SluiceInputError);
    // a plain Error named like one is not one, and a subclass of yours keeps the ordinary check
    expect(Object.assign(new Error("x"), { name: "SluiceConfigError" })).not.toBeInstanceOf(SluiceConfigError);
    class MyError extends SluiceConfigError {}
    expect(new MyError("x", { option: "x" })).toBeInstanceOf(SluiceConfigError);
    expect(new MyError("x", { option: "x" })).toBeInstanceOf(copy.SluiceConfigError);
    expect(config).not.toBeInstanceOf(MyError);
    expect(Object.keys(config)).toEqual(Object.keys(new Error("x")).concat("name", "code", "option"));
  });

  it("pass a cause through", () => {
    const cause = new Error("ECONNREFUSED");
    expect(new SluiceError("store down", { cause }).cause).toBe(cause);
  });

  it("are what the library throws", () => {
    let thrown: unknown;
    try {
      fixedWindow({ limit: 0, window: "1m" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SluiceConfigError);
    expect((thrown as Error).name).toBe("SluiceConfigError");
  });
});

// ---------------------------------------------------------------------------------------------
// Factories
// ---------------------------------------------------------------------------------------------

type Case = [string, () => unknown, string | RegExp];

function expectConfigError(make: () => unknown, message: string | RegExp) {
  expect(make).toThrow(SluiceConfigError);
  expect(make).toThrow(message);
  let error: SluiceConfigError | undefined;
  try {
    make();
  } catch (thrown) {
    error = thrown as SluiceConfigError;
  }
  expect(error?.code).toBe("SLUICE_CONFIG");
  // one format: the message starts with the option the error names (errors.test.ts pins each option)
  expect(error?.message.startsWith(`[sluice] ${error.option} `), error?.message).toBe(true);
}

const DURATION_HINT = 'must be a duration: a positive integer of milliseconds or a string like "500ms", "10s", "1m", "1h", "1d"';
const NAME_HINT =
  'must be 1-128 visible ASCII characters without spaces, quotes, backslashes, commas, semicolons, "=", parentheses or braces';

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

// ---------------------------------------------------------------------------------------------
// RateLimiter configuration
// ---------------------------------------------------------------------------------------------

describe("RateLimiter validation", () => {
  const p = fixedWindow({ limit: 5, window: "1m" });
  const cases: [string, unknown, string | RegExp][] = [
    ["no options", undefined, "[sluice] options must be an object with limits; got undefined"],
    ["limits empty", { limits: [] }, "[sluice] limits must hold at least one policy; got an empty array"],
    ["limits missing", {}, /^\[sluice\] limits must be a policy from .* or a list of them; got undefined$/],
    ["limits not policies", { limits: [p, { limit: 5, window: "1m" }] }, /^\[sluice\] limits\[1\] must be a policy from fixedWindow\(\), slidingWindow\(\), slidingLog\(\), tokenBucket\(\), leakyBucket\(\) or concurrency\(\); got an object$/],
    ["limits a string", { limits: "100-per-1m" }, /^\[sluice\] limits must be a policy from .* or a list of them; got "100-per-1m"$/],
    ["limits a factory", { limits: [fixedWindow] }, /^\[sluice\] limits\[0\] must be a policy .*; got a function$/],
    ["duplicate names", { limits: [p, fixedWindow({ limit: 5, window: "1m" })] }, "[sluice] limits[1].name must differ from the other policies' names (give one a distinct name option); got \"5-per-1m\" twice"],
    ["duplicate custom names", { limits: [fixedWindow({ limit: 5, window: "1m", name: "x" }), tokenBucket({ capacity: 1, refillRate: 1, name: "x" })] }, /^\[sluice\] limits\[1\]\.name must differ .*; got "x" twice$/],
    ["prefix empty", { limits: p, prefix: "" }, `[sluice] prefix ${NAME_HINT}; got ""`],
    ["prefix with a space", { limits: p, prefix: "my app" }, `[sluice] prefix ${NAME_HINT}; got "my app"`],
    ["prefix not a string", { limits: p, prefix: 5 }, `[sluice] prefix ${NAME_HINT}; got 5`],
    ["prefix too long", { limits: p, prefix: "p".repeat(129) }, /^\[sluice\] prefix must be 1-128 /],
    ["onStoreError unknown", { limits: p, onStoreError: "fail-open" }, '[sluice] onStoreError must be "fallback", "allow" or "deny"; got "fail-open"'],
    ["onStoreError boolean", { limits: p, onStoreError: true }, /onStoreError must be .*; got true$/],
    ["timeoutMs 0", { limits: p, timeoutMs: 0 }, "[sluice] timeoutMs must be a positive integer of milliseconds, at most 2147483647, or false; got 0"],
    ["timeoutMs true", { limits: p, timeoutMs: true }, /timeoutMs must be .*or false; got true$/],
    ["timeoutMs -1", { limits: p, timeoutMs: -1 }, /timeoutMs must be .*; got -1$/],
    ["timeoutMs 1.5", { limits: p, timeoutMs: 1.5 }, /timeoutMs must be .*; got 1\.5$/],
    ["timeoutMs \"100\"", { limits: p, timeoutMs: "100" }, /timeoutMs must be .*; got "100"$/],
    ["timeoutMs NaN", { limits: p, timeoutMs: Number.NaN }, /timeoutMs must be .*; got NaN$/],
    ["timeoutMs Infinity", { limits: p, timeoutMs: Number.POSITIVE_INFINITY }, /timeoutMs must be .*; got Infinity$/],
    // setTimeout fires at once above 2^31-1 ms: every store call would time out
    ["timeoutMs 2^31", { limits: p, timeoutMs: 2 ** 31 }, /timeoutMs must be .*at most 2147483647, or false; got 2147483648$/],
    ["store without bind", { limits: p, store: {} }, "[sluice] store must be a Store (an object with bind(namespace)); got an object"],
    ["onStoreFailure not a function", { limits: p, onStoreFailure: "log" }, '[sluice] onStoreFailure must be a function; got "log"'],
  ];
  it.each(cases)("%s", (_name, options, message) => {
    expectConfigError(() => new RateLimiter(options as RateLimiterOptions), message);
  });

  it("accepts one policy or a list, and reports its settings", () => {
    const one = new RateLimiter({ limits: p });
    expect(one.policies).toEqual([p]);
    expect(Object.isFrozen(one.policies)).toBe(true);
    expect(one.prefix).toBe("sluice");
    expect(one.onStoreError).toBe("fallback");
    expect(one.timeoutMs).toBe(DEFAULT_TIMEOUT_MS);
    expect(DEFAULT_TIMEOUT_MS).toBe(1000);
    expect(one.store).toBeInstanceOf(MemoryStore);
    const two = new RateLimiter({ limits: [p, tokenBucket({ capacity: 3, refillRate: 1 })], prefix: "api", timeoutMs: MAX_DURATION_MS, onStoreError: "deny" });
    expect(two.policies.map((x) => x.name)).toEqual(["5-per-1m", "3-burst-1-per-1s"]);
    expect([two.prefix, two.timeoutMs, two.onStoreError]).toEqual(["api", 2 ** 31 - 1, "deny"]);
  });

  it("binds the store once, with the prefix and the policies", () => {
    const namespaces: StoreNamespace[] = [];
    const memory = new MemoryStore();
    const store: Store = {
      bind(namespace) {
        namespaces.push(namespace);
        return memory.bind(namespace);
      },
    };
    const limiter = new RateLimiter({ store, limits: p, prefix: "api" });
    expect(namespaces).toEqual([{ prefix: "api", policies: [p] }]);
    expect(Object.isFrozen(namespaces[0])).toBe(true);
    expect(limiter.store).toBe(store);
  });
});

// ---------------------------------------------------------------------------------------------
// Input errors
// ---------------------------------------------------------------------------------------------

/** A store that counts calls and delegates to a MemoryStore. */
function countingStore(inner: MemoryStore) {
  const calls = { consume: 0, peek: 0, reset: 0, refund: 0, release: 0 };
  const store: Store = {
    bind(namespace) {
      const bound = inner.bind(namespace);
      return {
        consume: (key, cost) => (calls.consume++, bound.consume(key, cost)),
        peek: (key) => (calls.peek++, bound.peek(key)),
        reset: (key) => (calls.reset++, bound.reset(key)),
        refund: (key, cost, charge) => (calls.refund++, bound.refund(key, cost, charge)),
        release: (key, lease) => (calls.release++, bound.release(key, lease)),
      };
    },
  };
  return { store, calls };
}

describe("input errors", () => {
  const limits = [fixedWindow({ limit: 10, window: "1m" }), slidingLog({ limit: 5, window: "10s" }), tokenBucket({ capacity: 4, refillRate: 1 })];

  async function primed() {
    const memory = new MemoryStore({ clock: () => T0 });
    const { store, calls } = countingStore(memory);
    const limiter = new RateLimiter({ store, limits });
    await limiter.limit("k", { cost: 2 });
    await limiter.limit("k");
    calls.consume = 0;
    return { limiter, memory, calls };
  }

  it.each([
    [0, "0"],
    [-1, "-1"],
    [1.5, "1.5"],
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [2 ** 53, "9007199254740992"],
    ["1", '"1"'],
    [null, "null"],
    [true, "true"],
  ])("cost %j rejects with SluiceInputError and leaves the state untouched", async (cost, shown) => {
    const { limiter, memory, calls } = await primed();
    const before = await limiter.peek("k");
    expect(before.remaining).toBe(1); // the token bucket: 4 - 3
    const call = limiter.limit("k", { cost: cost as number });
    await expect(call).rejects.toThrow(SluiceInputError);
    await expect(call).rejects.toThrow(`[sluice] cost must be a positive safe integer; got ${shown}`);
    expect(calls.consume).toBe(0);
    expect(await limiter.peek("k")).toEqual(before);
    expect(memory.size).toBe(1);
  });

  it.each([[null], [5], ["cost"]])("options %j rejects with SluiceInputError", async (options) => {
    const { limiter, calls } = await primed();
    const before = await limiter.peek("k");
    await expect(limiter.limit("k", options as never)).rejects.toThrow(SluiceInputError);
    await expect(limiter.limit("k", options as never)).rejects.toThrow(/^\[sluice\] options must be an object like \{ cost: 1 \}; got /);
    expect(calls.consume).toBe(0);
    expect(await limiter.peek("k")).toEqual(before);
  });

  it("no options, {} and { cost: undefined } mean cost 1", async () => {
    const { limiter } = await primed();
    // a fresh key: each call takes exactly one unit from every policy (10, 5 and 4 to start)
    const remainingAfter = async (options?: { cost?: number }) => {
      const d = await limiter.limit("other", options);
      return d.policies.map((r) => r.remaining);
    };
    expect(await remainingAfter()).toEqual([9, 4, 3]);
    expect(await remainingAfter({})).toEqual([8, 3, 2]);
    expect(await remainingAfter({ cost: undefined })).toEqual([7, 2, 1]);
  });

  it.each([[""], [5], [undefined], [null], [{}], [["k"]]])(
    "key %j rejects with SluiceInputError in limit, peek and reset, and touches nothing",
    async (key) => {
      const { limiter, memory, calls } = await primed();
      const before = await limiter.peek("k");
      calls.peek = 0;
      for (const call of [() => limiter.limit(key as string), () => limiter.peek(key as string), () => limiter.reset(key as string)]) {
        await expect(call()).rejects.toThrow(SluiceInputError);
        await expect(call()).rejects.toThrow(/^\[sluice\] key must be a non-empty string; got /);
      }
      expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
      expect(await limiter.peek("k")).toEqual(before);
      expect(memory.size).toBe(1);
    },
  );
});

describe("policy count and key shape, checked before any store call", () => {
  const policies = (n: number) => Array.from({ length: n }, (_, i) => fixedWindow({ limit: 5, window: "1m", name: `p${i}` }));

  it(`takes at most MAX_POLICIES (${MAX_POLICIES}) policies, refused at construction whatever the store`, () => {
    expect(MAX_POLICIES).toBe(12);
    const memory = new MemoryStore();
    const { store, calls } = countingStore(memory);
    let bound = 0;
    const spy: Store = {
      bind(namespace) {
        bound++;
        return store.bind(namespace);
      },
    };
    expect(new RateLimiter({ store: spy, limits: policies(12) }).policies).toHaveLength(12);
    for (const n of [13, 33]) {
      expectConfigError(
        () => new RateLimiter({ store: spy, limits: policies(n) }),
        `[sluice] limits must hold at most 12 policies (the same on every store); got ${n}`,
      );
    }
    expect(bound).toBe(1); // only the 12-policy limiter reached the store
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
  });

  it.each([
    ["a lone high surrogate", "\ud800"],
    ["a lone low surrogate", "\udc00"],
    ["a high surrogate before a letter", "a\ud800b"],
    ["a reversed pair", "\udc00\ud800"],
    ["a pair cut at the end", "user:\ud83d"],
  ])("a key with %s is a SluiceInputError in limit, peek and reset; the store sees no call", async (_label, key) => {
    const { store, calls } = countingStore(new MemoryStore({ clock: () => T0 }));
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m" }) });
    for (const call of [() => limiter.limit(key), () => limiter.peek(key), () => limiter.reset(key)]) {
      await expect(call()).rejects.toThrow(SluiceInputError);
      await expect(call()).rejects.toThrow("[sluice] key must be a well-formed string without lone surrogates (stores carry UTF-8, which cannot encode them); got ");
    }
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
  });

  it('well-formed keys "\ufffd" and a surrogate pair are accepted, each with its own quota', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    expect((await limiter.limit("\ufffd")).allowed).toBe(true);
    expect((await limiter.limit("\ud83d\ude00")).allowed).toBe(true);
    expect((await limiter.limit("\ufffd")).allowed).toBe(false);
    expect((await limiter.limit("?")).allowed).toBe(true);
  });

  it(`a key longer than MAX_KEY_LENGTH (${MAX_KEY_LENGTH}) is a SluiceInputError before any store call; ${MAX_KEY_LENGTH} is fine`, async () => {
    expect(MAX_KEY_LENGTH).toBe(4096);
    const { store, calls } = countingStore(new MemoryStore({ clock: () => T0 }));
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1m" }), onStoreError: "allow" });
    const long = "k".repeat(5000);
    for (const call of [() => limiter.limit(long), () => limiter.peek(long), () => limiter.reset(long)]) {
      await expect(call()).rejects.toThrow(SluiceInputError);
      await expect(call()).rejects.toThrow("[sluice] key must be at most 4096 characters; got 5000");
    }
    await expect(limiter.limit("k".repeat(4097))).rejects.toThrow(SluiceInputError);
    expect(calls).toEqual({ consume: 0, peek: 0, reset: 0, refund: 0, release: 0 });
    expect(await limiter.limit("k".repeat(4096))).toMatchObject({ allowed: true, reason: "ok" });
  });
});

// ---------------------------------------------------------------------------------------------
// toDecision (the binding policy)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Store failures
// ---------------------------------------------------------------------------------------------

type Mode = "ok" | "reject" | "throw" | "hang" | "late-reject" | "late-resolve";

/** A real store that can break: delegates to a MemoryStore when "ok", else fails the chosen way. */
class BreakableStore implements Store {
  mode: Mode = "ok";
  error: unknown = new Error("ECONNREFUSED");
  calls = 0;
  readonly inner = new MemoryStore(); // the (faked) Date.now clock

  bind(namespace: StoreNamespace): BoundStore {
    const bound = this.inner.bind(namespace);
    const run = <T>(work: () => T): Promise<T> => {
      this.calls++;
      switch (this.mode) {
        case "ok":
          return Promise.resolve(work());
        case "reject":
          return Promise.reject(this.error);
        case "throw":
          throw this.error;
        case "hang":
          return new Promise<T>(() => {});
        case "late-reject":
          return new Promise<T>((_, reject) => setTimeout(() => reject(this.error), 100));
        case "late-resolve":
          return new Promise<T>((resolve) => setTimeout(() => resolve(work()), 100));
      }
    };
    return {
      // the memory store answers synchronously
      consume: (key, cost) => run(() => bound.consume(key, cost) as StoreResult),
      peek: (key) => run(() => bound.peek(key) as StoreResult),
      reset: (key) => run(() => bound.reset(key) as void),
      refund: (key, cost, charge) => run(() => bound.refund(key, cost, charge) as StoreResult),
      release: (key, lease) => run(() => bound.release(key, lease) as StoreResult),
    };
  }
}

describe("onStoreError", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const limit2 = fixedWindow({ limit: 2, window: "1m" });

  function setup(options: Partial<RateLimiterOptions> = {}) {
    const store = new BreakableStore();
    const failures: unknown[] = [];
    const limiter = new RateLimiter({ store, limits: limit2, onStoreFailure: (e) => failures.push(e), ...options });
    return { store, limiter, failures };
  }

  it.each(["reject", "throw"] as const)(
    '"fallback" (default), store that %ss: same limits in a per-instance memory store, reason "store-error"',
    async (mode) => {
      const { store, limiter, failures } = setup();
      expect(limiter.onStoreError).toBe("fallback");
      store.mode = mode;
      const decisions = [await limiter.limit("k"), await limiter.limit("k"), await limiter.limit("k")];
      expect(decisions.map((d) => [d.allowed, d.remaining, d.reason])).toEqual([
        [true, 1, "store-error"],
        [true, 0, "store-error"],
        [false, 0, "store-error"],
      ]);
      expect(decisions[2]).toMatchObject({ retryAfterMs: 18_000, resetAt: T0 + 18_000, now: T0, policy: "2-per-1m" });
      expect(failures).toEqual([store.error, store.error, store.error]);
      expect(store.inner.size).toBe(0); // nothing reached the real store
      // another key has its own fallback counts
      expect((await limiter.limit("other")).remaining).toBe(1);
    },
  );

  it("when the store recovers, decisions come from it again; the fallback keeps its counts for the next outage", async () => {
    const { store, limiter } = setup();
    store.mode = "reject";
    await limiter.limit("k");
    await limiter.limit("k");
    store.mode = "ok";
    const back = await limiter.limit("k");
    expect(back).toMatchObject({ allowed: true, remaining: 1, reason: "ok" }); // the store's own (fresh) count
    expect(await limiter.peek("k")).toMatchObject({ remaining: 1, reason: "ok" });
    expect(store.inner.size).toBe(1);
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
  });

  it("each limiter has its own fallback", async () => {
    const store = new BreakableStore();
    const a = new RateLimiter({ store, limits: limit2 });
    const b = new RateLimiter({ store, limits: limit2 });
    store.mode = "reject";
    await a.limit("k");
    await a.limit("k");
    expect((await a.limit("k")).allowed).toBe(false);
    expect(await b.limit("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
  });

  it("peek falls back too, consuming nothing", async () => {
    const { store, limiter } = setup();
    store.mode = "reject";
    await limiter.limit("k");
    expect(await limiter.peek("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
    expect(await limiter.peek("k")).toMatchObject({ remaining: 1 });
  });

  it('"allow": fails open with reason "store-error"', async () => {
    const { store, limiter, failures } = setup({ onStoreError: "allow" });
    store.mode = "reject";
    for (let i = 0; i < 5; i++) {
      const d = await limiter.limit("k");
      expect(d).toMatchObject({ allowed: true, reason: "store-error", limit: 2, remaining: 2, retryAfterMs: 0, delayMs: 0, resetAt: T0, now: T0 });
      expect(d.policies).toEqual([{ policy: "2-per-1m", allowed: true, limit: 2, remaining: 2, resetAt: T0, retryAfterMs: 0, delayMs: 0, refillAt: T0 }]);
    }
    expect(failures).toHaveLength(5);
  });

  it('"deny": fails closed with reason "store-error"', async () => {
    const { store, limiter } = setup({ onStoreError: "deny", limits: [limit2, tokenBucket({ capacity: 5, refillRate: 1 })] });
    store.mode = "throw";
    const d = await limiter.limit("k");
    expect(STORE_FAILURE_RETRY_MS).toBe(1000);
    expect(d).toMatchObject({
      allowed: false,
      reason: "store-error",
      policy: "2-per-1m",
      limit: 2,
      remaining: 0,
      retryAfterMs: 1000,
      resetAt: T0 + 1000,
      now: T0,
    });
    expect(d.policies.map((r) => [r.policy, r.allowed, r.remaining, r.retryAfterMs])).toEqual([
      ["2-per-1m", false, 0, 1000],
      ["5-burst-1-per-1s", false, 0, 1000],
    ]);
    store.mode = "ok";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok" });
  });

  it.each([
    ["fallback", { allowed: true, remaining: 1 }],
    ["allow", { allowed: true, remaining: 2 }],
    ["deny", { allowed: false, remaining: 0 }],
  ] as const)('timeoutMs with a hanging store is a failure with reason "timeout" (%s)', async (onStoreError, expected) => {
    const { store, limiter, failures } = setup({ onStoreError, timeoutMs: 50 });
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(49);
    expect(decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(decision).toMatchObject({ ...expected, reason: "timeout" });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
    expect(failures[0]).toBeInstanceOf(SluiceError);
    expect(failures[0]).toMatchObject({ name: "SluiceTimeoutError", message: "[sluice] store did not answer within timeoutMs (50 ms)" });
  });

  it("the default timeoutMs is 1000 ms for an asynchronous store: a hung call becomes a SluiceTimeoutError", async () => {
    const { store, limiter, failures } = setup();
    expect(limiter.timeoutMs).toBe(1000);
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(999);
    expect(decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(decision).toMatchObject({ allowed: true, remaining: 1, reason: "timeout" }); // the fallback
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
    expect((failures[0] as Error).message).toBe("[sluice] store did not answer within timeoutMs (1000 ms)");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("with the real clock: timeoutMs 50 over a hung store gives reason \"timeout\" and a SluiceTimeoutError", async () => {
    vi.useRealTimers();
    const { store, limiter, failures } = setup({ timeoutMs: 50, onStoreError: "deny" });
    store.mode = "hang";
    const started = Date.now();
    const d = await limiter.limit("k");
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(d).toMatchObject({ allowed: false, reason: "timeout" });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(SluiceTimeoutError);
  });

  it("timeoutMs: false never times out and sets no timer", async () => {
    const { store, limiter, failures } = setup({ timeoutMs: false });
    expect(limiter.timeoutMs).toBe(false);
    store.mode = "hang";
    let decision: unknown;
    void limiter.limit("k").then((d) => (decision = d));
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(decision).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    expect(failures).toEqual([]);
    // a slow answer is used whenever it comes
    store.mode = "late-resolve";
    const late = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(100);
    expect(await late).toMatchObject({ allowed: true, reason: "ok", remaining: 1 });
  });

  it("a synchronous store is never wrapped in a timer", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: limit2 });
    expect(limiter.timeoutMs).toBe(1000);
    const pending = limiter.limit("k");
    expect(vi.getTimerCount()).toBe(0);
    expect(await pending).toMatchObject({ reason: "ok" });
  });

  it("a SluiceStoreError from the store is a store failure, not an exception", async () => {
    const { store, limiter, failures } = setup();
    store.mode = "reject";
    store.error = new SluiceStoreError("[sluice] [test] malformed reply");
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
    expect(failures).toEqual([store.error]);
  });

  it("a store that answers within timeoutMs is used, and no timer is left behind", async () => {
    const { store, limiter } = setup({ timeoutMs: 50 });
    expect(await limiter.limit("k")).toMatchObject({ reason: "ok", remaining: 1 });
    expect(vi.getTimerCount()).toBe(0);
    store.mode = "reject";
    expect((await limiter.limit("k")).reason).toBe("store-error");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an answer or a failure that arrives after the timeout is ignored (and never unhandled)", async () => {
    const { store, limiter, failures } = setup({ timeoutMs: 10 });
    store.mode = "late-reject";
    const first = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(10);
    expect((await first).reason).toBe("timeout");
    store.mode = "late-resolve";
    const second = limiter.limit("k");
    await vi.advanceTimersByTimeAsync(10);
    expect((await second).reason).toBe("timeout");
    await vi.advanceTimersByTimeAsync(200); // the late rejection and the late answer land here
    expect(failures).toHaveLength(2);
    expect(store.inner.size).toBe(1); // the late consume did run in the store
  });

  it("a throwing onStoreFailure does not turn a decision into an exception", async () => {
    const store = new BreakableStore();
    const limiter = new RateLimiter({
      store,
      limits: limit2,
      onStoreFailure: () => {
        throw new Error("logger down");
      },
    });
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
  });

  it.each(["fallback", "allow", "deny"] as const)("SluiceInputError and SluiceConfigError from the store are never swallowed (%s)", async (onStoreError) => {
    const { store, limiter, failures } = setup({ onStoreError });
    store.mode = "reject";
    store.error = new SluiceInputError("[sluice] [redis] key must be shorter", { option: "key" });
    await expect(limiter.limit("k")).rejects.toBe(store.error);
    store.mode = "throw";
    await expect(limiter.peek("k")).rejects.toBe(store.error);
    store.error = new SluiceConfigError("[sluice] [redis] policies must be …", { option: "policies" });
    await expect(limiter.limit("k")).rejects.toBe(store.error);
    expect(failures).toEqual([]);
  });

  it("bad input is rejected before the store is asked, even when the store is down and fails open", async () => {
    const { store, limiter } = setup({ onStoreError: "allow" });
    store.mode = "reject";
    await expect(limiter.limit("k", { cost: 0 })).rejects.toThrow(SluiceInputError);
    await expect(limiter.limit("", { cost: 1 })).rejects.toThrow(SluiceInputError);
    expect(store.calls).toBe(0);
  });

  it("reset rejects when the store fails, and clears the fallback too", async () => {
    const { store, limiter } = setup({ timeoutMs: 50 });
    store.mode = "reject";
    await expect(limiter.reset("k")).rejects.toBe(store.error);
    store.mode = "throw";
    await expect(limiter.reset("k")).rejects.toBe(store.error);
    store.mode = "hang";
    const pending = limiter.reset("k");
    const settled = expect(pending).rejects.toThrow("[sluice] store did not answer within timeoutMs (50 ms)");
    await vi.advanceTimersByTimeAsync(50);
    await settled;

    // consume through the fallback, then reset while the store is up: both forget the key
    store.mode = "reject";
    await limiter.limit("k");
    await limiter.limit("k");
    store.mode = "ok";
    await limiter.limit("k");
    await limiter.reset("k");
    expect((await limiter.peek("k")).remaining).toBe(2);
    store.mode = "reject";
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, remaining: 1, reason: "store-error" });
  });
});

describe("limit, peek and reset against a healthy store", () => {
  it("reset forgets every policy's state for the key only", async () => {
    const limits: Policy[] = [fixedWindow({ limit: 3, window: "1m" }), slidingLog({ limit: 5, window: "1h" })];
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits });
    await limiter.limit("a", { cost: 3 });
    await limiter.limit("b", { cost: 2 });
    expect((await limiter.limit("a")).allowed).toBe(false);
    await limiter.reset("a");
    expect((await limiter.peek("a")).policies.map((r) => r.remaining)).toEqual([3, 5]);
    expect((await limiter.peek("b")).policies.map((r) => r.remaining)).toEqual([1, 3]);
    await limiter.reset("never-seen"); // no error
  });

  it("limiters with different prefixes never share state", async () => {
    const store = new MemoryStore({ clock: () => T0 });
    const limits = fixedWindow({ limit: 2, window: "1m" });
    const a = new RateLimiter({ store, limits, prefix: "a" });
    const b = new RateLimiter({ store, limits, prefix: "b" });
    await a.limit("k", { cost: 2 });
    expect((await b.limit("k")).remaining).toBe(1);
    expect((await a.peek("k")).remaining).toBe(0);
  });
});

describe("hand-made policies", () => {
  it("RateLimiter accepts only policies whose parameters the algorithms can compute with", () => {
    const good = fixedWindow({ limit: 3, window: "1m" });
    expect(() => new RateLimiter({ limits: good })).not.toThrow();
    const bad: unknown[] = [
      { kind: "fixedWindow", name: "x" },
      { ...good, windowMs: 1.5 },
      { ...good, limit: -1 },
      { ...good, kind: "slidingWindow", limit: 2 ** 40, windowMs: 2 ** 31 - 1 },
      { ...tokenBucket({ capacity: 3, refillRate: 1 }), emissionIntervalUs: 0 },
      { ...leakyBucket({ rate: 1, period: "1s", burst: 2 }), queue: -1 },
      { ...leakyBucket({ rate: 1, period: "1s", burst: 2 }), limit: 3 },
      { ...good, name: "has space" },
      { ...good, kind: "mystery" },
    ];
    for (const policy of bad) {
      expect(() => new RateLimiter({ limits: policy as never }), JSON.stringify(policy)).toThrow(/^\[sluice\] limits must be a policy from fixedWindow\(\), .* or a list of them; got an object$/);
    }
  });
});
