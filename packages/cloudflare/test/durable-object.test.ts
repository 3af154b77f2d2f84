/**
 * The SluiceLimiter object in workerd: state that survives a restart of workerd and an eviction of
 * the object, cleanup of expired state (on access, and by the storage alarm), the test-clock
 * fence, validation of what callers send, sharding, and no over-admission under concurrency.
 */
import { rm } from "node:fs/promises";
import { type Decision, RateLimiter, type RateLimiterOptions, concurrency, fixedWindow, slidingLog, tokenBucket } from "@sluice/core";
import type { StoreResult } from "@sluice/core/store";
import { T0 } from "@sluice/testing";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { objectName, specOf } from "../src/protocol.js";
import { type StartedWorker, WORKER_NAME, WorkerStore, post, startStoreWorker, storageDir } from "./helpers.js";

const started: StartedWorker[] = [];
const dirs: string[] = [];

async function start(options: Parameters<typeof startStoreWorker>[0]) {
  const s = await startStoreWorker(options);
  started.push(s);
  return s;
}

afterAll(async () => {
  for (const s of started.splice(0)) await s.stop();
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A limiter over the Worker at `url` that fails the test on any store error. */
function limiterAt(url: string, limits: RateLimiterOptions["limits"], options: { clock?: () => number; shards?: number; prefix?: string } = {}) {
  return new RateLimiter({
    store: new WorkerStore(url, options),
    limits,
    prefix: options.prefix ?? "do-test",
    onStoreError: "deny",
    onStoreFailure: (error) => {
      throw error;
    },
    denyCache: false, // the tests move the object's clock: every call must reach it
  });
}

/** The rows of the object named `name`, or `null` when it keeps no table at all. */
async function table(mf: Miniflare, name: string): Promise<{ key: string; expires_at: number }[] | null> {
  const storage = await mf.unsafeGetDurableObjectStorage(WORKER_NAME, "SluiceLimiter", { name });
  try {
    return await storage.exec<{ key: string; expires_at: number }>("SELECT key, expires_at FROM sluice_state ORDER BY key");
  } catch (error) {
    if (String(error).includes("no such table: sluice_state")) return null;
    throw error;
  }
}

/** The rows of the object named `name` (none if it keeps no table). */
async function rows(mf: Miniflare, name: string): Promise<{ key: string; expires_at: number }[]> {
  return (await table(mf, name)) ?? [];
}

const brief = (d: Decision) => [d.allowed, d.remaining, d.reason];

describe("state survives", () => {
  it("a restart of workerd: 3 of 5 used before, 2 left after", async () => {
    const dir = await storageDir();
    dirs.push(dir);
    const clock = { now: T0 + 1000 };
    const limits = fixedWindow({ limit: 5, window: "1h" });

    const first = await start({ testClock: true, persistTo: dir });
    const before = limiterAt(first.url, limits, { clock: () => clock.now });
    const used: unknown[] = [];
    for (let i = 0; i < 3; i++) used.push(brief(await before.limit("user:1")));
    expect(used).toEqual([
      [true, 4, "ok"],
      [true, 3, "ok"],
      [true, 2, "ok"],
    ]);
    await first.stop(); // the directory was given: it stays
    started.splice(started.indexOf(first), 1);

    const second = await start({ testClock: true, persistTo: dir });
    const after = limiterAt(second.url, limits, { clock: () => clock.now });
    clock.now += 5000;
    expect(brief(await after.peek("user:1"))).toEqual([true, 2, "ok"]);
    const next: unknown[] = [];
    for (let i = 0; i < 3; i++) next.push(brief(await after.limit("user:1")));
    expect(next).toEqual([
      [true, 1, "ok"],
      [true, 0, "ok"],
      [false, 0, "limit"],
    ]);
    // a key never seen before the restart starts full
    expect(brief(await after.limit("user:2"))).toEqual([true, 4, "ok"]);
  });

  it("an eviction of the object: the in-memory cache goes, the SQLite row stays", async () => {
    const { mf, url } = await start({ testClock: true });
    const clock = { now: T0 };
    const l = limiterAt(url, slidingLog({ limit: 4, window: "1m" }), { clock: () => clock.now, prefix: "evict" });
    await l.limit("k", { cost: 3 });
    const name = objectName({ prefix: "evict" }, "k", 0);
    const storage = await mf.unsafeGetDurableObjectStorage(WORKER_NAME, "SluiceLimiter", { name });
    // the stored row, under core's storageKey: per policy field `name|kind`, [expires at (µs), then the
    // log's (time µs, cost) entries] (core's StoredState: the sum is recomputed, never stored)
    expect(await storage.exec("SELECT key, state, expires_at FROM sluice_state")).toEqual([
      { key: "evict::k", state: JSON.stringify({ "4-per-1m|sl": [(T0 + 60_000) * 1000, T0 * 1000, 3] }), expires_at: (T0 + 60_000) * 1000 },
    ]);
    await mf.unsafeEvictDurableObject(WORKER_NAME, "SluiceLimiter", { name });
    clock.now += 10;
    expect(brief(await l.limit("k"))).toEqual([true, 0, "ok"]);
    expect(brief(await l.limit("k"))).toEqual([false, 0, "limit"]);
    // the log's entries came back from storage: the cost-3 entry leaves exactly one window later
    clock.now = T0 + 60_000;
    expect(brief(await l.limit("k", { cost: 3 }))).toEqual([true, 0, "ok"]);
  });
});

describe("cleanup", () => {
  it("deletes a row whose state has expired when the key is next touched, even by a peek", async () => {
    const { mf, url } = await start({ testClock: true });
    const clock = { now: T0 + 500 };
    const l = limiterAt(url, fixedWindow({ limit: 2, window: "1s" }), { clock: () => clock.now, prefix: "lazy" });
    await l.limit("k");
    const name = objectName({ prefix: "lazy" }, "k", 0);
    expect((await rows(mf, name)).map((r) => [r.key, r.expires_at])).toEqual([["lazy::k", (T0 + 1000) * 1000]]);
    clock.now = T0 + 999;
    expect(brief(await l.peek("k"))).toEqual([true, 1, "ok"]);
    expect(await rows(mf, name)).toHaveLength(1);
    clock.now = T0 + 1000;
    expect(brief(await l.peek("k"))).toEqual([true, 2, "ok"]);
    expect(await rows(mf, name)).toEqual([]);
    // a denied request writes nothing, and a reset deletes
    await l.limit("k");
    await l.reset("k");
    expect(await rows(mf, name)).toEqual([]);
  });

  it("the storage alarm deletes the expired state of keys nobody touches again, then the whole table", async () => {
    // the real clock: the alarm is set only for state written at the object's own time
    const { mf, url } = await start({ testClock: false });
    // a log entry expires exactly one window after it was admitted, by the object's clock
    const l = limiterAt(url, slidingLog({ limit: 5, window: 2500 }), { prefix: "alarm" });
    const other = limiterAt(url, tokenBucket({ capacity: 5, refillRate: 1, interval: "1h" }), { prefix: "alarm-long" });
    const first = await l.limit("k");
    expect(first).toMatchObject({ allowed: true, remaining: 4 });
    expect((await other.limit("k")).allowed).toBe(true);
    const name = objectName({ prefix: "alarm" }, "k", 0);
    expect((await table(mf, name))?.map((r) => [r.key, r.expires_at])).toEqual([["alarm::k", (first.now + 2500) * 1000]]);
    let left = await table(mf, name);
    for (let i = 0; i < 200 && left !== null; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      left = await table(mf, name);
    }
    // the row is gone, and with it the table: deleteAll() left the object no storage
    expect(left).toBeNull();
    // the other key (its own object, a one-hour bucket) is still there
    expect(await rows(mf, objectName({ prefix: "alarm-long" }, "k", 0))).toHaveLength(1);
    // the object starts again from an empty table
    expect((await l.limit("k")).remaining).toBe(4);
    expect(await rows(mf, name)).toHaveLength(1);
  });
});

describe("the test-clock fence", () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await start({ testClock: false }));
  });

  it("without SLUICE_ALLOW_TEST_CLOCK the object refuses a call that fixes the time, and decides with its own clock", async () => {
    const failures: unknown[] = [];
    const forged = new RateLimiter({
      store: new WorkerStore(url, { clock: () => T0 }),
      limits: fixedWindow({ limit: 1, window: "1m" }),
      prefix: "fence",
      onStoreError: "deny",
      onStoreFailure: (error) => failures.push(error),
    });
    const denied = await forged.limit("k");
    expect(denied).toMatchObject({ allowed: false, reason: "store-error" });
    expect(String(failures[0])).toContain("has no SLUICE_ALLOW_TEST_CLOCK binding");

    const before = Date.now();
    const real = await limiterAt(url, fixedWindow({ limit: 1, window: "1m" }), { prefix: "fence" }).limit("k");
    const after = Date.now();
    expect(real).toMatchObject({ allowed: true, remaining: 0, reason: "ok" });
    expect(real.now).toBeGreaterThanOrEqual(before - 1000);
    expect(real.now).toBeLessThanOrEqual(after + 1000);
    // the refused call consumed nothing: the real call found the full quota
  });
});

