/**
 * The configuration maxima on the real Redis: node-redis 5 reads a RESP integer digit by digit in
 * doubles (`n * 10 + digit`), which is off by one within 57 of 2^53 (9007199254740991 reads as
 * 9007199254740992). With every quota at most 2^52 (`MAX_QUOTA`), every number a script answers
 * stays below 2^53 − 64 and comes back exact on every client.
 */
import { MAX_QUOTA, type Policy, RateLimiter, SluiceConfigError, type Store, fixedWindow } from "@sluice/core";
import { OVERRIDE_FIELD, storageKey } from "@sluice/core/store";
import { T0, uniquePrefix } from "@sluice/testing";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

const clock = { ms: T0 + 3_600_000 };
let admin: IORedis;
let nodeRedis: ReturnType<typeof createClient>;
let ioredis: IORedis;
let stores: [string, Store][];

beforeAll(async () => {
  admin = new IORedis(inject("sluiceRedisUrl"));
  ioredis = new IORedis(inject("sluiceRedisUrl"));
  nodeRedis = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
  await nodeRedis.connect();
  const upstash = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
  stores = [
    ["node-redis 5", createTestRedisStore(nodeRedis, { clock: () => clock.ms })],
    ["ioredis", createTestRedisStore(ioredis, { clock: () => clock.ms })],
    ["@upstash/redis", createTestUpstashStore(upstash, { clock: () => clock.ms })],
  ];
});
afterAll(async () => {
  admin.disconnect();
  ioredis.disconnect();
  await nodeRedis.quit();
});

/** A limiter over `store` that fails closed and keeps what it reports as store failures. */
function limiterOf(store: Store, limits: Policy[], failures: unknown[]): RateLimiter {
  return new RateLimiter({ store, limits, prefix: uniquePrefix("max"), onStoreError: "deny", onStoreFailure: (e) => failures.push(e), denyCache: false });
}

describe("quotas at most MAX_QUOTA (2^52): every number comes back exact on every client", () => {
  it("the largest limit a fixed window takes is MAX_QUOTA (2^53 − 1, which node-redis 5 reads back wrong, is refused); at it, every number comes back to the unit", async () => {
    expect(() => fixedWindow({ limit: 2 ** 53 - 1, window: "1d" })).toThrow(expect.objectContaining({ name: "SluiceConfigError", option: "limit" }));
    expect(() => fixedWindow({ limit: MAX_QUOTA + 1, window: "1d" })).toThrow(SluiceConfigError);
    for (const [client, store] of stores) {
      const failures: unknown[] = [];
      const limiter = limiterOf(store, [fixedWindow({ limit: MAX_QUOTA, window: "1d", name: "fw" })], failures);
      const first = await limiter.limit("k", { cost: MAX_QUOTA - 1 });
      expect([first.reason, first.remaining], client).toEqual(["ok", 1]);
      expect((await limiter.limit("k")).remaining, client).toBe(0);
      const denied = await limiter.limit("k");
      expect([denied.reason, denied.remaining, denied.limit], client).toEqual(["limit", 0, MAX_QUOTA]);
      expect((await limiter.refund("k", { decision: first })).remaining, client).toBe(MAX_QUOTA - 1);
      expect((await limiter.peek("k")).remaining, client).toBe(MAX_QUOTA - 1);
      expect((await limiter.limit("k", { cost: MAX_QUOTA - 1 })).remaining, client).toBe(0);
      expect(failures, client).toEqual([]);
    }
  });

  it("an override stored above the maxima (by hand, or by another version) is clamped to MAX_QUOTA in Lua as in core, and comes back exact", async () => {
    for (const [client, store] of stores) {
      const failures: unknown[] = [];
      const limiter = limiterOf(store, [fixedWindow({ limit: 10, window: "1d", name: "fw" })], failures);
      await admin.hset(`{${storageKey(limiter, "k")}}`, OVERRIDE_FIELD, `0,q,fw=${2 ** 53 - 1}`);
      const first = await limiter.limit("k");
      expect([first.reason, first.limit, first.remaining], client).toEqual(["ok", MAX_QUOTA, MAX_QUOTA - 1]);
      expect(first.override, client).toEqual({ quotas: { fw: 2 ** 53 - 1 } });
      const refunded = await limiter.refund("k", { decision: first });
      expect([refunded.reason, refunded.limit, refunded.remaining], client).toEqual(["ok", MAX_QUOTA, MAX_QUOTA]);
      expect(failures, client).toEqual([]);
    }
  });
});
