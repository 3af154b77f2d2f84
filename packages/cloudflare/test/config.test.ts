/**
 * Misconfiguration is refused when the store or wrapper is built, with a message naming the option.
 * (These parts import nothing from `cloudflare:workers`, so they run in Node.)
 */
import { RateLimiter, SluiceConfigError, SluiceInputError, SluiceStoreError, fixedWindow } from "@sluice/core";
import { MAX_POLICIES, storageKey } from "@sluice/core/store";
import { afterEach, describe, expect, it } from "vitest";
import { fnv1a, objectName } from "../src/protocol.js";
import { DurableObjectStore, type SluiceLimiterNamespace } from "../src/store.js";
import { createTestDurableObjectStore } from "../src/testing.js";
import { withRateLimit } from "../src/with-rate-limit.js";

/** A namespace that records the object names it is asked for; `get` returns a stub that answers nothing. */
function namespace(): SluiceLimiterNamespace & { names: string[] } {
  const names: string[] = [];
  return {
    names,
    idFromName: (name: string) => {
      names.push(name);
      return { name } as unknown as DurableObjectId;
    },
    get: () => ({}),
  };
}

describe("DurableObjectStore", () => {
  it.each([
    [undefined, "needs the Durable Object namespace binding of the SluiceLimiter class"],
    [{ idFromName: () => undefined }, "needs the Durable Object namespace binding of the SluiceLimiter class"],
  ])("refuses %s as the namespace", (ns, message) => {
    expect(() => new DurableObjectStore(ns as never)).toThrow(SluiceConfigError);
    expect(() => new DurableObjectStore(ns as never)).toThrow(message);
  });

  it.each([-1, 1.5, 65_537, "4"])("refuses shards %s", (shards) => {
    expect(() => new DurableObjectStore(namespace(), { shards: shards as number })).toThrow(
      "shards must be 0 (one object per key) or an integer from 1 to 65536",
    );
  });

  it("refuses a locationHint that is not a string", () => {
    expect(() => new DurableObjectStore(namespace(), { locationHint: 7 as never })).toThrow('locationHint must be a string like "weur"');
  });

  it("names one object per (prefix, tier, key) with core's storageKey, or one per shard of a namespace", () => {
    expect(objectName({ prefix: "sluice" }, "user:1", 0)).toBe(storageKey({ prefix: "sluice" }, "user:1"));
    expect(objectName({ prefix: "sluice" }, "user:1", 0)).toBe("sluice::user%3A1");
    // the collisions of a ":" join: each pair names two objects
    expect(objectName({ prefix: "app" }, "team:alice", 0)).not.toBe(objectName({ prefix: "app:team" }, "alice", 0));
    expect(objectName({ prefix: "P", tier: "free" }, "bob", 0)).not.toBe(objectName({ prefix: "P" }, "free:bob", 0));
    expect(objectName({ prefix: "P", tier: "free" }, "bob", 0)).toBe("P:free:bob");
    expect(fnv1a("")).toBe(0x811c9dc5);
    expect(fnv1a("a")).toBe(0xe40c292c); // the published FNV-1a test vector
    expect(objectName({ prefix: "sluice" }, "a", 8)).toBe(`sluice:::shard:${0xe40c292c % 8}:8`);
    expect(objectName({ prefix: "sluice", tier: "pro" }, "a", 8)).toBe(`sluice:pro::shard:${0xe40c292c % 8}:8`);
    // a shard's name has one ":" more than any key's: no key names a shard
    expect(objectName({ prefix: "sluice" }, `:shard:${0xe40c292c % 8}:8`, 0)).not.toBe(objectName({ prefix: "sluice" }, "a", 8));
  });

  it("bind() checks the namespace synchronously, with the limit every store has (MAX_POLICIES)", () => {
    const ns = namespace();
    const store = new DurableObjectStore(ns);
    const policies = (n: number) => Array.from({ length: n }, (_, i) => fixedWindow({ limit: 5, window: "1m", name: `p${i}` }));
    expect(MAX_POLICIES).toBe(12);
    expect(() => store.bind({ prefix: "p", policies: policies(12) })).not.toThrow();
    for (const n of [13, 33]) {
      expect(() => store.bind({ prefix: "p", policies: policies(n) })).toThrow(SluiceConfigError);
      expect(() => store.bind({ prefix: "p", policies: policies(n) })).toThrow(
        `[sluice] [cloudflare] DurableObjectStore.bind: policies takes at most 12 policies (the same on every store); got ${n}`,
      );
    }
    expect(() => new RateLimiter({ store, limits: policies(13) })).toThrow(SluiceConfigError);
    expect(() => store.bind({ prefix: "p", policies: [] })).toThrow(SluiceConfigError);
    expect(() => store.bind({ prefix: "p p", policies: policies(1) })).toThrow("DurableObjectStore.bind: prefix must be");
    expect(() => store.bind({ prefix: "p", tier: "", policies: policies(1) })).toThrow("DurableObjectStore.bind: tier must be");
    expect(() => store.bind({ prefix: "p", policies: [{ ...fixedWindow({ limit: 5, window: "1m" }), windowMs: 0 }] })).toThrow(SluiceConfigError);
    expect(ns.names).toEqual([]); // no object was asked anything
  });
});

