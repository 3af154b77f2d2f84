/**
 * Overrides and manual blocks on the SluiceLimiter object, one object per key and sharded: exact
 * sequences for `scale`, `quotas`, `unlimited`, an override's ttl ending at the exact millisecond,
 * `block`/`unblock`, a second limiter on the same namespace seeing a change at its next decision,
 * agreement with MemoryStore (core's reference) step by step, one RPC call per command and per
 * decision, and the object's row (an override without an end keeps it; the alarm and eviction
 * never lose it; an ended override is dropped).
 */
import { type Decision, MemoryStore, RateLimiter, type RateLimiterOptions, SluiceInputError, concurrency, fixedWindow, slidingWindow, tokenBucket } from "@sluice/core";
import { OVERRIDE_FIELD } from "@sluice/core/store";
import { T0 } from "@sluice/testing";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { objectName, specOf } from "../src/protocol.js";
import { type StartedWorker, WORKER_NAME, WorkerStore, post, rpcCalls, startStoreWorker } from "./helpers.js";

const started: StartedWorker[] = [];

async function start(options: Parameters<typeof startStoreWorker>[0]) {
  const s = await startStoreWorker(options);
  started.push(s);
  return s;
}

afterAll(async () => {
  for (const s of started.splice(0)) await s.stop();
});

interface Made {
  clock?: () => number;
  shards?: number;
  prefix: string;
  denyCache?: false;
}

/** A limiter over the Worker at `url`, failing the test on any store error. */
function limiterAt(url: string, limits: RateLimiterOptions["limits"], options: Made) {
  return new RateLimiter({
    store: new WorkerStore(url, { ...(options.clock ? { clock: options.clock } : {}), ...(options.shards ? { shards: options.shards } : {}) }),
    limits,
    prefix: options.prefix,
    onStoreError: "deny",
    onStoreFailure: (error) => {
      throw error;
    },
    ...(options.denyCache === false ? { denyCache: false } : {}),
  });
}

/** What a step of a sequence is checked on. */
const brief = (d: Decision) => [d.allowed, d.remaining, d.reason];

/** Every field the stores must agree on, the policies' included (not the lease id, which is random). */
const seen = (d: Decision) => ({
  allowed: d.allowed,
  limit: d.limit,
  remaining: d.remaining,
  resetAt: d.resetAt,
  retryAfterMs: d.retryAfterMs,
  reason: d.reason,
  policy: d.policy,
  policies: d.policies,
  override: d.override,
});

/** The object's row for `key` (its state parsed), or `undefined`. */
async function rowOf(mf: Miniflare, name: string, key: string): Promise<{ state: Record<string, unknown>; expires_at: number } | undefined> {
  const storage = await mf.unsafeGetDurableObjectStorage(WORKER_NAME, "SluiceLimiter", { name });
  let found: { state: string; expires_at: number }[];
  try {
    found = await storage.exec<{ state: string; expires_at: number }>("SELECT state, expires_at FROM sluice_state WHERE key = ?", key);
  } catch (error) {
    if (String(error).includes("no such table: sluice_state")) return undefined;
    throw error;
  }
  const row = found[0];
  return row === undefined ? undefined : { state: JSON.parse(row.state) as Record<string, unknown>, expires_at: row.expires_at };
}