describe("an object without SQLite storage", () => {
  it("refuses to start, naming new_sqlite_classes: every call fails as a store failure, with that message", async () => {
    const { url } = await start({ testClock: true, sqlite: false });
    const policies = JSON.stringify([specOf(fixedWindow({ limit: 3, window: "1m", name: "w" }))]);
    const call = { prefix: "kv", key: "k", policies, cost: 1, nowMs: T0 };
    const response = await fetch(new URL("/raw", url), { method: "POST", body: JSON.stringify({ method: "consume", name: "kv", call }) });
    expect(response.status).toBe(500);
    const { error } = (await response.json()) as { error: { message: string } };
    expect(error.message).toContain('[sluice] [cloudflare] new_sqlite_classes must list SluiceLimiter in the migration that creates it');
  });
});

describe("the object validates what it is sent", () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await start({ testClock: true }));
  });
  const policies = JSON.stringify([specOf(fixedWindow({ limit: 3, window: "1m", name: "w" }))]);
  const raw = (method: string, call: unknown, name = "validate") => post<StoreResult | null>(new URL("/raw", url).toString(), { method, name, call });
  const good = { prefix: "v", key: "k", policies, cost: 1, nowMs: T0 };

  const policy = (i: number) => specOf(fixedWindow({ limit: 3, window: "1m", name: `p${i}` }));
  // [label, call, class, message (a part of it), option]: every field of a call, refused with its path
  it.each([
    ["cost 0", { ...good, cost: 0 }, "SluiceInputError", "[sluice] [cloudflare] cost must be a positive safe integer; got 0", "cost"],
    ["cost 1.5", { ...good, cost: 1.5 }, "SluiceInputError", "cost must be a positive safe integer; got 1.5", "cost"],
    ['cost "1"', { ...good, cost: "1" }, "SluiceInputError", 'cost must be a positive safe integer; got "1"', "cost"],
    ["an empty key", { ...good, key: "" }, "SluiceInputError", "[sluice] [cloudflare] key must be a non-empty string", "key"],
    ["a 5000-character key", { ...good, key: "k".repeat(5000) }, "SluiceInputError", "key must be at most 4096 characters; got 5000", "key"],
    ["a key with a lone surrogate", { ...good, key: "a\ud800" }, "SluiceInputError", "key must be a well-formed string", "key"],
    ["a missing prefix", { ...good, prefix: undefined }, "SluiceConfigError", "[sluice] [cloudflare] prefix must be 1-128 visible ASCII characters", "prefix"],
    ["a tier with a space", { ...good, tier: "a b" }, "SluiceConfigError", "[sluice] [cloudflare] tier must be 1-128 visible ASCII characters", "tier"],
    ["policies that are not a string", { ...good, policies: [] }, "SluiceConfigError", "[sluice] [cloudflare] policies must be a JSON string; got object", "policies"],
    ["policies that are not JSON", { ...good, policies: "[{" }, "SluiceConfigError", "policies must be valid JSON", "policies"],
    ["no policies", { ...good, policies: "[]" }, "SluiceConfigError", "policies must be a list of 1 to 12 policies (the same limit on every store); got 0", "policies"],
    ["13 policies", { ...good, policies: JSON.stringify(Array.from({ length: 13 }, (_, i) => policy(i))) }, "SluiceConfigError", "policies must be a list of 1 to 12 policies (the same limit on every store); got 13", "policies"],
    ["33 policies", { ...good, policies: JSON.stringify(Array.from({ length: 33 }, (_, i) => policy(i))) }, "SluiceConfigError", "got 33", "policies"],
    ["a policy that is not an object", { ...good, policies: JSON.stringify([policy(0), 5]) }, "SluiceConfigError", "[sluice] [cloudflare] policies[1] must be an object; got number", "policies[1]"],
    ["an unknown algorithm", { ...good, policies: JSON.stringify([{ kind: "infinite", name: "x" }]) }, "SluiceConfigError", "[sluice] [cloudflare] policies[0].kind must be an algorithm's kind; got \"infinite\"", "policies[0].kind"],
    [
      "a limit the factory refuses",
      { ...good, policies: JSON.stringify([{ kind: "fixedWindow", name: "w", limit: -1, window: 60_000 }]) },
      "SluiceConfigError",
      "[sluice] [cloudflare] policies[0].limit must be a positive safe integer; got -1",
      "policies[0].limit",
    ],
    [
      "a penalty box the factory refuses",
      { ...good, policies: JSON.stringify([policy(0), { kind: "fixedWindow", name: "w", limit: 1, window: 60_000, block: { base: 1000, factor: 0, max: 1000 } }]) },
      "SluiceConfigError",
      "[sluice] [cloudflare] policies[1].block.factor must be a positive safe integer; got 0",
      "policies[1].block.factor",
    ],
    [
      "a concurrency cap with a penalty box",
      { ...good, policies: JSON.stringify([{ kind: "concurrency", name: "c", limit: 2, lease: 30_000, block: { base: 1000, factor: 1, max: 1000 } }]) },
      "SluiceConfigError",
      "[sluice] [cloudflare] policies[0].block must be left out of concurrency()",
      "policies[0].block",
    ],
    ["a lease of 1.5", { ...good, lease: 1.5 }, "SluiceInputError", "[sluice] [cloudflare] lease must be a non-negative safe integer; got 1.5", "lease"],
    [
      "two policies with one name",
      { ...good, policies: JSON.stringify([specOf(fixedWindow({ limit: 3, window: "1m", name: "w" })), specOf(slidingLog({ limit: 3, window: "1m", name: "w" }))]) },
      "SluiceConfigError",
      '[sluice] [cloudflare] policies[1].name must differ from the other policies\' names; got "w"',
      "policies[1].name",
    ],
  ])("refuses %s before touching state, answering the error's class, code and option as a value", async (_label, call, name, message, option) => {
    const reply = (await raw("consume", call)) as unknown as { error: { name: string; message: string } };
    const code = name === "SluiceConfigError" ? "SLUICE_CONFIG" : "SLUICE_INPUT";
    expect(reply).toEqual({ error: { name, code, message: expect.stringContaining(message), option } });
    expect(reply.error.message.startsWith(`[sluice] [cloudflare] ${option} `)).toBe(true);
    expect(await raw("peek", good)).toMatchObject({ now: T0, policies: [{ policy: "w", remaining: 3 }] });
  });

  it("refuses a call that is not an object", async () => {
    for (const method of ["consume", "peek", "refund", "release", "reset"]) {
      expect(await raw(method, null)).toEqual({ error: { name: "SluiceInputError", code: "SLUICE_INPUT", message: "[sluice] [cloudflare] call must be an object; got null", option: "call" } });
    }
  });

  it("refuses a refund whose cost, chargedAtMs or marks are malformed", async () => {
    const refused = (option: string, message: string) => ({ error: { name: "SluiceInputError", code: "SLUICE_INPUT", message: expect.stringContaining(message), option } });
    expect(await raw("refund", { ...good, cost: 0 })).toEqual(refused("cost", "[sluice] [cloudflare] cost must be a positive safe integer; got 0"));
    expect(await raw("refund", { ...good, chargedAtMs: -1 })).toEqual(refused("chargedAtMs", "[sluice] [cloudflare] chargedAtMs must be a non-negative integer of epoch ms; got -1"));
    expect(await raw("refund", { ...good, chargedAtMs: T0, marks: [1.5] })).toEqual(refused("marks", "[sluice] [cloudflare] marks must be a list of non-negative safe integers; got an array"));
    expect(await raw("refund", { ...good, chargedAtMs: T0, marks: "1" })).toEqual(refused("marks", 'marks must be a list of non-negative safe integers; got "1"'));
  });

  it("refuses a release of a lease that is not a positive integer", async () => {
    for (const lease of [0, -1, 2.5, "7", undefined]) {
      expect([lease, await raw("release", { ...good, lease })]).toEqual([
        lease,
        { error: { name: "SluiceInputError", code: "SLUICE_INPUT", message: expect.stringContaining("[sluice] [cloudflare] lease must be a positive safe integer"), option: "lease" } },
      ]);
    }
  });

  it("refuses a reset of a bad key or namespace the same way", async () => {
    expect(await raw("reset", { prefix: "v", key: "k".repeat(5000) })).toEqual({
      error: { name: "SluiceInputError", code: "SLUICE_INPUT", message: expect.stringContaining("at most 4096"), option: "key" },
    });
    expect(await raw("reset", { prefix: "v v", key: "k" })).toEqual({
      error: { name: "SluiceConfigError", code: "SLUICE_CONFIG", message: expect.stringContaining("[sluice] [cloudflare] prefix must be"), option: "prefix" },
    });
    expect(await raw("reset", { prefix: "v", key: "k" })).toBeNull();
  });

  it("a test time that is not a number is thrown: a store failure, not the caller's mistake", async () => {
    await expect(raw("consume", { ...good, nowMs: "soon" })).rejects.toThrow("the test clock must be a non-negative finite epoch ms");
  });

  it("answers a well-formed call with the engine's result", async () => {
    expect(await raw("consume", { ...good, key: "ok" })).toEqual({
      now: T0,
      policies: [{ policy: "w", allowed: true, limit: 3, remaining: 2, resetAt: T0 + 60_000, retryAfterMs: 0, delayMs: 0, refillAt: T0 + 60_000 }],
    });
    expect(await raw("consume", { ...good, key: "ok", cost: 4 })).toEqual({
      now: T0,
      policies: [{ policy: "w", allowed: false, limit: 3, remaining: 2, resetAt: T0 + 60_000, retryAfterMs: Infinity, delayMs: 0, refillAt: T0 + 60_000 }],
    });
  });
});

