/**
 * instrumentStore over MemoryStore and over failing stores: exact spans (names, kind, attributes,
 * status, exception events), exact histogram counts and attributes; the store's behaviour unchanged.
 */
import { type Context, type ContextManager, ROOT_CONTEXT, SpanKind, SpanStatusCode, context, trace } from "@opentelemetry/api";
import { MemoryStore, RateLimiter, SluiceConfigError, SluiceStoreError, type Store, concurrency, fixedWindow, slidingWindow, tokenBucket } from "@sluice/core";
import type { StoreNamespace } from "@sluice/core/store";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  INSTRUMENTATION_SCOPE,
  INSTRUMENTATION_VERSION,
  METRIC_SLUICE_STORE_DURATION,
  STORE_DURATION_BUCKETS,
  errorType,
  instrumentStore,
} from "./index.js";
import { startTestSdk } from "./test/sdk.js";

const T0 = 1_700_000_022_000;

/** The smallest context manager: the context given to with() is active while its function runs (synchronously). */
class SyncContextManager implements ContextManager {
  #current: Context = ROOT_CONTEXT;
  active(): Context {
    return this.#current;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const previous = this.#current;
    this.#current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.#current = previous;
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#current = ROOT_CONTEXT;
    return this;
  }
}
const sdk = startTestSdk();
const providers = { meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider };

afterEach(() => sdk.clearSpans());
afterAll(() => sdk.shutdown());

