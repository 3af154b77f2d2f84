/**
 * Misconfiguration is refused when the store or wrapper is built, with a message naming the option
 * and the error's `code` and `option` (one row per option).
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

/** `make` throws a `SluiceConfigError` with `message` (a prefix of it) and exactly `option`. */
function expectConfigError(make: () => unknown, message: string, option: string): void {
  expect(make).toThrow(SluiceConfigError);
  expect(make).toThrow(message);
  expect(make).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  // one format: the package tag, then the option
  expect(make).toThrow(expect.objectContaining({ message: expect.stringMatching(new RegExp(`^\\[sluice\\] \\[cloudflare\\] ${option.replace(/[.[\]]/g, "\\$&")} `)) }));
}

describe("DurableObjectStore", () => {
  it.each([
    [undefined, "[sluice] [cloudflare] namespace must be the Durable Object namespace binding of the SluiceLimiter class"],
    [{ idFromName: () => undefined }, "[sluice] [cloudflare] namespace must be the Durable Object namespace binding of the SluiceLimiter class"],
  ])("refuses %s as the namespace", (ns, message) => {
    expectConfigError(() => new DurableObjectStore(ns as never), message, "namespace");
  });

  it("refuses options that are not an object", () => {
    expectConfigError(() => new DurableObjectStore(namespace(), null as never), "[sluice] [cloudflare] options must be an object like { shards, locationHint }; got null", "options");
  });

  it.each([-1, 1.5, 65_537, "4"])("refuses shards %s", (shards) => {
    expectConfigError(
      () => new DurableObjectStore(namespace(), { shards: shards as number }),
      "[sluice] [cloudflare] shards must be 0 (one object per key) or an integer from 1 to 65536",
      "shards",
    );
  });

  it("refuses a locationHint that is not a string", () => {
    expectConfigError(() => new DurableObjectStore(namespace(), { locationHint: 7 as never }), '[sluice] [cloudflare] locationHint must be a string like "weur"; got 7', "locationHint");
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
      expectConfigError(
        () => store.bind({ prefix: "p", policies: policies(n) }),
        `[sluice] [cloudflare] policies must hold at most 12 policies (the same on every store); got ${n}`,
        "policies",
      );
    }
    expect(() => new RateLimiter({ store, limits: policies(13) })).toThrow(SluiceConfigError);
    expectConfigError(() => store.bind({ prefix: "p", policies: [] }), "[sluice] [cloudflare] policies must hold at least one policy", "policies");
    expectConfigError(() => store.bind({ prefix: "p p", policies: policies(1) }), "[sluice] [cloudflare] prefix must be", "prefix");
    expectConfigError(() => store.bind({ prefix: "p", tier: "", policies: policies(1) }), "[sluice] [cloudflare] tier must be", "tier");
    expectConfigError(() => store.bind(null as never), "[sluice] [cloudflare] namespace must be an object", "namespace");
    expectConfigError(() => store.bind({ prefix: "p", policies: [policies(1)[0], { ...fixedWindow({ limit: 5, window: "1m" }), windowMs: 0 }] as never }), "[sluice] [cloudflare] policies[1] must be a policy", "policies[1]");
    expectConfigError(() => store.bind({ prefix: "p", policies: [...policies(1), ...policies(1)] }), "[sluice] [cloudflare] policies[1].name must differ", "policies[1].name");
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
  // the object's own clock: within a day of this process's
  const now = Date.now();
  const good = { now, policies: [{ policy: "w", allowed: true, limit: 5, remaining: 4, resetAt: now + 60_000, retryAfterMs: 0, delayMs: 0, refillAt: now + 60_000 }] };
  const withResult = (fields: Record<string, unknown>) => ({ ...good, policies: [{ ...good.policies[0], ...fields }] });

  it.each([
    ["SluiceConfigError", SluiceConfigError],
    ["SluiceInputError", SluiceInputError],
  ] as const)("a refusal named %s is rethrown as that class with its code and option, and the limiter never falls back", async (name, cls) => {
    const failures: unknown[] = [];
    const code = name === "SluiceConfigError" ? "SLUICE_CONFIG" : "SLUICE_INPUT";
    const store = new DurableObjectStore(answering(() => ({ error: { name, code, message: `[sluice] [cloudflare] cost must be … (${name})`, option: "cost" } })));
    const bound = store.bind({ prefix: "p", policies: [limits] });
    await expect(bound.consume("k", 1)).rejects.toBeInstanceOf(cls);
    await expect(bound.consume("k", 1)).rejects.toThrow(expect.objectContaining({ code, option: "cost", message: `[sluice] [cloudflare] cost must be … (${name})` }));
    await expect(bound.peek("k")).rejects.toThrow(`cost must be … (${name})`);
    await expect(bound.reset("k")).rejects.toBeInstanceOf(cls);
    for (const onStoreError of ["fallback", "allow", "deny"] as const) {
      const limiter = new RateLimiter({ store, limits, onStoreError, onStoreFailure: (e) => failures.push(e) });
      await expect(limiter.limit("k")).rejects.toBeInstanceOf(cls);
    }
    expect(failures).toEqual([]);
  });

  it("a refusal without an option (an object of an earlier version) keeps its class, with option \"\"", async () => {
    const store = new DurableObjectStore(answering(() => ({ error: { name: "SluiceInputError", message: "[sluice] [cloudflare] key must be …" } })));
    await expect(store.bind({ prefix: "p", policies: [limits] }).consume("k", 1)).rejects.toThrow(expect.objectContaining({ code: "SLUICE_INPUT", option: "" }));
  });

  it.each([
    ["nothing", undefined],
    ["a string", "ok"],
    ["no now", { policies: good.policies }],
    ["too few results", { now: 1000, policies: [] }],
    ["a result for another policy", { now: 1000, policies: [{ ...good.policies[0], policy: "x" }] }],
    ["a result missing a field", { now, policies: [{ ...good.policies[0], remaining: undefined }] }],
    ["now 0 (1970)", { ...good, now: 0 }],
    ["now two days from this process's clock", { ...good, now: now + 2 * 86_400_000 }],
    ["now not an integer", { ...good, now: now + 0.5 }],
    ["remaining above the quota", withResult({ remaining: 6 })],
    ["remaining below 0", withResult({ remaining: -1 })],
    ["a limit other than the policy's quota", withResult({ limit: 7 })],
    ["resetAt before now", withResult({ resetAt: now - 1 })],
    ["refillAt a thousand centuries away", withResult({ refillAt: now + 2 ** 53 / 1000 })],
    ["an allowed result with a retry", withResult({ retryAfterMs: 5 })],
    ["a denial without a wait", withResult({ allowed: false, retryAfterMs: 0, remaining: 0 })],
    ["a denial of a cost that fits, saying never", withResult({ allowed: false, retryAfterMs: Infinity, remaining: 0 })],
    ["a negative delay", withResult({ delayMs: -1 })],
    ["a block on an allowed result", withResult({ blocked: true, blockedUntil: now + 1000 })],
    ["a denial blocked until now", withResult({ allowed: false, retryAfterMs: 1000, remaining: 0, blocked: true, blockedUntil: now })],
    ["a negative mark", { ...good, marks: [-1] }],
    ["an error of another class", { error: { name: "TypeError", message: "boom" } }],
    ["an error without a message", { error: { name: "SluiceInputError" } }],
    ["an error whose option is not a string", { error: { name: "SluiceInputError", message: "x", option: 5 } }],
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
    expectConfigError(
      () => createTestDurableObjectStore(namespace(), { clock: () => 0 }),
      '[sluice] [cloudflare] NODE_ENV must not be "production" for a test store with an injected clock',
      "NODE_ENV",
    );
  });

  it("needs options with a clock function, and checks the store's options", () => {
    expectConfigError(() => createTestDurableObjectStore(namespace(), undefined as never), "[sluice] [cloudflare] options must be an object like { clock }", "options");
    expectConfigError(() => createTestDurableObjectStore(namespace(), { clock: 5 as never }), "[sluice] [cloudflare] clock must be a function returning epoch ms; got number", "clock");
    expectConfigError(() => createTestDurableObjectStore(namespace(), { clock: () => 0, shards: -1 }), "[sluice] [cloudflare] shards must be", "shards");
  });
});

describe("withRateLimit", () => {
  const limiter = new RateLimiter({ limits: fixedWindow({ limit: 1, window: "1m" }) });
  const handler = { fetch: () => new Response("ok") };
  const key = () => "k";

  // [label, call, message, option]: every option of withRateLimit, tagged [cloudflare]
  const free = fixedWindow({ limit: 1, window: "1m" });
  const cases: [string, () => unknown, string, string][] = [
    ["a handler without fetch", () => withRateLimit({} as never, { limiter, key }), "[sluice] [cloudflare] handler must be a module Worker's { fetch(request, env, ctx) }", "handler"],
    ["no options", () => withRateLimit(handler, undefined as never), "[sluice] [cloudflare] options must be an object with limiter (or tiers) and key (or trust)", "options"],
    ["key and trust", () => withRateLimit(handler, { limiter, key, trust: "cloudflare" }), "[sluice] [cloudflare] trust must be left out when key is given", "trust"],
    ["neither key nor trust", () => withRateLimit(handler, { limiter } as never), "[sluice] [cloudflare] key must be a function (request, env, ctx) => string", "key"],
    ["a bad trust", () => withRateLimit(handler, { limiter, trust: "everyone" as never }), '[sluice] [cloudflare] trust must be "cloudflare", "vercel"', "trust"],
    ["a bad ipv6Subnet", () => withRateLimit(handler, { limiter, trust: "cloudflare", ipv6Subnet: 200 }), "[sluice] [cloudflare] ipv6Subnet must be an integer from 1 to 128", "ipv6Subnet"],
    ["no limiter", () => withRateLimit(handler, { key } as never), "[sluice] [cloudflare] limiter must be a RateLimiter (or give tiers); got undefined", "limiter"],
    ["limiter and tiers", () => withRateLimit(handler, { limiter, key, tiers: { free }, tier: () => "free" } as never), "[sluice] [cloudflare] tiers must be left out when limiter is given", "tiers"],
    ["conflicting header styles, with a limiter factory", () => withRateLimit(handler, { limiter: () => limiter, key, headers: ["ietf", "draft-7"] }), '[sluice] [cloudflare] headers must not hold both "ietf" and "draft-7"', "headers"],
    ["a bad partitionKey", () => withRateLimit(handler, { limiter, key, partitionKey: "x" as never }), "[sluice] [cloudflare] partitionKey must be", "partitionKey"],
    ["a bad dryRunHeaders", () => withRateLimit(handler, { limiter, key, dryRunHeaders: 1 as never }), "[sluice] [cloudflare] dryRunHeaders must be true or false", "dryRunHeaders"],
    ["a bad cost", () => withRateLimit(handler, { limiter: () => limiter, key, cost: 0 }), "[sluice] [cloudflare] cost must be a positive safe integer or a function", "cost"],
    ["a skip that is not a function", () => withRateLimit(handler, { limiter, key, skip: true as never }), "[sluice] [cloudflare] skip must be a function", "skip"],
    ["an onLimited that is not a function", () => withRateLimit(handler, { limiter, key, onLimited: 429 as never }), "[sluice] [cloudflare] onLimited must be a function", "onLimited"],
    ["an onDecision that is not a function", () => withRateLimit(handler, { limiter, key, onDecision: {} as never }), "[sluice] [cloudflare] onDecision must be a function", "onDecision"],
    ["a countWhen that is not a function", () => withRateLimit(handler, { limiter, key, countWhen: 1 as never }), "[sluice] [cloudflare] countWhen must be a function", "countWhen"],
    ["an onCallbackError that is not a function", () => withRateLimit(handler, { limiter, key, onCallbackError: "log" as never }), "[sluice] [cloudflare] onCallbackError must be a function", "onCallbackError"],
    [
      "a limiter factory returning something else",
      () => withRateLimit(handler, { limiter: () => ({}) as never, key }).fetch(new Request("https://w.test/"), {}, {} as never),
      "[sluice] [cloudflare] limiter must be a RateLimiter or a factory (env) => RateLimiter; the factory returned an object",
      "limiter",
    ],
    ["tiers without a tier function", () => withRateLimit(handler, { tiers: { free }, key } as never), "[sluice] [cloudflare] tier must be a function", "tier"],
    ["an empty tier, with a store factory", () => withRateLimit(handler, { tiers: { free: [] }, tier: () => "free", key, store: () => undefined as never }), "[sluice] [cloudflare] tiers.free must hold at least one policy", "tiers.free"],
    ["a tier's mode", () => withRateLimit(handler, { tiers: { free: { limits: free, mode: "x" as never } }, tier: () => "free", key }), "[sluice] [cloudflare] tiers.free.mode must be", "tiers.free.mode"],
    [
      "a store that is not a store",
      () => withRateLimit(handler, { tiers: { free }, tier: () => "free", key, store: {} as never }),
      "[sluice] [cloudflare] store must be a Store (an object with bind(namespace)); got an object",
      "store",
    ],
    ["a bad tierCacheTtlMs", () => withRateLimit(handler, { tiers: { free }, tier: () => "free", key, tierCacheTtlMs: -1 }), "[sluice] [cloudflare] tierCacheTtlMs must be", "tierCacheTtlMs"],
    ["a bad timeoutMs", () => withRateLimit(handler, { tiers: { free }, tier: () => "free", key, timeoutMs: 0 }), "[sluice] [cloudflare] timeoutMs must be", "timeoutMs"],
  ];
  it.each(cases)("refuses %s when it is called", (_label, make, message, option) => {
    expectConfigError(make, message, option);
  });

  it("keeps the handler's other methods", () => {
    const scheduled = () => undefined;
    const wrapped = withRateLimit({ fetch: () => new Response("ok"), scheduled }, { limiter, key });
    expect(wrapped.scheduled).toBe(scheduled);
    expect(typeof wrapped.fetch).toBe("function");
  });
});