describe("placement and concurrency", () => {
  let mf: Miniflare;
  let url: string;
  beforeAll(async () => {
    ({ mf, url } = await start({ testClock: true }));
  });

  it("one object per key by default; with shards, keys hash onto that many objects", async () => {
    const clock = () => T0;
    const perKey = limiterAt(url, fixedWindow({ limit: 5, window: "1m" }), { clock, prefix: "place" });
    const sharded = limiterAt(url, fixedWindow({ limit: 5, window: "1m" }), { clock, prefix: "place-sharded", shards: 4 });
    const keys = Array.from({ length: 24 }, (_, i) => `user:${i}`);
    const idsBefore = new Set(await mf.listDurableObjectIds("SLUICE"));
    for (const key of keys) await perKey.limit(key);
    const idsPerKey = new Set(await mf.listDurableObjectIds("SLUICE"));
    expect(idsPerKey.size - idsBefore.size).toBe(24);
    for (const key of keys) await sharded.limit(key);
    const idsSharded = new Set(await mf.listDurableObjectIds("SLUICE"));
    expect(idsSharded.size - idsPerKey.size).toBe(4);
    // each shard holds its keys' rows
    let total = 0;
    for (let shard = 0; shard < 4; shard++) total += (await rows(mf, `place-sharded:::shard:${shard}:4`)).length;
    expect(total).toBe(24);
    // and keys stay distinct inside a shard
    expect((await sharded.peek("user:0")).remaining).toBe(4);
  });

  it("admits exactly the quota when 60 requests for one key arrive at once", async () => {
    const l = limiterAt(url, fixedWindow({ limit: 17, window: "1h" }), { clock: () => T0 + 5, prefix: "race" });
    const decisions = await Promise.all(Array.from({ length: 60 }, () => l.limit("hot")));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(17);
    expect(decisions.filter((d) => d.allowed).map((d) => d.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 17 }, (_, i) => i));
  });

  it("holds exactly the concurrency cap when 40 requests for one key arrive at once; a release frees one slot, in the row", async () => {
    const l = limiterAt(url, [concurrency({ limit: 3, lease: "1m", name: "exports" }), fixedWindow({ limit: 100, window: "1h", name: "hourly" })], {
      clock: () => T0 + 9,
      prefix: "in-flight",
    });
    const decisions = await Promise.all(Array.from({ length: 40 }, () => l.limit("hot")));
    const held = decisions.filter((d) => d.allowed);
    expect(held).toHaveLength(3);
    expect(new Set(held.map((d) => d.lease)).size).toBe(3);
    // the denied requests consumed nothing from the hourly limit
    expect((await l.peek("hot")).policies.map((p) => p.remaining)).toEqual([0, 97]);
    const storage = await mf.unsafeGetDurableObjectStorage(WORKER_NAME, "SluiceLimiter", { name: objectName({ prefix: "in-flight" }, "hot", 0) });
    const leases = async () => {
      const [row] = await storage.exec<{ state: string }>("SELECT state FROM sluice_state");
      return (JSON.parse(row!.state) as Record<string, number[]>)["exports|cc"];
    };
    const expires = (T0 + 9 + 60_000) * 1000;
    const ids = (field: number[] | undefined) => (field ?? []).filter((_, i) => i % 2 === 0 && i > 0).sort((x, y) => x - y);
    const sorted = (ds: Decision[]) => ds.map((d) => Number(d.lease)).sort((x, y) => x - y);
    // [when every lease has expired, then the expiry (µs) and id of each lease]
    const stored = await leases();
    expect(stored?.filter((_, i) => i % 2 === 1)).toEqual([expires, expires, expires]);
    expect([stored?.[0], ids(stored)]).toEqual([expires, sorted(held)]);
    expect((await l.release("hot", held[1]!)).policies[0]).toMatchObject({ allowed: true, remaining: 1 });
    expect(ids(await leases())).toEqual(sorted([held[0]!, held[2]!]));
    await l.release("hot", held[0]!);
    await l.release("hot", held[2]!);
    expect(await leases()).toBeUndefined(); // no lease held: the field is gone
    expect((await l.peek("hot")).policies[0]!.remaining).toBe(3);
  });

  it("keeps the state of another limiter that shares the prefix", async () => {
    const clock = () => T0 + 7;
    const a = limiterAt(url, fixedWindow({ limit: 5, window: "1m", name: "a" }), { clock, prefix: "shared" });
    const b = limiterAt(url, tokenBucket({ capacity: 3, refillRate: 1, interval: "1h", name: "b" }), { clock, prefix: "shared" });
    await a.limit("k", { cost: 2 });
    await b.limit("k");
    await a.limit("k");
    expect((await a.peek("k")).remaining).toBe(2);
    expect((await b.peek("k")).remaining).toBe(2);
    expect((await rows(mf, objectName({ prefix: "shared" }, "k", 0))).map((r) => r.key)).toEqual(["shared::k"]);
  });
});

