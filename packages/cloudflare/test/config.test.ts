/**
 * Misconfiguration is refused when the store or wrapper is built, with a message naming the option.
 * (These parts import nothing from `cloudflare:workers`, so they run in Node.)
 */
import { RateLimiter, SluiceConfigError, fixedWindow } from "@sluice/core";
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

  it("names one object per (prefix, key), or one per shard", () => {
    expect(objectName("sluice", "user:1", 0)).toBe("sluice\u0000user:1");
    expect(objectName("sluice:pro", "user:1", 0)).not.toBe(objectName("sluice", "pro:user:1", 0));
    expect(fnv1a("")).toBe(0x811c9dc5);
    expect(fnv1a("a")).toBe(0xe40c292c); // the published FNV-1a test vector
    expect(objectName("sluice", "a", 8)).toBe(`sluice\u0000#shard-${0xe40c292c % 8}-of-8`);
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