describe("instrumentStore over MemoryStore", () => {
  it("one CLIENT span per call with the outcome, one histogram measurement per call", async () => {
    const before = await sdk.histogram(METRIC_SLUICE_STORE_DURATION);
    expect(before).toEqual([]);
    const store = instrumentStore(new MemoryStore({ clock: () => T0 }), providers);
    const limiter = new RateLimiter({ store, prefix: "api", limits: fixedWindow({ limit: 2, window: "1m" }) });
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push(await limiter.limit("user:1"));
    await limiter.peek("user:1");
    await limiter.reset("user:1");
    expect(decisions.map((d) => [d.allowed, d.reason])).toEqual([
      [true, "ok"],
      [true, "ok"],
      [false, "limit"],
    ]);

    const base = { "sluice.store": "MemoryStore", "sluice.prefix": "api" };
    const consume = { ...base, "sluice.operation": "consume", "sluice.cost": 1, "sluice.policy": "2-per-1m" };
    expect(sdk.spans().map(({ name, kind, attributes, status, events, scope }) => ({ name, kind, attributes, status, events, scope }))).toEqual([
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume, "sluice.allowed": true, "sluice.reason": "ok", "sluice.remaining": 1 }, status: { code: SpanStatusCode.UNSET }, events: [], scope: INSTRUMENTATION_SCOPE },
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume, "sluice.allowed": true, "sluice.reason": "ok", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET }, events: [], scope: INSTRUMENTATION_SCOPE },
      // a denial is an outcome, not an error
      { name: "sluice.store consume", kind: SpanKind.CLIENT, attributes: { ...consume, "sluice.allowed": false, "sluice.reason": "limit", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET }, events: [], scope: INSTRUMENTATION_SCOPE },
      // peek: whether a cost-1 request would pass now
      { name: "sluice.store peek", kind: SpanKind.CLIENT, attributes: { ...base, "sluice.operation": "peek", "sluice.policy": "2-per-1m", "sluice.allowed": false, "sluice.reason": "limit", "sluice.remaining": 0 }, status: { code: SpanStatusCode.UNSET }, events: [], scope: INSTRUMENTATION_SCOPE },
      { name: "sluice.store reset", kind: SpanKind.CLIENT, attributes: { ...base, "sluice.operation": "reset" }, status: { code: SpanStatusCode.UNSET }, events: [], scope: INSTRUMENTATION_SCOPE },
    ]);

    const points = await sdk.histogram(METRIC_SLUICE_STORE_DURATION);
    expect(points.map(({ attributes, count }) => ({ attributes, count }))).toEqual([
      { attributes: { "sluice.store": "MemoryStore", "sluice.operation": "consume" }, count: 3 },
      { attributes: { "sluice.store": "MemoryStore", "sluice.operation": "peek" }, count: 1 },
      { attributes: { "sluice.store": "MemoryStore", "sluice.operation": "reset" }, count: 1 },
    ]);
    for (const p of points) {
      expect(p.boundaries).toEqual(STORE_DURATION_BUCKETS); // the instrument's advice
      expect(p.sum).toBeGreaterThanOrEqual(0);
      expect(p.sum).toBeLessThan(1); // seconds, not milliseconds
    }
    const descriptors = await sdk.descriptors();
    expect(descriptors.find((d) => d.name === METRIC_SLUICE_STORE_DURATION)).toMatchObject({
      scope: INSTRUMENTATION_SCOPE,
      version: INSTRUMENTATION_VERSION,
      unit: "s",
    });
  });

  it("tiers, costs and several policies: the binding policy, the tier on spans and on the histogram", async () => {
    const store = instrumentStore(new MemoryStore({ clock: () => T0 }), { ...providers, name: "local" });
    const limiter = new RateLimiter({
      store,
      tier: "pro",
      limits: [tokenBucket({ capacity: 10, refillRate: 1, name: "burst" }), slidingWindow({ limit: 6, window: "1m", name: "per-minute" })],
    });
    await limiter.limit("k", { cost: 5 });
    await limiter.limit("k", { cost: 20 });
    const spans = sdk.spans().map((s) => s.attributes);
    expect(spans).toEqual([
      {
        "sluice.store": "local",
        "sluice.tier": "pro",
        "sluice.prefix": "sluice",
        "sluice.operation": "consume",
        "sluice.cost": 5,
        "sluice.allowed": true,
        "sluice.policy": "per-minute", // the least remaining: 1 of 6, against 5 of 10
        "sluice.reason": "ok",
        "sluice.remaining": 1,
      },
      {
        "sluice.store": "local",
        "sluice.tier": "pro",
        "sluice.prefix": "sluice",
        "sluice.operation": "consume",
        "sluice.cost": 20,
        "sluice.allowed": false,
        "sluice.policy": "burst", // both deny a cost that can never pass; the first binds on ties
        "sluice.reason": "cost-exceeds-limit",
        "sluice.remaining": 5,
      },
    ]);
    const points = await sdk.histogram(METRIC_SLUICE_STORE_DURATION);
    expect(points.find((p) => p.attributes["sluice.store"] === "local")).toMatchObject({
      attributes: { "sluice.store": "local", "sluice.tier": "pro", "sluice.operation": "consume" },
      count: 2,
    });
  });

  it("changes nothing the limiter sees: synchronous answers stay synchronous, decisions are identical", async () => {
    const plain = new MemoryStore({ clock: () => T0 });
    const wrapped = instrumentStore(new MemoryStore({ clock: () => T0 }), providers);
    const namespace = { prefix: "p", policies: [fixedWindow({ limit: 3, window: "1m" })] };
    const bound = wrapped.bind(namespace);
    const answer = bound.consume("a", 1);
    expect(typeof (answer as { then?: unknown }).then).toBe("undefined"); // not a promise
    expect(answer).toEqual(plain.bind(namespace).consume("a", 1));

    const a = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: slidingWindow({ limit: 4, window: "10s" }) });
    const b = new RateLimiter({ store: instrumentStore(new MemoryStore({ clock: () => T0 }), providers), limits: slidingWindow({ limit: 4, window: "10s" }) });
    for (const [key, cost] of [["x", 1], ["x", 2], ["y", 4], ["x", 2], ["x", 1], ["y", 1]] as const) {
      const [da, db] = [await a.limit(key, { cost }), await b.limit(key, { cost })];
      expect({ ...db, pending: undefined }).toEqual({ ...da, pending: undefined });
    }
    // the deny cache stays off for a synchronous store, wrapped or not: no "cached-deny"
    for (let i = 0; i < 3; i++) expect((await b.limit("y")).reason).toBe("limit");
  });

  it("the span is the active span while the store runs", () => {
    context.setGlobalContextManager(new SyncContextManager());
    try {
      let active: string | undefined;
      const inner: Store = {
        bind: (ns) => {
          const bound = new MemoryStore({ clock: () => T0 }).bind(ns);
          return {
            consume: (key, cost) => {
              active = trace.getActiveSpan()?.spanContext().spanId;
              return bound.consume(key, cost);
            },
            peek: (key) => bound.peek(key),
            reset: (key) => bound.reset(key),
            refund: (key, cost, charge) => bound.refund(key, cost, charge),
            release: (key, lease) => bound.release(key, lease),
          };
        },
      };
      instrumentStore(inner, providers).bind({ prefix: "p", policies: [fixedWindow({ limit: 3, window: "1m" })] }).consume("k", 1);
      const [span] = sdk.spans();
      expect(active).toBeDefined();
      expect(active).toBe(span?.spanId);
    } finally {
      context.disable();
    }
  });
});

