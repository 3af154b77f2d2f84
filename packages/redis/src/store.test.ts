import {
  MAX_POLICIES,
  type Policy,
  RateLimiter,
  SluiceConfigError,
  SluiceStoreError,
  type Store,
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import { uniquePrefix } from "@sluice/testing";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import * as api from "./index.js";
import { type IORedisLike, type NodeRedisLike, RedisStore } from "./redis-store.js";
import { type UpstashRedisLike, UpstashStore } from "./upstash-store.js";

describe("public surface", () => {
  it("exports the two stores only (their option and client types are type-only)", () => {
    expect(Object.keys(api).sort()).toEqual(["RedisStore", "UpstashStore"]);
  });
});

// ---------------------------------------------------------------------------------------------
// Malformed replies and client failures reach the limiter as SluiceStoreError.

const GARBAGE: [string, unknown][] = [
  ["null", null],
  ["a status string", "OK"],
  ["an object", { result: [1] }],
  ["a short array", [1700000000000, 1, 4, 1700000060000]],
  ["a long array", [1700000000000, 1, 4, 1700000060000, 0, 0, 1700000060000, 0, 9]],
  // the fast path's compact form for one fixed window: now_us and the new count
  ["a compact answer with a number for the override", [1700000000000000, 4, 9]],
  ["a compact answer with a fraction", [1700000000000000, 4.5]],
  ["a compact answer with a string", [1700000000000000, "4"]],
  ["a string inside", [1700000000000, "1", 4, 1700000060000, 0, 0, 1700000060000, 0]],
  ["a fraction inside", [1700000000000, 1, 4.5, 1700000060000, 0, 0, 1700000060000, 0]],
  ["NaN inside", [1700000000000, 1, Number.NaN, 1700000060000, 0, 0, 1700000060000, 0]],
  ["null inside", [1700000000000, 1, null, 1700000060000, 0, 0, 1700000060000, 0]],
];

/** Fake clients of the three shapes, answering every script call with `reply` (or rejecting with it). */
function fakes(answer: () => Promise<unknown>): [string, Store][] {
  const io: IORedisLike = { evalsha: answer, eval: answer, del: async () => 1, defineCommand: () => undefined };
  const node: NodeRedisLike = { evalSha: answer, eval: answer, del: async () => 1 };
  const upstash: UpstashRedisLike = { evalsha: answer, eval: answer, del: async () => 1 };
  return [
    ["ioredis-like", new RedisStore(io)],
    ["node-redis-like", new RedisStore(node)],
    ["upstash-like", new UpstashStore(upstash)],
  ];
}

async function failureOf(store: Store): Promise<{ reason: string; error: unknown }> {
  const errors: unknown[] = [];
  const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1m" }), onStoreError: "deny", onStoreFailure: (e) => errors.push(e) });
  const d = await limiter.limit("k");
  return { reason: d.reason, error: errors[0] };
}

describe("malformed replies are SluiceStoreError (a store failure), never a plain Error", () => {
  for (const [what, reply] of GARBAGE) {
    it(`${what}`, async () => {
      for (const [client, store] of fakes(async () => reply)) {
        const bound = store.bind({ prefix: "p", policies: [fixedWindow({ limit: 5, window: "1m" })] });
        await expect(Promise.resolve(bound.consume("k", 1)), client).rejects.toThrow(SluiceStoreError);
        await expect(Promise.resolve(bound.peek("k")), client).rejects.toThrow(/\[sluice\] \[redis\] malformed reply from the decide script: (expected 8 \(or 2\) integers|the override's body \d+ does not parse)/);
        const { reason, error } = await failureOf(store);
        expect(reason, client).toBe("store-error");
        expect(error, client).toBeInstanceOf(SluiceStoreError);
      }
    });
  }

  it("a real Redis behind a wrapper that garbles the reply", async () => {
    const client = new IORedis(inject("sluiceRedisUrl"));
    const garble = (reply: unknown) => (Array.isArray(reply) ? reply.slice(1) : reply);
    const wrapper: IORedisLike = {
      evalsha: async (...args) => garble(await client.evalsha(...args)),
      eval: async (...args) => garble(await client.eval(...args)),
      del: (...keys) => client.del(...keys),
      defineCommand: () => undefined,
    };
    const { reason, error } = await failureOf(new RedisStore(wrapper));
    expect(reason).toBe("store-error");
    expect(error).toBeInstanceOf(SluiceStoreError);
    client.disconnect();
  });
});

describe("client failures are SluiceStoreError with the client's error as the cause", () => {
  it("a rejected script call (connection refused, OOM, a script error)", async () => {
    const cause = new Error("connect ECONNREFUSED 127.0.0.1:1");
    for (const [client, store] of fakes(() => Promise.reject(cause))) {
      const { reason, error } = await failureOf(store);
      expect(reason, client).toBe("store-error");
      expect(error, client).toBeInstanceOf(SluiceStoreError);
      expect((error as Error).message).toMatch(/^\[sluice\] \[redis\] the decide script failed: connect ECONNREFUSED/);
      expect((error as Error).cause).toBe(cause);
    }
  });

  it("NOSCRIPT, then a failing EVAL", async () => {
    const noscript = new Error("NOSCRIPT No matching script. Please use EVAL.");
    const later = new Error("READONLY You can't write against a read only replica.");
    const io: IORedisLike = { evalsha: () => Promise.reject(noscript), eval: () => Promise.reject(later), del: async () => 1, defineCommand: () => undefined };
    const { error } = await failureOf(new RedisStore(io));
    expect(error).toBeInstanceOf(SluiceStoreError);
    expect((error as Error).cause).toBe(later);
  });

  it("a failing reset", async () => {
    const io: IORedisLike = { evalsha: async () => [], eval: async () => [], del: () => Promise.reject(new Error("LOADING")), defineCommand: () => undefined };
    const bound = new RedisStore(io).bind({ prefix: "p", policies: [fixedWindow({ limit: 5, window: "1m" })] });
    await expect(Promise.resolve(bound.reset("k"))).rejects.toThrow(SluiceStoreError);
  });
});

// ---------------------------------------------------------------------------------------------
// The policy limit: core's MAX_POLICIES on every store; the generated Lua must stay within Lua's
// limits (200 locals, 250 registers) for the largest configuration of every kind.

describe(`${MAX_POLICIES} policies of any kind run on Redis; ${MAX_POLICIES + 1} are refused at construction`, () => {
  const each = (make: (i: number) => Policy): Policy[] => Array.from({ length: MAX_POLICIES }, (_, i) => make(i));
  const configs: [string, Policy[]][] = [
    ["fixedWindow", each((i) => fixedWindow({ limit: 10 + i, window: "1m", name: `p${i}` }))],
    ["slidingWindow", each((i) => slidingWindow({ limit: 10 + i, window: "1m", name: `p${i}` }))],
    ["slidingLog", each((i) => slidingLog({ limit: 10 + i, window: "1m", name: `p${i}` }))],
    ["tokenBucket", each((i) => tokenBucket({ capacity: 10 + i, refillRate: 1, name: `p${i}` }))],
    ["leakyBucket", each((i) => leakyBucket({ rate: 1, period: "1s", burst: 10 + i, queue: 2, name: `p${i}` }))],
    ["concurrency", each((i) => concurrency({ limit: 10 + i, name: `p${i}` }))],
    ["slidingLog with a penalty box", each((i) => slidingLog({ limit: 10 + i, window: "1m", name: `p${i}`, block: { base: "1s", factor: 2, max: "1m" } }))],
    [
      "mixed",
      each((i) => {
        const name = `p${i}`;
        switch (i % 6) {
          case 0:
            return slidingLog({ limit: 10 + i, window: "1m", name });
          case 1:
            return slidingWindow({ limit: 10 + i, window: "1m", name });
          case 2:
            return fixedWindow({ limit: 10 + i, window: "1m", name });
          case 3:
            return tokenBucket({ capacity: 10 + i, refillRate: 1, name });
          case 4:
            return leakyBucket({ rate: 1, period: "1s", burst: 10 + i, queue: 3, name });
          default:
            return concurrency({ limit: 10 + i, name });
        }
      }),
    ],
  ];
  let io: IORedis;
  let node: ReturnType<typeof createClient>;
  let stores: [string, Store][];
  beforeAll(async () => {
    io = new IORedis(inject("sluiceRedisUrl"));
    node = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
    await node.connect();
    const upstash = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
    stores = [
      ["ioredis", new RedisStore(io)],
      ["node-redis", new RedisStore(node)],
      ["upstash", new UpstashStore(upstash)],
    ];
  });
  afterAll(async () => {
    io.disconnect();
    await node.quit();
  });

  for (const [kind, policies] of configs) {
    it(kind, async () => {
      for (const [client, store] of stores) {
        const limiter = new RateLimiter({ store, limits: policies, prefix: uniquePrefix("max"), onStoreError: "deny", denyCache: false });
        for (let i = 0; i < 12; i++) {
          const d = await limiter.limit("k");
          expect(d.reason, `${client} ${kind} #${i}`).toMatch(/^(ok|limit|blocked)$/);
          expect(d.policies).toHaveLength(MAX_POLICIES);
          // a lease of every other request goes back: the release mode runs with every policy too
          if (d.lease !== undefined && i % 2 === 0) expect((await limiter.release("k", d)).policies).toHaveLength(MAX_POLICIES);
        }
        expect((await limiter.peek("k")).reason).toMatch(/^(ok|limit|blocked)$/);
        expect(() => new RateLimiter({ store, limits: [...policies, fixedWindow({ limit: 1, window: "1m", name: "one-more" })] })).toThrow(SluiceConfigError);
      }
    });
  }

  it("a store bound directly (without a RateLimiter) refuses more than the limit too", () => {
    const [, store] = stores[0]!;
    const many = Array.from({ length: MAX_POLICIES + 1 }, (_, i) => fixedWindow({ limit: 1, window: "1m", name: `p${i}` }));
    expect(() => store.bind({ prefix: "p", policies: many })).toThrow(SluiceConfigError);
    expect(() => store.bind({ prefix: "p", policies: many })).toThrow(/^\[sluice\] \[redis\] policies must hold at most 12 policies/);
    expect(() => store.bind({ prefix: "has space", policies: many.slice(0, 1) })).toThrow(SluiceConfigError);
    expect(() => store.bind({ prefix: "p", policies: [] })).toThrow(SluiceConfigError);
  });
});
