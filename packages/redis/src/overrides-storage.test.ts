/**
 * Overrides and manual blocks as Redis holds them, which core's reference cannot show: the hash's
 * TTL while an override or a block lives, the fields of ended ones dropped at the next write, what
 * `unblock` lifts, commands refused before anything is sent; and two processes sharing one Redis,
 * where an override one sets binds the other's next decision.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RateLimiter, SluiceInputError, fixedWindow, slidingLog, tokenBucket } from "@sluice/core";
import type { BoundStore, StoreCommand } from "@sluice/core/store";
import { T0, uniquePrefix } from "@sluice/testing";
import IORedis from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type IORedisLike, RedisStore } from "./redis-store.js";
import { createTestRedisStore } from "./testing.js";

describe("the hash in Redis", () => {
  let io: IORedis;
  const clock = { ms: T0 };
  let store: RedisStore;
  beforeAll(() => {
    io = new IORedis(inject("sluiceRedisUrl"));
    store = createTestRedisStore(io, { clock: () => clock.ms });
  });
  afterAll(async () => {
    await io.quit();
  });
  const hashOf = (prefix: string, key: string) => `{${prefix}::${key}}`;
  const control = (bound: BoundStore, key: string, command: StoreCommand) => (bound.control as NonNullable<BoundStore["control"]>)(key, command);

  it("an override without an end keeps the hash (no TTL, also after decisions that push @expires); clearing it gives the TTL back", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [fixedWindow({ limit: 5, window: "1s", name: "w" })] });
    await bound.consume("k", 1);
    const key = (await io.keys(`{${prefix}*`))[0] as string;
    expect(key).toBe(hashOf(prefix, "k"));
    expect(await io.pttl(key)).toBeGreaterThan(0);
    await control(bound, "k", { op: "setOverride", override: "s,2", ttlMs: 0 });
    expect(await io.pttl(key)).toBe(-1);
    for (let i = 0; i < 5; i++) {
      clock.ms += 1000; // a new window each time: every write pushes @expires
      expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: true, limit: 10 });
      expect(await io.pttl(key)).toBe(-1);
    }
    await control(bound, "k", { op: "block", durationMs: 60_000 });
    expect(await io.pttl(key)).toBe(-1);
    await control(bound, "k", { op: "clearOverride" });
    // the block's end (and its slack) now sets the TTL
    const ttl = await io.pttl(key);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
    expect(await io.hexists(key, "|override")).toBe(0);
  });

  it("a hash holding nothing live but an override without an end goes when the override is cleared", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [tokenBucket({ capacity: 5, refillRate: 1, name: "b" })] });
    await control(bound, "k", { op: "setOverride", override: "u", ttlMs: 0 });
    expect(await io.exists(hashOf(prefix, "k"))).toBe(1);
    expect(await io.pttl(hashOf(prefix, "k"))).toBe(-1);
    expect((await bound.consume("k", 1)).override).toEqual({ unlimited: true });
    await control(bound, "k", { op: "clearOverride" });
    expect(await io.exists(hashOf(prefix, "k"))).toBe(0);
  });

  it("an override with an end, or a manual block, keeps the hash at least until its end", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("ttl");
    const bound = store.bind({ prefix, policies: [slidingLog({ limit: 5, window: "1s", name: "l" })] });
    await bound.consume("k", 1);
    const key = hashOf(prefix, "k");
    expect(await io.pttl(key)).toBeLessThanOrEqual(2000);
    await control(bound, "k", { op: "setOverride", override: "q,l=50", ttlMs: 3_600_000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(3_600_000);
    await control(bound, "k", { op: "block", durationMs: 7_200_000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(7_200_000);
    // a shorter block later does not shorten it
    await control(bound, "k", { op: "block", durationMs: 1000 });
    expect(await io.pttl(key)).toBeGreaterThanOrEqual(7_100_000);
  });

  it("an override or manual block that ended is ignored, and dropped at the next write (not by a read)", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("stale");
    const bound = store.bind({ prefix, policies: [fixedWindow({ limit: 3, window: "1m", name: "w" })] });
    const key = hashOf(prefix, "k");
    await control(bound, "k", { op: "setOverride", override: "s,10", ttlMs: 100 });
    await control(bound, "k", { op: "block", durationMs: 50 });
    expect((await bound.peek("k")).policies[0]).toMatchObject({ allowed: false, blocked: true, limit: 30, retryAfterMs: 50 });
    clock.ms += 50; // the block ends exactly now
    expect((await bound.peek("k")).policies[0]).toMatchObject({ allowed: true, limit: 30 });
    clock.ms += 50; // and the override
    const peeked = await bound.peek("k");
    expect(peeked.policies[0]).toMatchObject({ allowed: true, limit: 3, remaining: 3 });
    expect(peeked.override).toBeUndefined();
    expect(await io.hmget(key, "|override", "|block")).toEqual(["100000,s,10".replace("100000", String((T0 + 100) * 1000)), String((T0 + 50) * 1000)]);
    expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: true, limit: 3, remaining: 2 });
    expect(await io.hmget(key, "|override", "|block")).toEqual([null, null]);
    expect(await control(bound, "k", { op: "getOverride" })).toEqual({ now: T0 + 100 });
  });

  it("unblock lifts the manual block and the penalty boxes of the calling namespace's policies, not another namespace's", async () => {
    clock.ms = T0;
    const prefix = uniquePrefix("unblock");
    const mine = store.bind({ prefix, policies: [fixedWindow({ limit: 1, window: "1m", name: "mine", block: "10m" })] });
    const theirs = store.bind({ prefix, policies: [fixedWindow({ limit: 1, window: "1m", name: "theirs", block: "10m" })] });
    const key = hashOf(prefix, "k");
    for (const bound of [mine, theirs]) {
      await bound.consume("k", 1);
      expect((await bound.consume("k", 1)).policies[0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 600_000 });
    }
    await control(mine, "k", { op: "block", durationMs: 3_600_000 });
    expect((await mine.peek("k")).policies[0]).toMatchObject({ blocked: true, retryAfterMs: 3_600_000 });
    expect(await io.hexists(key, "mine|fw|block")).toBe(1);
    await control(mine, "k", { op: "unblock" });
    expect(await io.hmget(key, "|block", "mine|fw|block", "theirs|fw|block")).toEqual([null, null, expect.any(String)]);
    // mine: its limit applies again (its count is kept); theirs: still in its penalty box
    const after = (await mine.peek("k")).policies[0];
    expect(after).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    expect(after?.blocked).toBeUndefined();
    expect((await theirs.peek("k")).policies[0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 600_000 });
  });

  it("a bad command is a SluiceInputError naming the field, and nothing is sent", async () => {
    let calls = 0;
    const counted: IORedisLike = {
      evalsha: (...args) => (calls++, io.evalsha(...args)),
      eval: (...args) => (calls++, io.eval(...args)),
      del: (...keys) => (calls++, io.del(...keys)),
      defineCommand: () => undefined,
    };
    const bound = new RedisStore(counted).bind({ prefix: uniquePrefix("bad"), policies: [fixedWindow({ limit: 1, window: "1m" })] });
    const bad: [unknown, string][] = [
      [{ op: "setOverride", override: "x,1", ttlMs: 0 }, "command.override"],
      [{ op: "setOverride", override: "s,-1", ttlMs: 0 }, "command.override"],
      [{ op: "setOverride", override: "s,2", ttlMs: -1 }, "command.ttlMs"],
      [{ op: "setOverride", override: "s,2", ttlMs: 1.5 }, "command.ttlMs"],
      [{ op: "block", durationMs: 0 }, "command.durationMs"],
      [{ op: "block", durationMs: Number.NaN }, "command.durationMs"],
      [{ op: "explode" }, "command.op"],
      [null, "command.op"],
    ];
    for (const [command, option] of bad) {
      const error = await Promise.resolve()
        .then(() => (bound.control as NonNullable<BoundStore["control"]>)("k", command as StoreCommand))
        .then(() => undefined, (e: unknown) => e);
      expect(error, JSON.stringify(command)).toBeInstanceOf(SluiceInputError);
      expect((error as SluiceInputError).option).toBe(option);
      expect((error as Error).message).toMatch(/^\[sluice\] \[redis\] /);
    }
    expect(calls).toBe(0);
  });
});

describe("two processes on one Redis", () => {
  function runWorker(env: Record<string, string>): Promise<string> {
    const worker = fileURLToPath(new URL("../test/override-worker.ts", import.meta.url));
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", worker], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      child.stderr.on("data", (chunk) => (err += chunk));
      child.on("error", reject);
      child.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`override worker exited with ${code}:\n${err}`))));
    });
  }

  it("one sets { scale: 10 } for a key; the other admits exactly ten times the quota for it at its next decision, and the base quota for another key", async () => {
    const io = new IORedis(inject("sluiceRedisUrl"));
    const store = new RedisStore(io); // Redis's own clock, as in production
    const prefixes = [uniquePrefix("two-log"), uniquePrefix("two-bucket")];
    const limiters = [
      new RateLimiter({ store, prefix: prefixes[0], limits: slidingLog({ limit: 5, window: "1h", name: "log" }) }),
      // one token a day: nothing refills during the test
      new RateLimiter({ store, prefix: prefixes[1], limits: tokenBucket({ capacity: 5, refillRate: 1, interval: "1d", name: "bucket" }) }),
    ];
    // this process has limiters in use (its scripts are loaded), and has decided for the other key
    for (const limiter of limiters) expect((await limiter.limit("other")).allowed).toBe(true);
    expect(await runWorker({ REDIS_URL: inject("sluiceRedisUrl"), PREFIXES: prefixes.join(","), KEY: "vip" })).toBe("done");
    const admitted = async (limiter: RateLimiter, key: string) => {
      let allowed = key === "other" ? 1 : 0; // the decision made before
      for (;;) {
        const d = await limiter.limit(key);
        if (!d.allowed) return { allowed, last: d };
        expect(d.override).toEqual(key === "vip" ? { scale: 10 } : undefined);
        allowed++;
        if (allowed > 100) throw new Error("runaway");
      }
    };
    for (const limiter of limiters) {
      const vip = await admitted(limiter, "vip");
      expect(vip.allowed).toBe(50);
      expect(vip.last).toMatchObject({ reason: "limit", limit: 50, override: { scale: 10 } });
      const other = await admitted(limiter, "other");
      expect(other.allowed).toBe(5);
      expect(other.last).toMatchObject({ reason: "limit", limit: 5 });
      expect(other.last.override).toBeUndefined();
      expect(await limiter.getOverride("vip")).toEqual({ scale: 10 });
    }
    await io.quit();
  }, 60_000);
});