describe("errors keep their class across the RPC", () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await start({ testClock: true }));
  });
  const one = [specOf(fixedWindow({ limit: 3, window: "1m", name: "w" }))];
  const thirteen = Array.from({ length: 13 }, (_, i) => specOf(fixedWindow({ limit: 3, window: "1m", name: `p${i}` })));

  /** POSTs to the test Worker and returns its answer, a failure (status 500) included. */
  async function send(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(new URL(path, url), { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
    return { status: response.status, body: JSON.parse(await response.text()) as Record<string, unknown> };
  }

  it.each([
    ["a 5000-character key", { key: "k".repeat(5000) }, "SluiceInputError", "key must be at most 4096 characters; got 5000"],
    ["a lone surrogate", { key: "\ud800" }, "SluiceInputError", "lone surrogate"],
  ])("DurableObjectStore called directly with %s: the object's SluiceInputError reaches the caller as that class", async (_label, fields, cls, message) => {
    for (const op of ["consume", "peek", "reset"]) {
      const { status, body } = await send("/store", { op, prefix: "direct", policies: one, nowMs: T0, ...fields });
      expect(status).toBe(500);
      expect(body).toEqual({ stage: op, error: { name: cls, class: cls, code: "SLUICE_INPUT", option: "key", message: expect.stringContaining(message) } });
    }
  });

  it("13 policies: bind() refuses them synchronously; sent anyway, the object's SluiceConfigError reaches the caller as that class", async () => {
    const checked = await send("/store", { op: "consume", prefix: "direct", policies: thirteen, key: "k", nowMs: T0 });
    expect(checked.body).toMatchObject({ stage: "bind", error: { class: "SluiceConfigError", option: "policies", message: expect.stringContaining("at most 12 policies") } });
    const sent = await send("/store", { op: "consume", prefix: "direct", policies: thirteen, key: "k", nowMs: T0, unchecked: true });
    expect(sent.body).toEqual({
      stage: "consume",
      error: { name: "SluiceConfigError", class: "SluiceConfigError", code: "SLUICE_CONFIG", option: "policies", message: expect.stringContaining("policies must be a list of 1 to 12 policies") },
    });
    // a bad tier, sent past bind(): refused by the object, as a SluiceConfigError
    const tier = await send("/store", { op: "peek", prefix: "direct", tier: "a b", policies: one, key: "k", nowMs: T0, unchecked: true });
    expect(tier.body).toMatchObject({ stage: "peek", error: { class: "SluiceConfigError", code: "SLUICE_CONFIG", option: "tier", message: expect.stringContaining("tier must be") } });
  });

  it.each([
    ["a 5000-character key", "long-key", "SluiceInputError", "key"],
    ["13 policies", "many-policies", "SluiceConfigError", "policies"],
    ["a bad tier", "bad-tier", "SluiceConfigError", "tier"],
  ])("a RateLimiter over the object rejects with the class, code and option for %s: never a store-error or a fallback", async (_label, fault, cls, option) => {
    for (const onStoreError of ["fallback", "allow", "deny"]) {
      const { status, body } = await send("/limiter", { fault, onStoreError });
      expect(status, JSON.stringify(body)).toBe(500);
      expect(body).toMatchObject({ stage: "limit", error: { class: cls, code: cls === "SluiceConfigError" ? "SLUICE_CONFIG" : "SLUICE_INPUT", option } });
    }
  });
});

