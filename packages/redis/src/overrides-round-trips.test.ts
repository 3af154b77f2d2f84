/**
 * Overrides and manual blocks cost no extra round trip: every decision (under any override, or
 * blocked) and every control command is one script call, on ioredis, node-redis and Upstash; after
 * `SCRIPT FLUSH` the control script is loaded once; and with `clock: "client"` the control script
 * runs on a server that refuses `TIME` in scripts.
 */
import { RateLimiter, fixedWindow, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { uniquePrefix } from "@sluice/testing";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type IORedisLike, RedisStore } from "./redis-store.js";
import { UpstashStore } from "./upstash-store.js";

describe("one round trip per call", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** Calls per client command in INFO commandstats (rejected ones included). */
  function commandCalls(info: string): Record<string, number> {
    const calls: Record<string, number> = {};
    for (const [, name, fields] of info.matchAll(/^cmdstat_([^:]+):(.*)$/gm)) {
      const field = (key: string) => Number(new RegExp(`(?:^|,)${key}=(\\d+)`).exec(fields as string)?.[1] ?? 0);
      calls[name as string] = field("calls") + field("rejected_calls");
    }
    return calls;
  }

  it("every decision (with or without an override, blocked, unlimited) and every control command is one EVALSHA, counted by the client and by the server", async () => {
    const io = new IORedis(server.url);
    const admin = new IORedis(server.url);
    const sent: string[] = [];
    const counted: IORedisLike = {
      evalsha: (...args) => (sent.push("evalsha"), io.evalsha(...args)),
      eval: (...args) => (sent.push("eval"), io.eval(...args)),
      del: (...keys) => (sent.push("del"), io.del(...keys)),
      defineCommand: () => undefined,
    };
    const limiter = new RateLimiter({
      store: new RedisStore(counted),
      limits: [fixedWindow({ limit: 3, window: "1h", name: "hour" }), tokenBucket({ capacity: 5, refillRate: 1, name: "burst", block: "1m" })],
      denyCache: false,
    });
    // the first calls load the two scripts (NOSCRIPT, then EVAL): not counted below
    await limiter.limit("warm");
    await limiter.getOverride("warm");
    sent.length = 0;
    await admin.config("RESETSTAT");
    const ops: [string, () => Promise<unknown>][] = [
      ["limit, no override", () => limiter.limit("a")],
      ["peek, no override", () => limiter.peek("a")],
      ["setOverride scale", () => limiter.setOverride("a", { scale: 3 })],
      ["limit under scale", () => limiter.limit("a")],
      ["getOverride", () => limiter.getOverride("a")],
      ["setOverride quotas with ttl", () => limiter.setOverride("a", { quotas: { hour: 10 } }, { ttl: "1h" })],
      ["limit under quotas", () => limiter.limit("a")],
      ["setOverride unlimited", () => limiter.setOverride("a", { unlimited: true })],
      ["limit unlimited", () => limiter.limit("a")],
      ["block", () => limiter.block("a", "1m")],
      ["limit blocked", () => limiter.limit("a")],
      ["unblock", () => limiter.unblock("a")],
      ["clearOverride", () => limiter.clearOverride("a")],
      ["limit after clear", () => limiter.limit("a")],
    ];
    for (const [what, op] of ops) {
      const before = sent.length;
      await op();
      expect(sent.slice(before), what).toEqual(["evalsha"]);
    }
    const calls = commandCalls(String(await admin.info("commandstats")));
    expect(calls.evalsha).toBe(ops.length);
    expect(calls.eval ?? 0).toBe(0);
    // everything else the server counted ran inside those scripts (the one admin call aside)
    expect(Object.keys(calls).filter((name) => !["evalsha", "hmget", "hset", "hdel", "pexpire", "persist", "time", "config|resetstat", "info"].includes(name))).toEqual([]);
    io.disconnect();
    admin.disconnect();
  });

  it("after SCRIPT FLUSH, a burst of control commands loads the control script once (EVAL), like the decide script", async () => {
    const io = new IORedis(server.url);
    const admin = new IORedis(server.url);
    const limiter = new RateLimiter({ store: new RedisStore(io), limits: fixedWindow({ limit: 3, window: "1h", name: "hour" }), prefix: uniquePrefix("flush") });
    await limiter.getOverride("warm");
    await admin.script("FLUSH");
    await admin.config("RESETSTAT");
    const burst = 200;
    const answers = await Promise.all(
      Array.from({ length: burst }, (_, i) => (i % 2 === 0 ? limiter.setOverride(`k${i}`, { scale: 2 }) : limiter.block(`k${i}`, "1m"))),
    );
    expect(answers).toHaveLength(burst);
    const calls = commandCalls(String(await admin.info("commandstats")));
    expect(calls.eval).toBe(1);
    // every other call: its EVALSHA, and one more for those whose first met NOSCRIPT before the load ended
    expect(calls.evalsha).toBeGreaterThanOrEqual(burst - 1);
    expect(calls.evalsha).toBeLessThanOrEqual(2 * burst);
    expect(await limiter.getOverride("k0")).toEqual({ scale: 2 });
    expect((await limiter.limit("k1")).reason).toBe("blocked");
    io.disconnect();
    admin.disconnect();
  });

  it('clock: "client" on a server that refuses TIME in scripts: the control script takes this process\'s time too', async () => {
    const timeless = await startRedisServer({ args: ["--rename-command", "TIME", '""'] });
    const io = new IORedis(timeless.url);
    try {
      const limiter = new RateLimiter({ store: new RedisStore(io, { clock: "client" }), limits: slidingLog({ limit: 2, window: "1h", name: "log" }), onStoreError: "deny" });
      await limiter.setOverride("k", { quotas: { log: 4 } }, { ttl: "1h" });
      expect(await limiter.getOverride("k")).toEqual({ quotas: { log: 4 } });
      const decisions = [];
      for (let i = 0; i < 5; i++) decisions.push(await limiter.limit("k"));
      expect(decisions.map((d) => d.reason)).toEqual(["ok", "ok", "ok", "ok", "limit"]);
      await limiter.block("k", "1m");
      expect((await limiter.limit("k")).reason).toBe("blocked");
      await limiter.unblock("k");
      await limiter.clearOverride("k");
      expect(await limiter.getOverride("k")).toBeUndefined();
      // without the option the server refuses the script
      await expect(new RateLimiter({ store: new RedisStore(io), limits: slidingLog({ limit: 2, window: "1h", name: "log" }) }).getOverride("k")).rejects.toThrow(/clock: "client"/);
    } finally {
      io.disconnect();
      await timeless.stop();
    }
  });

  it("node-redis and Upstash: one script call per decision and per control command too", async () => {
    const node = createClient({ url: inject("sluiceRedisUrl"), RESP: 2 });
    await node.connect();
    const upstash = new UpstashRedis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken"), retry: false });
    const sent: string[] = [];
    const stores = [
      new RedisStore({
        evalSha: (sha: string, o: { keys: string[]; arguments: string[] }) => (sent.push("evalsha"), node.evalSha(sha, o)),
        eval: (script: string, o: { keys: string[]; arguments: string[] }) => (sent.push("eval"), node.eval(script, o)),
        del: (keys: string[]) => (sent.push("del"), node.del(keys)),
      }),
      new UpstashStore({
        evalsha: (sha, keys, args) => (sent.push("evalsha"), upstash.evalsha(sha, keys, args)),
        eval: (script, keys, args) => (sent.push("eval"), upstash.eval(script, keys, args)),
        del: (...keys) => (sent.push("del"), upstash.del(...keys)),
      }),
    ];
    for (const store of stores) {
      const limiter = new RateLimiter({ store, limits: slidingWindow({ limit: 4, window: "1h", name: "sw" }), prefix: uniquePrefix("rt"), denyCache: false });
      await limiter.limit("warm");
      await limiter.getOverride("warm");
      for (const op of [
        () => limiter.setOverride("a", { scale: 2 }),
        () => limiter.limit("a"),
        () => limiter.block("a", 1000),
        () => limiter.limit("a"),
        () => limiter.unblock("a"),
        () => limiter.clearOverride("a"),
        () => limiter.limit("a"),
      ]) {
        sent.length = 0;
        await op();
        expect(sent).toEqual(["evalsha"]);
      }
    }
    await node.quit();
  });
});