for (const shards of [0, 3]) {
  describe(`overrides and manual blocks (${shards === 0 ? "one object per key" : `shards: ${shards}`})`, () => {
    let mf: Miniflare;
    let url: string;
    let n = 0;
    beforeAll(async () => {
      ({ mf, url } = await start({ testClock: true }));
    });
    /** A prefix no other test of this Worker uses. */
    const prefix = () => `ov${shards}-${++n}`;
    const clocked = (limits: RateLimiterOptions["limits"], clock: { now: number }, p: string) =>
      limiterAt(url, limits, { clock: () => clock.now, shards, prefix: p, denyCache: false });

    it("{ scale: 2 }: ten of a quota of five for that key, five for every other; the decision says which override applied", async () => {
      const clock = { now: T0 + 100 };
      const l = clocked(fixedWindow({ limit: 5, window: "1m", name: "per-minute" }), clock, prefix());
      await l.setOverride("vip", { scale: 2 });
      expect(await l.getOverride("vip")).toEqual({ scale: 2 });
      const vip: Decision[] = [];
      for (let i = 0; i < 11; i++) vip.push(await l.limit("vip"));
      expect(vip.map((d) => d.allowed)).toEqual([...Array(10).fill(true), false]);
      expect(vip.map((d) => d.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
      expect(vip.every((d) => d.limit === 10)).toBe(true);
      expect(vip.map((d) => d.override)).toEqual(Array(11).fill({ scale: 2 }));
      expect(vip[10]).toMatchObject({ reason: "limit", retryAfterMs: 60_000 - 100 });
      const other: Decision[] = [];
      for (let i = 0; i < 6; i++) other.push(await l.limit("plain"));
      expect(other.map(brief)).toEqual([
        [true, 4, "ok"],
        [true, 3, "ok"],
        [true, 2, "ok"],
        [true, 1, "ok"],
        [true, 0, "ok"],
        [false, 0, "limit"],
      ]);
      expect(other.every((d) => d.override === undefined && d.limit === 5)).toBe(true);
      // peek, like a decision, applies it and says so
      expect(await l.peek("vip")).toMatchObject({ limit: 10, remaining: 0, override: { scale: 2 } });
      // cleared: the base quota again, the ten already counted (none left)
      await l.clearOverride("vip");
      expect(await l.getOverride("vip")).toBeUndefined();
      const after = await l.limit("vip");
      expect([after.allowed, after.limit, after.override]).toEqual([false, 5, undefined]);
    });

    it("{ scale } on a token bucket: burst and rate scale together (refill interval halves at scale 2)", async () => {
      const clock = { now: T0 };
      const l = clocked(tokenBucket({ capacity: 4, refillRate: 1, interval: "1s", name: "bucket" }), clock, prefix());
      await l.setOverride("k", { scale: 2 });
      const burst: Decision[] = [];
      for (let i = 0; i < 9; i++) burst.push(await l.limit("k"));
      expect(burst.map((d) => d.allowed)).toEqual([...Array(8).fill(true), false]);
      // one token every 1000 × 4 / 8 = 500 ms
      expect(burst[8]).toMatchObject({ limit: 8, remaining: 0, retryAfterMs: 500, reason: "limit" });
      clock.now = T0 + 499;
      expect((await l.limit("k")).allowed).toBe(false);
      clock.now = T0 + 500;
      expect(brief(await l.limit("k"))).toEqual([true, 0, "ok"]);
    });

    it("{ quotas }: the named policy's quota only; the other keeps its own", async () => {
      const clock = { now: T0 + 1_000 };
      const l = clocked([fixedWindow({ limit: 3, window: "1m", name: "per-minute" }), fixedWindow({ limit: 4, window: "1h", name: "per-hour" })], clock, prefix());
      await l.setOverride("k", { quotas: { "per-minute": 5 } });
      expect(await l.getOverride("k")).toEqual({ quotas: { "per-minute": 5 } });
      const d: Decision[] = [];
      for (let i = 0; i < 5; i++) d.push(await l.limit("k"));
      // the hour's 4 binds first now
      expect(d.map((x) => [x.allowed, x.policies.map((p) => [p.limit, p.remaining])])).toEqual([
        [true, [[5, 4], [4, 3]]],
        [true, [[5, 3], [4, 2]]],
        [true, [[5, 2], [4, 1]]],
        [true, [[5, 1], [4, 0]]],
        [false, [[5, 1], [4, 0]]],
      ]);
      expect(d[4]).toMatchObject({ policy: "per-hour", reason: "limit", override: { quotas: { "per-minute": 5 } } });
    });

    it("{ unlimited: true }: every request allowed, nothing counted; cleared, the full quota is there", async () => {
      const clock = { now: T0 + 2_000 };
      const l = clocked(slidingWindow({ limit: 3, window: "10s", name: "w" }), clock, prefix());
      await l.limit("k");
      await l.setOverride("k", { unlimited: true });
      const d: Decision[] = [];
      for (let i = 0; i < 50; i++) d.push(await l.limit("k", { cost: 2 }));
      expect(d.every((x) => x.allowed && x.reason === "ok" && x.remaining === 3 && x.limit === 3 && x.retryAfterMs === 0)).toBe(true);
      expect(d[0]?.override).toEqual({ unlimited: true });
      await l.clearOverride("k");
      // only the request made before the override was counted
      expect(brief(await l.limit("k"))).toEqual([true, 1, "ok"]);
    });

    it("a ttl ends at the exact millisecond: the override applies at end − 1 ms, and not at the end", async () => {
      const clock = { now: T0 + 10_000 };
      const p = prefix();
      const l = clocked(fixedWindow({ limit: 2, window: "1h", name: "h" }), clock, p);
      await l.setOverride("k", { scale: 3 }, { ttl: "1s" });
      const name = objectName({ prefix: p }, "k", shards);
      const id = `${p}::k`;
      expect(await rowOf(mf, name, id)).toEqual({ state: { [OVERRIDE_FIELD]: `${(T0 + 11_000) * 1000},s,3` }, expires_at: (T0 + 11_000) * 1000 });
      for (let i = 0; i < 3; i++) expect((await l.limit("k")).allowed).toBe(true);
      clock.now = T0 + 10_999;
      expect(await l.getOverride("k")).toEqual({ scale: 3 });
      expect(await l.peek("k")).toMatchObject({ limit: 6, remaining: 3, override: { scale: 3 } });
      clock.now = T0 + 11_000;
      expect(await l.getOverride("k")).toBeUndefined();
      const ended = await l.limit("k");
      // the base quota of 2 again: the 3 counted under the override leave nothing
      expect([ended.allowed, ended.limit, ended.remaining, ended.reason, ended.override]).toEqual([false, 2, 0, "limit", undefined]);
      // the ended override is dropped at the next write
      await l.limit("other"); // (another key's write does not touch this row)
      await l.block("k", 1000);
      expect(Object.keys((await rowOf(mf, name, id))?.state ?? {}).sort()).toEqual(["h|fw", "|block"]);
    });

    it("an override that ended is dropped with its row when nothing else is left", async () => {
      const clock = { now: T0 };
      const p = prefix();
      const l = clocked(fixedWindow({ limit: 2, window: "1s", name: "s" }), clock, p);
      await l.setOverride("k", { unlimited: true }, { ttl: 500 });
      const name = objectName({ prefix: p }, "k", shards);
      expect(await rowOf(mf, name, `${p}::k`)).toBeDefined();
      clock.now = T0 + 500;
      const peeked = await l.peek("k");
      expect([peeked.allowed, peeked.remaining, peeked.override]).toEqual([true, 2, undefined]);
      expect(await rowOf(mf, name, `${p}::k`)).toBeUndefined();
    });

    it("block: every request denied, reason blocked, retryAfterMs to its end, nothing counted; it ends at the exact ms; unblock lifts it at once", async () => {
      const clock = { now: T0 + 5_000 };
      const l = clocked(fixedWindow({ limit: 3, window: "1h", name: "h" }), clock, prefix());
      await l.limit("k");
      await l.block("k", "30s");
      const first = await l.limit("k");
      expect(first).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 30_000 });
      expect(first.policies[0]).toMatchObject({ blocked: true, blockedUntil: T0 + 35_000 });
      clock.now = T0 + 34_999;
      expect(await l.limit("k")).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 1 });
      clock.now = T0 + 35_000;
      // nothing was counted while blocked
      expect(brief(await l.limit("k"))).toEqual([true, 1, "ok"]);
      await l.block("k", "1h");
      expect((await l.limit("k")).reason).toBe("blocked");
      await l.unblock("k");
      expect(brief(await l.limit("k"))).toEqual([true, 0, "ok"]);
      // a block wins over unlimited
      await l.setOverride("u", { unlimited: true });
      await l.block("u", 2000);
      expect(await l.limit("u")).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 2000, override: { unlimited: true } });
      await l.unblock("u");
      expect(await l.limit("u")).toMatchObject({ allowed: true, override: { unlimited: true } });
    });

    it("unblock also ends the limiter's penalty boxes", async () => {
      const clock = { now: T0 };
      const l = clocked(fixedWindow({ limit: 1, window: "1s", name: "s", block: { base: "1h" } }), clock, prefix());
      expect((await l.limit("k")).allowed).toBe(true);
      expect((await l.limit("k")).allowed).toBe(false); // the offence: an hour in the box
      clock.now = T0 + 1_000;
      expect(await l.limit("k")).toMatchObject({ allowed: false, reason: "blocked" });
      await l.unblock("k");
      expect(brief(await l.limit("k"))).toEqual([true, 0, "ok"]);
    });

    it("a second limiter on the same namespace sees an override, a clear, a block and an unblock at its next decision", async () => {
      const clock = { now: T0 + 3_000 };
      const p = prefix();
      const limits = fixedWindow({ limit: 2, window: "1h", name: "h" });
      const admin = clocked(limits, clock, p);
      // a limiter with its deny cache on, as in production
      const worker = limiterAt(url, limits, { clock: () => clock.now, shards, prefix: p });
      expect((await worker.limit("k")).allowed).toBe(true);
      await admin.setOverride("k", { scale: 10 });
      expect(await worker.limit("k")).toMatchObject({ allowed: true, limit: 20, remaining: 18, override: { scale: 10 } });
      // other keys keep the base quota
      const j = await worker.limit("j");
      expect([j.limit, j.remaining, j.override]).toEqual([2, 1, undefined]);
      await admin.block("k", "1m");
      expect(await worker.limit("k")).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 60_000 });
      await admin.unblock("k");
      expect(await worker.getOverride("k")).toEqual({ scale: 10 });
      await admin.clearOverride("k");
      // worker's cached denial is older than the unblock: its own getOverride above forgot it
      const cleared = await worker.limit("k");
      expect([cleared.allowed, cleared.limit, cleared.reason, cleared.override]).toEqual([false, 2, "limit", undefined]);
    });

    it("agrees with MemoryStore step by step (scale, quotas, unlimited, ttl, block, refund, release)", async () => {
      const clock = { now: T0 + 250 };
      const limits = [
        fixedWindow({ limit: 4, window: "10s", name: "fw" }),
        tokenBucket({ capacity: 3, refillRate: 1, interval: "2s", name: "tb" }),
        concurrency({ limit: 5, lease: "1m", name: "cc" }),
      ];
      const p = prefix();
      const obj = clocked(limits, clock, p);
      const mem = new RateLimiter({ store: new MemoryStore({ clock: () => clock.now }), limits, prefix: p, denyCache: false });
      const both = async (run: (l: RateLimiter) => Promise<unknown>) => {
        const [a, b] = [await run(obj), await run(mem)];
        return [a, b];
      };
      const steps: unknown[] = [];
      const decide = async (run: (l: RateLimiter) => Promise<Decision>) => {
        const [a, b] = (await both(run)) as [Decision, Decision];
        expect(seen(a)).toEqual(seen(b));
        steps.push(seen(a));
        return [a, b] as const;
      };
      await both((l) => l.setOverride("k", { scale: 1.5 }, { ttl: "7s" }));
      for (let i = 0; i < 6; i++) await decide((l) => l.limit("k"));
      clock.now += 900;
      const [heldA, heldB] = await decide((l) => l.limit("k"));
      await both((l) => l.release("k", l === obj ? heldA : heldB));
      await both((l) => l.setOverride("k", { quotas: { tb: 6, fw: 9 } }));
      for (let i = 0; i < 5; i++) await decide((l) => l.limit("k", { cost: 2 }));
      const [a, b] = await decide((l) => l.limit("k"));
      await decide((l) => l.refund("k", { decision: l === obj ? a : b }));
      clock.now += 1_234;
      await both((l) => l.setOverride("k", { unlimited: true }, { ttl: 3_000 }));
      for (let i = 0; i < 3; i++) await decide((l) => l.limit("k", { cost: 3 }));
      clock.now += 3_000;
      for (let i = 0; i < 3; i++) await decide((l) => l.limit("k"));
      await both((l) => l.block("k", 1_500));
      await decide((l) => l.limit("k"));
      await decide((l) => l.peek("k"));
      clock.now += 1_500;
      await decide((l) => l.limit("k"));
      expect(await obj.getOverride("k")).toEqual(await mem.getOverride("k"));
      expect(steps.length).toBeGreaterThan(20);
    });

    it("one RPC call per command and per decision, with or without an override or a block", async () => {
      const clock = { now: T0 };
      const l = clocked([fixedWindow({ limit: 5, window: "1m", name: "m" }), concurrency({ limit: 2, lease: "1m", name: "c" })], clock, prefix());
      await rpcCalls(url); // start counting here
      const one = async (method: string, run: () => Promise<unknown>) => {
        const result = await run();
        expect([method, await rpcCalls(url)]).toEqual([method, { [method]: 1 }]);
        return result;
      };
      await one("consume", () => l.limit("k"));
      await one("control", () => l.setOverride("k", { scale: 2 }, { ttl: "1m" }));
      await one("control", () => l.getOverride("k"));
      const d = (await one("consume", () => l.limit("k"))) as Decision;
      expect(d.override).toEqual({ scale: 2 });
      await one("peek", () => l.peek("k"));
      await one("refund", () => l.refund("k", { decision: d }));
      await one("release", () => l.release("k", d));
      await one("control", () => l.block("k", "1m"));
      await one("consume", () => l.limit("k"));
      await one("control", () => l.unblock("k"));
      await one("control", () => l.setOverride("k", { unlimited: true }));
      await one("consume", () => l.limit("k"));
      await one("control", () => l.clearOverride("k"));
      await one("consume", () => l.limit("k"));
      await one("reset", () => l.reset("k"));
      // refused by the limiter's own checks: no call at all
      await expect(l.setOverride("k", { scale: -1 })).rejects.toMatchObject({ name: "SluiceInputError", option: "override.scale" });
      await expect(l.setOverride("k", { quotas: { nope: 3 } })).rejects.toMatchObject({ name: "SluiceInputError", option: "override.quotas.nope" });
      await expect(l.block("k", "soon" as never)).rejects.toBeInstanceOf(SluiceInputError);
      expect(await rpcCalls(url)).toEqual({});
    });

    it("the object refuses a malformed command with SluiceInputError naming the field, which reaches the caller as that class; nothing changes", async () => {
      const clock = { now: T0 };
      const p = prefix();
      const limits = fixedWindow({ limit: 2, window: "1m", name: "w" });
      const l = clocked(limits, clock, p);
      await l.setOverride("k", { scale: 2 });
      const name = objectName({ prefix: p }, "k", shards);
      const before = await rowOf(mf, name, `${p}::k`);
      const send = async (command: unknown) => {
        const response = await fetch(new URL("/store", url), {
          method: "POST",
          body: JSON.stringify({ op: "control", prefix: p, policies: [specOf(limits)], key: "k", command, nowMs: clock.now, shards }),
        });
        return { status: response.status, body: (await response.json()) as { error: Record<string, unknown> } };
      };
      for (const [command, option] of [
        [null, "command.op"],
        [{ op: "explode" }, "command.op"],
        [{ op: "setOverride", override: "s,0", ttlMs: 0 }, "command.override"],
        [{ op: "setOverride", override: "x", ttlMs: 0 }, "command.override"],
        [{ op: "setOverride", override: "s,2", ttlMs: -1 }, "command.ttlMs"],
        [{ op: "setOverride", override: "s,2", ttlMs: 2 ** 31 }, "command.ttlMs"],
        [{ op: "block", durationMs: 0 }, "command.durationMs"],
        [{ op: "block", durationMs: 1.5 }, "command.durationMs"],
      ] as const) {
        const { status, body } = await send(command);
        expect([option, status, body.error]).toEqual([
          option,
          500,
          { name: "SluiceInputError", class: "SluiceInputError", code: "SLUICE_INPUT", option, message: expect.stringMatching(new RegExp(`^\\[sluice\\] \\[cloudflare\\] ${option.replace(".", "\\.")} must`)) },
        ]);
      }
      expect(await rowOf(mf, name, `${p}::k`)).toEqual(before);
      // and straight to the object, as a value
      const raw = await post<unknown>(new URL("/raw", url).toString(), {
        method: "control",
        name,
        call: { prefix: p, key: "k", policies: JSON.stringify([specOf(limits)]), nowMs: T0, command: { op: "block" } },
      });
      expect(raw).toEqual({ error: { name: "SluiceInputError", code: "SLUICE_INPUT", option: "command.durationMs", message: expect.stringContaining("got undefined") } });
    });

    it("an override without a ttl keeps the row past every policy's state (expires_at = MAX_SAFE_INTEGER), through an eviction; cleared, the row goes", async () => {
      const clock = { now: T0 };
      const p = prefix();
      const l = clocked(fixedWindow({ limit: 1, window: "1s", name: "s" }), clock, p);
      await l.limit("k");
      await l.setOverride("k", { scale: 4 });
      const name = objectName({ prefix: p }, "k", shards);
      const id = `${p}::k`;
      expect((await rowOf(mf, name, id))?.expires_at).toBe(Number.MAX_SAFE_INTEGER);
      clock.now = T0 + 86_400_000;
      expect(await l.peek("k")).toMatchObject({ remaining: 4, override: { scale: 4 } });
      expect((await rowOf(mf, name, id))?.expires_at).toBe(Number.MAX_SAFE_INTEGER);
      await l.limit("k");
      // the write dropped the day-old count and kept the override
      const row = await rowOf(mf, name, id);
      expect([row?.state[OVERRIDE_FIELD], (row?.state["s|fw"] as number[])[0], row?.expires_at]).toEqual(["0,s,4", (T0 + 86_401_000) * 1000, Number.MAX_SAFE_INTEGER]);
      await mf.unsafeEvictDurableObject(WORKER_NAME, "SluiceLimiter", { name });
      expect(await l.limit("k")).toMatchObject({ allowed: true, remaining: 2, override: { scale: 4 } });
      expect(await l.getOverride("k")).toEqual({ scale: 4 });
      clock.now += 1_000;
      await l.clearOverride("k");
      expect(await rowOf(mf, name, id)).toBeUndefined();
      // a reset forgets the override too
      await l.setOverride("k", { unlimited: true });
      await l.reset("k");
      expect(await l.getOverride("k")).toBeUndefined();
      expect(await rowOf(mf, name, id)).toBeUndefined();
    });
  });
}