describe("one key schema: core's storageKey names the object and the row", () => {
  let mf: Miniflare;
  let url: string;
  beforeAll(async () => {
    ({ mf, url } = await start({ testClock: true }));
  });

  it('prefix "app" + "team:alice" and prefix "app:team" + "alice" are two quotas in two objects', async () => {
    const clock = () => T0;
    const limits = fixedWindow({ limit: 1, window: "1h" });
    const a = limiterAt(url, limits, { clock, prefix: "app" });
    const b = limiterAt(url, limits, { clock, prefix: "app:team" });
    expect((await a.limit("team:alice")).allowed).toBe(true);
    expect((await a.limit("team:alice")).allowed).toBe(false);
    expect((await b.limit("alice")).allowed).toBe(true);
    expect((await rows(mf, objectName({ prefix: "app" }, "team:alice", 0))).map((r) => r.key)).toEqual(["app::team%3Aalice"]);
    expect((await rows(mf, objectName({ prefix: "app:team" }, "alice", 0))).map((r) => r.key)).toEqual(["app%3Ateam::alice"]);
  });

  it('tier "free" of prefix P + "bob" and plain P + "free:bob" are two quotas, sharded or not', async () => {
    const clock = () => T0;
    const limits = fixedWindow({ limit: 1, window: "1h" });
    for (const shards of [0, 2]) {
      const P = `tiered-${shards}`;
      const free = new RateLimiter({ store: new WorkerStore(url, { clock, shards }), limits, prefix: P, tier: "free", onStoreError: "deny" });
      const plain = limiterAt(url, limits, { clock, prefix: P, shards });
      expect((await free.limit("bob")).allowed).toBe(true);
      expect((await free.limit("bob")).allowed).toBe(false);
      expect((await plain.limit("free:bob")).allowed).toBe(true);
      expect((await plain.limit("free:bob")).allowed).toBe(false);
    }
    expect((await rows(mf, objectName({ prefix: "tiered-0", tier: "free" }, "bob", 0))).map((r) => r.key)).toEqual(["tiered-0:free:bob"]);
    expect((await rows(mf, objectName({ prefix: "tiered-0" }, "free:bob", 0))).map((r) => r.key)).toEqual(["tiered-0::free%3Abob"]);
  });
});