describe("instrumentStore over a failing store", () => {
  function failing(how: "throw" | "reject", error: unknown): Store {
    return {
      bind: () => ({
        consume: () => {
          if (how === "throw") throw error;
          return Promise.reject(error);
        },
        peek: () => Promise.reject(error),
        reset: () => Promise.reject(error),
        refund: () => Promise.reject(error),
        release: () => Promise.reject(error),
      }),
    };
  }

  it.each(["throw", "reject"] as const)("a store that fails (%s): ERROR status, error.type, the exception; the error passes through unchanged", async (how) => {
    const error = new SluiceStoreError("[sluice] [redis] malformed reply");
    const bound = instrumentStore(failing(how, error), { ...providers, name: `broken-${how}` }).bind({ prefix: "p", policies: [fixedWindow({ limit: 1, window: "1m" })] });
    let caught: unknown;
    try {
      await bound.consume("k", 1);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(error);
    expect(sdk.spans().map(({ name, attributes, status, events }) => ({ name, attributes, status, events }))).toEqual([
      {
        name: "sluice.store consume",
        attributes: { "sluice.store": `broken-${how}`, "sluice.prefix": "p", "sluice.operation": "consume", "sluice.cost": 1, "error.type": "SluiceStoreError" },
        status: { code: SpanStatusCode.ERROR, message: "[sluice] [redis] malformed reply" },
        events: ["exception"],
      },
    ]);
    const points = await sdk.histogram(METRIC_SLUICE_STORE_DURATION);
    expect(points.filter((p) => p.attributes["sluice.store"] === `broken-${how}`).map(({ attributes, count }) => ({ attributes, count }))).toEqual([
      { attributes: { "sluice.store": `broken-${how}`, "sluice.operation": "consume", "error.type": "SluiceStoreError" }, count: 1 },
    ]);
  });

  it("through a limiter: the decision falls back as before, the span says why", async () => {
    const limiter = new RateLimiter({ store: instrumentStore(failing("reject", new TypeError("fetch failed")), { ...providers, name: "down" }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    const decision = await limiter.limit("k");
    expect([decision.allowed, decision.reason]).toEqual([true, "store-error"]);
    expect(sdk.spans().map((s) => [s.name, s.attributes["error.type"], s.status])).toEqual([
      ["sluice.store consume", "TypeError", { code: SpanStatusCode.ERROR, message: "fetch failed" }],
    ]);
  });

  it("error.type: the class name, else _OTHER", () => {
    class ReplyError extends Error {}
    expect(errorType(new SluiceStoreError("x"))).toBe("SluiceStoreError");
    expect(errorType(new ReplyError("x"))).toBe("ReplyError");
    expect(errorType(Object.assign(new Error("x"), { name: "AbortError" }))).toBe("AbortError");
    expect(errorType(new Error("x"))).toBe("Error");
    expect(errorType("a string")).toBe("_OTHER");
    expect(errorType({})).toBe("_OTHER");
  });
});

describe("instrumentStore's arguments", () => {
  it.each([
    ["store", () => instrumentStore({} as Store), "[sluice] [otel] store must be a Store (an object with bind(namespace)); got [object Object]"],
    ["options", () => instrumentStore(new MemoryStore(), 5 as never), "[sluice] [otel] options must be an object; got 5"],
    ["meterProvider", () => instrumentStore(new MemoryStore(), { meterProvider: {} as never }), "[sluice] [otel] meterProvider must be an OpenTelemetry MeterProvider"],
    ["tracerProvider", () => instrumentStore(new MemoryStore(), { tracerProvider: 1 as never }), "[sluice] [otel] tracerProvider must be an OpenTelemetry TracerProvider"],
    ["name", () => instrumentStore(new MemoryStore(), { name: "" }), '[sluice] [otel] name must be a non-empty string; got ""'],
  ])("refuses a bad %s with a SluiceConfigError naming it", (option, make, message) => {
    expect(make).toThrow(SluiceConfigError);
    expect(make).toThrow(message);
    expect(make).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("forwards refund, as a span of its own", async () => {
    const inner = new MemoryStore({ clock: () => T0 });
    const refunds: unknown[][] = [];
    const store: Store = {
      bind(ns) {
        const bound = inner.bind(ns);
        return {
          consume: (k, c) => bound.consume(k, c),
          peek: (k) => bound.peek(k),
          reset: (k) => bound.reset(k),
          refund: (k, c, charge) => (refunds.push([k, c, charge]), bound.refund(k, c, charge)),
          release: (k, lease) => bound.release(k, lease),
        };
      },
    };
    const wrapped = instrumentStore(store, providers).bind({ prefix: "p", policies: [fixedWindow({ limit: 3, window: "1m" })] });
    const charge = { atMs: T0, marks: undefined };
    wrapped.refund("k", 2, charge);
    expect(refunds).toEqual([["k", 2, charge]]);
    expect(sdk.spans().map((s) => [s.name, s.attributes["sluice.cost"], s.attributes["sluice.allowed"]])).toEqual([["sluice.store refund", 2, true]]);
  });

  it("a store without refund or release (written before they were required) stays without them: the RateLimiter refuses it at construction", () => {
    const inner = new MemoryStore({ clock: () => T0 });
    const old = {
      bind(ns: StoreNamespace) {
        const bound = inner.bind(ns);
        return { consume: (k: string, c: number) => bound.consume(k, c), peek: (k: string) => bound.peek(k), reset: (k: string) => bound.reset(k) };
      },
    } as unknown as Store;
    const wrapped = instrumentStore(old, providers);
    const without = wrapped.bind({ prefix: "p", policies: [fixedWindow({ limit: 3, window: "1m" })] });
    expect(["refund" in without, "release" in without]).toEqual([false, false]);
    const refusal = (store: Store) => {
      try {
        new RateLimiter({ store, limits: fixedWindow({ limit: 3, window: "1m" }) });
      } catch (error) {
        return [error instanceof SluiceConfigError, (error as SluiceConfigError).option, (error as Error).message];
      }
      return undefined;
    };
    expect(refusal(wrapped)).toEqual(refusal(old));
    expect(refusal(wrapped)).toEqual([true, "store", expect.stringMatching(/without refund\(\)$/)]);
  });

  it("passes a concurrency lease through consume and forwards release, as a span of its own", async () => {
    const limiter = new RateLimiter({
      store: instrumentStore(new MemoryStore({ clock: () => T0 }), providers),
      limits: [concurrency({ limit: 1, name: "exports" })],
    });
    const held = await limiter.limit("k");
    expect([held.allowed, typeof held.lease]).toEqual([true, "string"]);
    expect((await limiter.limit("k")).allowed).toBe(false); // the wrapped store kept the lease
    expect((await limiter.release("k", held)).remaining).toBe(1);
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect(sdk.spans().map((s) => [s.name, s.attributes["sluice.allowed"], s.attributes["sluice.remaining"]])).toEqual([
      ["sluice.store consume", true, 0],
      ["sluice.store consume", false, 0],
      ["sluice.store release", true, 1],
      ["sluice.store consume", true, 0],
    ]);
  });
});

describe("instrumentStore passes reservations on", () => {
  /** Twelve requests a millisecond apart on one key: whether each was decided from a reservation. */
  const hotKey = async (store: Store) => {
    const local = { ms: 0 };
    const limiter = new RateLimiter({ store, prefix: "api", limits: fixedWindow({ limit: 1000, window: "1m" }), reserve: { clock: () => local.ms } });
    const reserved: boolean[] = [];
    for (let i = 0; i < 12; i++) {
      local.ms = i;
      const d = await limiter.limit("hot");
      await d.pending;
      reserved.push(d.reserved === true);
    }
    return reserved;
  };

  it("reserve() reaches a store that reserves, as a span of its own whose cost is the units asked: a traced limiter decides a hot key locally", async () => {
    const inner = new MemoryStore({ clock: () => T0 });
    // not a MemoryStore to the limiter: it reserves over it as over any other store
    const elsewhere: Store = { bind: (namespace) => inner.bind(namespace) };
    const reserved = await hotKey(instrumentStore(elsewhere, providers));
    expect(reserved.slice(-4)).toEqual([true, true, true, true]);
    const spans = sdk.spans().filter((s) => s.name === "sluice.store reserve");
    expect(spans.length).toBeGreaterThan(0);
    expect(spans[0]?.attributes).toEqual(expect.objectContaining({ "sluice.operation": "reserve", "sluice.prefix": "api", "sluice.cost": expect.any(Number) }));
  });

  it("not over a MemoryStore, where a limiter never reserves: traced, it stays the same", async () => {
    const store = instrumentStore(new MemoryStore({ clock: () => T0 }), providers);
    expect("reserve" in store.bind({ prefix: "p", policies: [fixedWindow({ limit: 3, window: "1m" })] })).toBe(false);
    expect(await hotKey(store)).toEqual(Array(12).fill(false));
    expect(sdk.spans().filter((s) => s.name === "sluice.store reserve")).toEqual([]);
  });
});

describe("instrumentStore passes overrides and manual blocks on", () => {
  it("control() reaches the store, as a span of its own: an override and a block set through a traced store apply", async () => {
    let now = T0;
    const inner = new MemoryStore({ clock: () => now });
    const limiter = new RateLimiter({ store: instrumentStore(inner, providers), prefix: "api", limits: fixedWindow({ limit: 2, window: "1m", name: "per-minute" }) });
    await limiter.setOverride("k", { scale: 2 }, { ttl: "1s" });
    expect(await limiter.getOverride("k")).toEqual({ scale: 2 });
    const scaled = await limiter.limit("k");
    expect([scaled.limit, scaled.remaining, scaled.override]).toEqual([4, 3, { scale: 2 }]);
    // the same record as the unwrapped store's
    const untraced = new RateLimiter({ store: inner, prefix: "api", limits: fixedWindow({ limit: 2, window: "1m", name: "per-minute" }) });
    expect(await untraced.getOverride("k")).toEqual({ scale: 2 });
    now += 1000;
    expect(await limiter.getOverride("k")).toBeUndefined();
    await limiter.block("k", "1m");
    const blocked = await limiter.limit("k");
    expect([blocked.allowed, blocked.reason, blocked.retryAfterMs]).toEqual([false, "blocked", 60_000]);
    await limiter.unblock("k");
    expect((await limiter.limit("k")).reason).toBe("ok");
    await limiter.clearOverride("k");

    const control = { "sluice.store": "MemoryStore", "sluice.prefix": "api", "sluice.operation": "control" };
    expect(sdk.spans().map((s) => [s.name, s.attributes])).toEqual([
      ["sluice.store control", control],
      ["sluice.store control", control],
      ["sluice.store consume", expect.objectContaining({ "sluice.allowed": true, "sluice.remaining": 3 })],
      ["sluice.store control", control],
      ["sluice.store control", control],
      ["sluice.store consume", expect.objectContaining({ "sluice.allowed": false, "sluice.reason": "blocked" })],
      ["sluice.store control", control],
      ["sluice.store consume", expect.objectContaining({ "sluice.allowed": true, "sluice.reason": "ok" })],
      ["sluice.store control", control],
    ]);
  });

  it("a store without control() stays without it: the limiter's override methods refuse it as they refuse the store itself", async () => {
    const inner = new MemoryStore({ clock: () => T0 });
    const old = {
      bind(ns: StoreNamespace) {
        const bound = inner.bind(ns);
        return {
          consume: (k: string, c: number) => bound.consume(k, c),
          peek: (k: string) => bound.peek(k),
          reset: (k: string) => bound.reset(k),
          refund: bound.refund.bind(bound),
          release: bound.release.bind(bound),
        };
      },
    } as unknown as Store;
    const limits = fixedWindow({ limit: 3, window: "1m" });
    expect("control" in instrumentStore(old, providers).bind({ prefix: "p", policies: [limits] })).toBe(false);
    const refusal = async (store: Store) => {
      try {
        await new RateLimiter({ store, limits }).setOverride("k", { scale: 2 });
      } catch (error) {
        return [error instanceof SluiceConfigError, (error as SluiceConfigError).option];
      }
      return undefined;
    };
    expect(await refusal(instrumentStore(old, providers))).toEqual(await refusal(old));
    expect(await refusal(old)).toEqual([true, "store"]);
  });
});

describe("instrumentStore keeps the store's extendTimeout", () => {
  const namespace: StoreNamespace = { prefix: "ext", policies: [fixedWindow({ limit: 1, window: "1m" })] };

  it("passes the default timeout's question on to a store that answers it (a busy Redis is waited for when traced too)", () => {
    const asked: [number, number][] = [];
    const inner: Store = {
      bind(ns) {
        const bound = new MemoryStore().bind(ns);
        return {
          ...bound,
          consume: bound.consume.bind(bound),
          peek: bound.peek.bind(bound),
          reset: bound.reset.bind(bound),
          refund: bound.refund.bind(bound),
          release: bound.release.bind(bound),
          extendTimeout(waitedMs: number, timeoutMs: number) {
            asked.push([waitedMs, timeoutMs]);
            return waitedMs < 3000 ? 1000 : 0;
          },
        };
      },
    };
    const wrapped = instrumentStore(inner, providers).bind(namespace);
    expect(wrapped.extendTimeout?.(1000, 1000)).toBe(1000);
    expect(wrapped.extendTimeout?.(5000, 1000)).toBe(0);
    expect(asked).toEqual([
      [1000, 1000],
      [5000, 1000],
    ]);
  });

  it("adds none to a store that has none (its default timeout stays a hard limit)", () => {
    const wrapped = instrumentStore(new MemoryStore(), providers).bind(namespace);
    expect(wrapped.extendTimeout).toBeUndefined();
  });
});