describe("the storage alarm (real clock)", () => {
  it("deletes expired rows and an ended override, and keeps an override without an end (never deleteAll)", async () => {
    const { mf, url } = await start({ testClock: false });
    // one object for every key
    const l = limiterAt(url, fixedWindow({ limit: 5, window: 1_000, name: "s" }), { shards: 1, prefix: "alarm" });
    const name = objectName({ prefix: "alarm" }, "x", 1);
    const table = async () => {
      const storage = await mf.unsafeGetDurableObjectStorage(WORKER_NAME, "SluiceLimiter", { name });
      try {
        return (await storage.exec<{ key: string; expires_at: number }>("SELECT key, expires_at FROM sluice_state ORDER BY key")).map((r) => [r.key, r.expires_at]);
      } catch (error) {
        if (String(error).includes("no such table: sluice_state")) return null;
        throw error;
      }
    };
    // the first row never expires: no alarm for it; the next one's sets it
    await l.setOverride("forever", { scale: 2 });
    await l.setOverride("ends", { unlimited: true }, { ttl: 1_500 });
    const counted = await l.limit("counted");
    const rows = await table();
    expect(rows).toEqual([
      ["alarm::counted", expect.any(Number)],
      ["alarm::ends", expect.any(Number)],
      ["alarm::forever", Number.MAX_SAFE_INTEGER],
    ]);
    let left = rows;
    for (let i = 0; i < 200 && (left?.length ?? 0) > 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      left = await table();
    }
    // both expiring rows went (the alarm came at the override's end; the count had ended before it);
    // the table stays, with the row that never expires
    expect(left).toEqual([["alarm::forever", Number.MAX_SAFE_INTEGER]]);
    expect(counted.allowed).toBe(true);
    expect(await l.limit("forever")).toMatchObject({ allowed: true, limit: 10, override: { scale: 2 } });
    await l.clearOverride("forever");
    expect(await l.getOverride("forever")).toBeUndefined();
  });
});
