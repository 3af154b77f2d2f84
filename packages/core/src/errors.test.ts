/**
 * Errors a program can match: every error has its class's `code`, and every configuration or input
 * error the `option` it is about. One row per option (or argument) of every factory, constructor
 * and method of core: the bad value, the class and the exact `option`. The messages themselves are
 * pinned where each feature is tested (factories.test.ts, limiter.test.ts, guard.test.ts,
 * store.test.ts, ...); here each row also checks the one message format, `[sluice] <option> …`.
 * And the classes themselves: one base, their names and prefix, a cause passed through, and
 * `instanceof` that holds across two copies of the module.
 */
import { describe, expect, it } from "vitest";
import { joinOption, nestOptionError, tagged } from "./errors.js";
import {
  type Decision,
  MemoryStore,
  RateLimiter,
  SluiceConfigError,
  SluiceError,
  type SluiceErrorCode,
  SluiceInputError,
  SluiceStoreError,
  SluiceTimeoutError,
  type Store,
  clientIp,
  concurrency,
  fixedWindow,
  leakyBucket,
  normalizeIp,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "./index.js";
import { decideState, policyFromData, refundState, releaseState } from "./store.js";

type ErrorClass = typeof SluiceConfigError | typeof SluiceInputError;
/** [what is wrong, the call, the class it throws, the option it names] */
type Row = [label: string, call: () => unknown, errorClass: ErrorClass, option: string];

const CODES = new Map<ErrorClass, SluiceErrorCode>([
  [SluiceConfigError, "SLUICE_CONFIG"],
  [SluiceInputError, "SLUICE_INPUT"],
]);

/** The error `call` throws or rejects with; fails when it does neither. */
async function caught(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to throw");
}

async function expectRow(call: () => unknown, errorClass: ErrorClass, option: string): Promise<void> {
  const error = await caught(call);
  expect(error).toBeInstanceOf(errorClass);
  expect(error).toBeInstanceOf(SluiceError);
  const { code, option: named, message } = error as SluiceConfigError;
  expect({ code, option: named }).toEqual({ code: CODES.get(errorClass), option });
  // one format: core's messages carry no package tag and start with the option
  expect(message.startsWith(`[sluice] ${option} `), message).toBe(true);
}

const window = fixedWindow({ limit: 5, window: "1m" });

describe("error classes", () => {
  it("each class has its stable code; config and input errors carry their option", () => {
    const cases: [SluiceError, SluiceErrorCode][] = [
      [new SluiceError("x"), "SLUICE_ERROR"],
      [new SluiceConfigError("limit must be …", { option: "limit" }), "SLUICE_CONFIG"],
      [new SluiceInputError("cost must be …", { option: "cost" }), "SLUICE_INPUT"],
      [new SluiceTimeoutError("x"), "SLUICE_TIMEOUT"],
      [new SluiceStoreError("x"), "SLUICE_STORE"],
    ];
    for (const [error, code] of cases) expect(error.code).toBe(code);
    const cause = new Error("underneath");
    const config = new SluiceConfigError("limits[1].window must be …", { option: "limits[1].window", cause });
    expect([config.option, config.cause, config.message]).toEqual(["limits[1].window", cause, "[sluice] limits[1].window must be …"]);
    expect(new SluiceInputError("key must be …", { option: "key" }).option).toBe("key");
  });

  it("code and option survive a copy of the module (they are own properties), and show in JSON", async () => {
    const second = "./errors.js?codes-copy";
    const copy = (await import(/* @vite-ignore */ second)) as typeof import("./errors.js");
    const error = new copy.SluiceConfigError("limit must be …", { option: "limit" });
    expect(error).toBeInstanceOf(SluiceConfigError);
    expect(JSON.parse(JSON.stringify(error))).toEqual({ name: "SluiceConfigError", code: "SLUICE_CONFIG", option: "limit" });
  });

  it("joinOption builds paths", () => {
    expect(joinOption("limits[1]", "window")).toBe("limits[1].window");
    expect(joinOption("policies", "[0]")).toBe("policies[0]");
    expect(joinOption("tiers.pro", "limits[0].capacity")).toBe("tiers.pro.limits[0].capacity");
    expect(joinOption("", "limit")).toBe("limit");
    expect(joinOption("block", "")).toBe("block");
  });

  it("tagged writes a package's tag; core's messages have none", () => {
    expect(tagged("redis", "clock must be …")).toBe("[sluice] [redis] clock must be …");
    expect(tagged(undefined, "clock must be …")).toBe("clock must be …");
  });

  it("nestOptionError puts an error under a holder's path and tag, keeping its class and the original as cause", () => {
    const inner = new SluiceConfigError("limit must be a positive safe integer; got 0", { option: "limit" });
    const nested = nestOptionError(inner, "policies[2]", "cloudflare") as SluiceConfigError;
    expect(nested).toBeInstanceOf(SluiceConfigError);
    expect([nested.option, nested.message, nested.cause]).toEqual([
      "policies[2].limit",
      "[sluice] [cloudflare] policies[2].limit must be a positive safe integer; got 0",
      inner,
    ]);
    // a tag only: the path stays, the tag is replaced
    const retagged = nestOptionError(new SluiceInputError("[sluice] [x] key must be …", { option: "key" }), "", "hono") as SluiceInputError;
    expect(retagged).toBeInstanceOf(SluiceInputError);
    expect([retagged.option, retagged.message]).toEqual(["key", "[sluice] [hono] key must be …"]);
    // anything else passes through untouched
    const other = new TypeError("x");
    expect(nestOptionError(other, "a", "b")).toBe(other);
    const timeout = new SluiceTimeoutError("x");
    expect(nestOptionError(timeout, "a", "b")).toBe(timeout);
  });
});

describe("every factory option names itself", () => {
  const windowFactories = [
    ["fixedWindow", fixedWindow],
    ["slidingWindow", slidingWindow],
    ["slidingLog", slidingLog],
  ] as const;
  const rows: Row[] = [];
  for (const [kind, make] of windowFactories) {
    const m = make as (o: unknown) => unknown;
    rows.push(
      [`${kind}: options`, () => m(undefined), SluiceConfigError, "options"],
      [`${kind}: limit`, () => m({ limit: 0, window: "1m" }), SluiceConfigError, "limit"],
      [`${kind}: window`, () => m({ limit: 1, window: "1y" }), SluiceConfigError, "window"],
      [`${kind}: window too long`, () => m({ limit: 1, window: 2 ** 31 }), SluiceConfigError, "window"],
      [`${kind}: name`, () => m({ limit: 1, window: "1m", name: "a b" }), SluiceConfigError, "name"],
      [`${kind}: block`, () => m({ limit: 1, window: "1m", block: "soon" }), SluiceConfigError, "block"],
      [`${kind}: block not a duration or object`, () => m({ limit: 1, window: "1m", block: [] }), SluiceConfigError, "block"],
      [`${kind}: block.base`, () => m({ limit: 1, window: "1m", block: { base: 0 } }), SluiceConfigError, "block.base"],
      [`${kind}: block.factor`, () => m({ limit: 1, window: "1m", block: { base: "1m", factor: 0.5 } }), SluiceConfigError, "block.factor"],
      [`${kind}: block.max`, () => m({ limit: 1, window: "1m", block: { base: "1m", max: "1y" } }), SluiceConfigError, "block.max"],
      [`${kind}: block.max below block.base`, () => m({ limit: 1, window: "1m", block: { base: "1m", max: "1s" } }), SluiceConfigError, "block.max"],
      [`${kind}: an unknown block option`, () => m({ limit: 1, window: "1m", block: { base: "1m", maximum: "1h" } }), SluiceConfigError, "block.maximum"],
    );
  }
  rows.push(
    ["slidingWindow: limit × window beyond 2^53", () => slidingWindow({ limit: 2 ** 30, window: "1d" }), SluiceConfigError, "limit"],
    ["tokenBucket: options", () => tokenBucket(null as never), SluiceConfigError, "options"],
    ["tokenBucket: capacity", () => tokenBucket({ capacity: 0, refillRate: 1 }), SluiceConfigError, "capacity"],
    ["tokenBucket: refillRate", () => tokenBucket({ capacity: 1, refillRate: 1.5 }), SluiceConfigError, "refillRate"],
    ["tokenBucket: interval", () => tokenBucket({ capacity: 1, refillRate: 1, interval: "1w" as never }), SluiceConfigError, "interval"],
    ["tokenBucket: name", () => tokenBucket({ capacity: 1, refillRate: 1, name: "" }), SluiceConfigError, "name"],
    ["tokenBucket: a capacity that never drains", () => tokenBucket({ capacity: 2 ** 40, refillRate: 1, interval: "1d" }), SluiceConfigError, "capacity"],
    ["tokenBucket: block.base", () => tokenBucket({ capacity: 1, refillRate: 1, block: { base: "x" as never } }), SluiceConfigError, "block.base"],
    ["leakyBucket: options", () => leakyBucket("10/s" as never), SluiceConfigError, "options"],
    ["leakyBucket: rate", () => leakyBucket({ rate: -1, period: "1s", burst: 1 }), SluiceConfigError, "rate"],
    ["leakyBucket: period", () => leakyBucket({ rate: 1, period: 0, burst: 1 }), SluiceConfigError, "period"],
    ["leakyBucket: burst", () => leakyBucket({ rate: 1, period: "1s", burst: "5" as never }), SluiceConfigError, "burst"],
    ["leakyBucket: queue", () => leakyBucket({ rate: 1, period: "1s", burst: 1, queue: -1 }), SluiceConfigError, "queue"],
    ["leakyBucket: name", () => leakyBucket({ rate: 1, period: "1s", burst: 1, name: "a,b" }), SluiceConfigError, "name"],
    ["leakyBucket: a burst that never drains", () => leakyBucket({ rate: 1, period: "1d", burst: 2 ** 40 }), SluiceConfigError, "burst"],
    ["leakyBucket: block.factor", () => leakyBucket({ rate: 1, period: "1s", burst: 1, block: { base: "1s", factor: "2" as never } }), SluiceConfigError, "block.factor"],
    ["concurrency: options", () => concurrency(undefined as never), SluiceConfigError, "options"],
    ["concurrency: limit", () => concurrency({ limit: 0 }), SluiceConfigError, "limit"],
    ["concurrency: lease", () => concurrency({ limit: 1, lease: "soon" as never }), SluiceConfigError, "lease"],
    ["concurrency: name", () => concurrency({ limit: 1, name: "a;b" }), SluiceConfigError, "name"],
    ["concurrency: block (not taken)", () => concurrency({ limit: 1, block: "1m" } as never), SluiceConfigError, "block"],
    ["policyFromData: kind", () => policyFromData({ kind: "mystery", name: "x" }), SluiceConfigError, "kind"],
    ["policyFromData: a field, named by its factory", () => policyFromData({ kind: "fixedWindow", name: "x", limit: 0, window: 1000 }), SluiceConfigError, "limit"],
  );
  it.each(rows)("%s", (_label, call, errorClass, option) => expectRow(call, errorClass, option));
});

/** A store whose bound namespace lacks `method`. */
function storeWithout(method: "refund" | "release"): Store {
  const memory = new MemoryStore();
  return {
    bind(namespace) {
      const bound = memory.bind(namespace);
      const { [method]: _dropped, ...rest } = bound as unknown as Record<string, unknown>;
      return rest as never;
    },
  };
}

describe("every RateLimiter option names itself", () => {
  const rows: Row[] = [
    ["options", () => new RateLimiter(undefined as never), SluiceConfigError, "options"],
    ["limits missing", () => new RateLimiter({} as never), SluiceConfigError, "limits"],
    ["limits not a policy", () => new RateLimiter({ limits: "100-per-1m" } as never), SluiceConfigError, "limits"],
    ["limits empty", () => new RateLimiter({ limits: [] }), SluiceConfigError, "limits"],
    ["limits[1] not a policy", () => new RateLimiter({ limits: [window, { limit: 5 }] as never }), SluiceConfigError, "limits[1]"],
    ["limits[1] a hand-made policy", () => new RateLimiter({ limits: [window, { ...window, name: "b", limit: -1 }] }), SluiceConfigError, "limits[1]"],
    ["limits[1].name a second time", () => new RateLimiter({ limits: [window, fixedWindow({ limit: 5, window: "1m" })] }), SluiceConfigError, "limits[1].name"],
    ["prefix", () => new RateLimiter({ limits: window, prefix: "my app" }), SluiceConfigError, "prefix"],
    ["tier", () => new RateLimiter({ limits: window, tier: "" }), SluiceConfigError, "tier"],
    ["store", () => new RateLimiter({ limits: window, store: {} as never }), SluiceConfigError, "store"],
    ["store without refund", () => new RateLimiter({ limits: window, store: storeWithout("refund") }), SluiceConfigError, "store"],
    ["store without release", () => new RateLimiter({ limits: window, store: storeWithout("release") }), SluiceConfigError, "store"],
    ["onStoreError", () => new RateLimiter({ limits: window, onStoreError: "open" as never }), SluiceConfigError, "onStoreError"],
    ["onStoreFailure", () => new RateLimiter({ limits: window, onStoreFailure: "log" as never }), SluiceConfigError, "onStoreFailure"],
    ["timeoutMs", () => new RateLimiter({ limits: window, timeoutMs: 0 }), SluiceConfigError, "timeoutMs"],
    ["mode", () => new RateLimiter({ limits: window, mode: "shadow" as never }), SluiceConfigError, "mode"],
    ["denyCache", () => new RateLimiter({ limits: window, denyCache: 5 as never }), SluiceConfigError, "denyCache"],
    ["denyCache.maxKeys", () => new RateLimiter({ limits: window, denyCache: { maxKeys: 0 } }), SluiceConfigError, "denyCache.maxKeys"],
    ["denyCache.clock", () => new RateLimiter({ limits: window, denyCache: { clock: 1 as never } }), SluiceConfigError, "denyCache.clock"],
    ["an unknown denyCache option", () => new RateLimiter({ limits: window, denyCache: { ttl: 5 } as never }), SluiceConfigError, "denyCache.ttl"],
  ];
  it.each(rows)("%s", (_label, call, errorClass, option) => expectRow(call, errorClass, option));
});

describe("every argument of limit(), peek(), reset(), refund() and release() names itself", () => {
  const limiter = new RateLimiter({ limits: [window, concurrency({ limit: 2 })] });
  const other = new RateLimiter({ limits: window, prefix: "other" });
  const rows: Row[] = [
    ["limit: key empty", () => limiter.limit(""), SluiceInputError, "key"],
    ["limit: key not a string", () => limiter.limit(42 as never), SluiceInputError, "key"],
    ["limit: key too long", () => limiter.limit("k".repeat(5000)), SluiceInputError, "key"],
    ["limit: key with a lone surrogate", () => limiter.limit("a\ud800"), SluiceInputError, "key"],
    ["limit: options", () => limiter.limit("k", 5 as never), SluiceInputError, "options"],
    ["limit: cost 0", () => limiter.limit("k", { cost: 0 }), SluiceInputError, "cost"],
    ["limit: cost \"1\"", () => limiter.limit("k", { cost: "1" as never }), SluiceInputError, "cost"],
    ["peek: key", () => limiter.peek(""), SluiceInputError, "key"],
    ["reset: key", () => limiter.reset(null as never), SluiceInputError, "key"],
    ["refund: key", () => limiter.refund("", { cost: 1 }), SluiceInputError, "key"],
    ["refund: options", () => limiter.refund("k", null as never), SluiceInputError, "options"],
    ["refund: cost", () => limiter.refund("k", { cost: -1 }), SluiceInputError, "cost"],
    ["refund: decision not a decision", () => limiter.refund("k", { decision: 5 as never }), SluiceInputError, "decision"],
    ["refund: decision of another limiter", async () => limiter.refund("k", { decision: await other.limit("k") }), SluiceInputError, "decision"],
    ["refund: decision of another key", async () => limiter.refund("k", { decision: await limiter.limit("j") }), SluiceInputError, "decision"],
    ["refund: decision rebuilt from JSON", async () => limiter.refund("k", { decision: JSON.parse(JSON.stringify(await limiter.limit("k"))) as Decision }), SluiceInputError, "decision"],
    ["release: key", () => limiter.release("", "1"), SluiceInputError, "key"],
    ["release: lease text", () => limiter.release("k", "abc"), SluiceInputError, "lease"],
    ["release: lease object", () => limiter.release("k", {} as never), SluiceInputError, "lease"],
  ];
  it.each(rows)("%s", (_label, call, errorClass, option) => expectRow(call, errorClass, option));
});

describe("MemoryStore, its bind() and the pure state functions name their options and arguments", () => {
  const rows: Row[] = [
    ["MemoryStore: options", () => new MemoryStore(5 as never), SluiceConfigError, "options"],
    ["MemoryStore: maxKeys", () => new MemoryStore({ maxKeys: 0 }), SluiceConfigError, "maxKeys"],
    ["MemoryStore: clock", () => new MemoryStore({ clock: "now" as never }), SluiceConfigError, "clock"],
    ["bind: namespace", () => new MemoryStore().bind(null as never), SluiceConfigError, "namespace"],
    ["bind: prefix", () => new MemoryStore().bind({ prefix: "", policies: [window] }), SluiceConfigError, "prefix"],
    ["bind: tier", () => new MemoryStore().bind({ prefix: "a", tier: "a b", policies: [window] }), SluiceConfigError, "tier"],
    ["bind: policies", () => new MemoryStore().bind({ prefix: "a", policies: window as never }), SluiceConfigError, "policies"],
    ["bind: policies[0]", () => new MemoryStore().bind({ prefix: "a", policies: [{}] as never }), SluiceConfigError, "policies[0]"],
    ["bind: policies[1].name", () => new MemoryStore().bind({ prefix: "a", policies: [window, window] }), SluiceConfigError, "policies[1].name"],
    ["decideState: cost", () => decideState([window], undefined, 1_000_000, 0), SluiceInputError, "cost"],
    ["decideState: lease", () => decideState([window], undefined, 1_000_000, 1, -1), SluiceInputError, "lease"],
    ["refundState: cost", () => refundState([window], undefined, 1_000_000, 1.5, undefined), SluiceInputError, "cost"],
    ["releaseState: lease", () => releaseState([window], undefined, 1_000_000, 0), SluiceInputError, "lease"],
  ];
  it.each(rows)("%s", (_label, call, errorClass, option) => expectRow(call, errorClass, option));
});

describe("clientIp and normalizeIp name their options", () => {
  const request = new Request("https://api.test/");
  const rows: Row[] = [
    ["clientIp: options", () => clientIp(request, null as never), SluiceConfigError, "options"],
    ["clientIp: trust", () => clientIp(request, { trust: "aws" as never }), SluiceConfigError, "trust"],
    ["clientIp: ipv6Subnet", () => clientIp(request, { trust: "cloudflare", ipv6Subnet: 0 }), SluiceConfigError, "ipv6Subnet"],
    ["normalizeIp: options", () => normalizeIp("::1", 64 as never), SluiceConfigError, "options"],
    ["normalizeIp: ipv6Subnet", () => normalizeIp("::1", { ipv6Subnet: 129 }), SluiceConfigError, "ipv6Subnet"],
  ];
  it.each(rows)("%s", (_label, call, errorClass, option) => expectRow(call, errorClass, option));
});

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