describe("DurableObjectStore replies", () => {
  /** A namespace whose every stub answers `reply` (or fails with it). */
  function answering(reply: () => unknown): SluiceLimiterNamespace {
    const answer = async () => reply();
    return { idFromName: (name) => ({ name }) as unknown as DurableObjectId, get: () => ({ consume: answer, peek: answer, reset: answer }) };
  }
  const limits = fixedWindow({ limit: 5, window: "1m", name: "w" });
  const good = { now: 1000, policies: [{ policy: "w", allowed: true, limit: 5, remaining: 4, resetAt: 60_000, retryAfterMs: 0, delayMs: 0, refillAt: 60_000 }] };

  it.each([
    ["SluiceConfigError", SluiceConfigError],
    ["SluiceInputError", SluiceInputError],
  ] as const)("a refusal named %s is rethrown as that class, and the limiter never falls back", async (name, cls) => {
    const failures: unknown[] = [];
    const store = new DurableObjectStore(answering(() => ({ error: { name, message: `[sluice] [cloudflare] refused (${name})` } })));
    const bound = store.bind({ prefix: "p", policies: [limits] });
    await expect(bound.consume("k", 1)).rejects.toBeInstanceOf(cls);
    await expect(bound.peek("k")).rejects.toThrow(`refused (${name})`);
    await expect(bound.reset("k")).rejects.toBeInstanceOf(cls);
    for (const onStoreError of ["fallback", "allow", "deny"] as const) {
      const limiter = new RateLimiter({ store, limits, onStoreError, onStoreFailure: (e) => failures.push(e) });
      await expect(limiter.limit("k")).rejects.toBeInstanceOf(cls);
    }
    expect(failures).toEqual([]);
  });

  it.each([
    ["nothing", undefined],
    ["a string", "ok"],
    ["no now", { policies: good.policies }],
    ["too few results", { now: 1000, policies: [] }],
    ["a result for another policy", { now: 1000, policies: [{ ...good.policies[0], policy: "x" }] }],
    ["a result missing a field", { now: 1000, policies: [{ ...good.policies[0], remaining: undefined }] }],
    ["an error of another class", { error: { name: "TypeError", message: "boom" } }],
    ["an error without a message", { error: { name: "SluiceInputError" } }],
  ])("a malformed reply (%s) is a SluiceStoreError: a store failure", async (_label, reply) => {
    const failures: unknown[] = [];
    const store = new DurableObjectStore(answering(() => reply));
    await expect(store.bind({ prefix: "p", policies: [limits] }).consume("k", 1)).rejects.toBeInstanceOf(SluiceStoreError);
    const limiter = new RateLimiter({ store, limits, onStoreFailure: (e) => failures.push(e) });
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
    expect(failures[0]).toBeInstanceOf(SluiceStoreError);
  });

  it("a failed call is a SluiceStoreError with the cause; a good reply is the result", async () => {
    const cause = new Error("Durable Object is overloaded");
    const failing = new DurableObjectStore(
      answering(() => {
        throw cause;
      }),
    );
    const error = await Promise.resolve(failing.bind({ prefix: "p", policies: [limits] }).consume("k", 1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceStoreError);
    expect(error).toMatchObject({ message: "[sluice] [cloudflare] SluiceLimiter.consume() failed: Durable Object is overloaded", cause });
    expect(await new DurableObjectStore(answering(() => good)).bind({ prefix: "p", policies: [limits] }).consume("k", 1)).toEqual(good);
  });
});

describe("createTestDurableObjectStore", () => {
  const before = process.env.NODE_ENV;
  afterEach(() => {
    process.env.NODE_ENV = before;
  });

  it("refuses to run with NODE_ENV=production", () => {
    process.env.NODE_ENV = "production";
    expect(() => createTestDurableObjectStore(namespace(), { clock: () => 0 })).toThrow("refuse to run with NODE_ENV=production");
  });

  it("needs a clock function", () => {
    expect(() => createTestDurableObjectStore(namespace(), { clock: 5 as never })).toThrow("clock must be a function returning epoch ms");
  });
});

describe("withRateLimit", () => {
  const limiter = new RateLimiter({ limits: fixedWindow({ limit: 1, window: "1m" }) });
  const handler = { fetch: () => new Response("ok") };
  const key = () => "k";

  it.each([
    ["a handler without fetch", () => withRateLimit({} as never, { limiter, key }), "handler must be a module Worker's { fetch(request, env, ctx) }"],
    ["no options", () => withRateLimit(handler, undefined as never), "withRateLimit needs an options object"],
    ["key and trust", () => withRateLimit(handler, { limiter, key, trust: "cloudflare" }), "give key or trust, not both"],
    ["neither key nor trust", () => withRateLimit(handler, { limiter } as never), "key must be a function (request, env, ctx) => string"],
    ["a bad trust", () => withRateLimit(handler, { limiter, trust: "everyone" as never }), 'withRateLimit: trust must be "cloudflare", "vercel"'],
    ["no limiter", () => withRateLimit(handler, { key } as never), "withRateLimit needs limiter (a RateLimiter) or tiers; got limiter undefined"],
    ["limiter and tiers", () => withRateLimit(handler, { limiter, key, tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, tier: () => "free" } as never), "either limiter or tiers"],
    ["conflicting header styles, with a limiter factory", () => withRateLimit(handler, { limiter: () => limiter, key, headers: ["ietf", "draft-7"] }), "draft-7"],
    ["a bad cost", () => withRateLimit(handler, { limiter: () => limiter, key, cost: 0 }), "cost must be a positive safe integer or a function"],
    ["a skip that is not a function", () => withRateLimit(handler, { limiter, key, skip: true as never }), "withRateLimit: skip must be a function"],
    ["a limiter factory returning something else", () => withRateLimit(handler, { limiter: () => ({}) as never, key }).fetch(new Request("https://w.test/"), {}, {} as never), "withRateLimit: the limiter factory must return a RateLimiter; got an object"],
    ["tiers without a tier function", () => withRateLimit(handler, { tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, key } as never), "withRateLimit: tier must be a function"],
    ["an empty tier, with a store factory", () => withRateLimit(handler, { tiers: { free: [] }, tier: () => "free", key, store: () => undefined as never }), "tiers.free must be a policy or a non-empty list of policies"],
    ["a store that is not a store", () => withRateLimit(handler, { tiers: { free: fixedWindow({ limit: 1, window: "1m" }) }, tier: () => "free", key, store: {} as never }), "withRateLimit: store must be a Store (an object with bind(namespace)); got an object"],
  ])("refuses %s when it is called", (_label, make, message) => {
    expect(make).toThrow(SluiceConfigError);
    expect(make).toThrow(message);
  });

  it("keeps the handler's other methods", () => {
    const scheduled = () => undefined;
    const wrapped = withRateLimit({ fetch: () => new Response("ok"), scheduled }, { limiter, key });
    expect(wrapped.scheduled).toBe(scheduled);
    expect(typeof wrapped.fetch).toBe("function");
  });
});
