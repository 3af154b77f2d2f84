/**
 * A reply is a decision only when its shape and ranges are right: exact cases of what the decide
 * and control scripts' replies must hold (see `replies.ts`), each through the three client shapes
 * (an answering fake of each), down to the decision the limiter makes of them.
 */
import { type Policy, RateLimiter, SluiceStoreError, type Store, type StoreErrorMode, fixedWindow, leakyBucket, slidingWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { type IORedisLike, type NodeRedisLike, RedisStore } from "./redis-store.js";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";
import { type UpstashRedisLike, UpstashStore } from "./upstash-store.js";

/** Stores over fake clients of the three shapes, each answering every script call with `reply()`. */
function stores(reply: () => unknown, clock?: () => number): [string, Store][] {
  const answer = async () => reply();
  const io: IORedisLike = { evalsha: answer, eval: answer, del: async () => 1, defineCommand: () => undefined };
  const node: NodeRedisLike = { evalSha: answer, eval: answer, del: async () => 1 };
  const upstash: UpstashRedisLike = { evalsha: answer, eval: answer, del: async () => 1 };
  if (clock !== undefined) {
    return [
      ["ioredis-like", createTestRedisStore(io, { clock })],
      ["node-redis-like", createTestRedisStore(node, { clock })],
      ["upstash-like", createTestUpstashStore(upstash, { clock })],
    ];
  }
  return [
    ["ioredis-like", new RedisStore(io)],
    ["node-redis-like", new RedisStore(node)],
    ["upstash-like", new UpstashStore(upstash)],
  ];
}

/** The decision `limit()` makes over `store` with `onStoreError`, and what `onStoreFailure` got. */
async function decide(store: Store, limits: Policy[], onStoreError: StoreErrorMode = "deny") {
  const failures: unknown[] = [];
  const limiter = new RateLimiter({ store, limits, onStoreError, onStoreFailure: (e) => failures.push(e), denyCache: false });
  const decision = await limiter.limit("k");
  return { decision, failures };
}

/** Every store refuses `reply` as a store failure whose message says `problem`; the limiter then follows onStoreError. */
async function refused(limits: Policy[], reply: unknown, problem: string | RegExp, clock?: () => number): Promise<void> {
  for (const [client, store] of stores(() => reply, clock)) {
    for (const onStoreError of ["deny", "allow"] as const) {
      const { decision, failures } = await decide(store, limits, onStoreError);
      expect([decision.reason, decision.allowed], client).toEqual(["store-error", onStoreError === "allow"]);
      expect(failures, client).toHaveLength(1);
      expect(failures[0], client).toBeInstanceOf(SluiceStoreError);
      expect((failures[0] as Error).message, client).toMatch(/^\[sluice\] \[redis\] malformed reply from the decide script: /);
      expect((failures[0] as Error).message, client).toMatch(problem);
    }
  }
}

const sliding = [slidingWindow({ limit: 5, window: "1m", name: "sw" })];
const fixed = [fixedWindow({ limit: 5, window: "1m", name: "fw" })];
const bucket = [tokenBucket({ capacity: 5, refillRate: 1, name: "tb" })];

describe("the replies of the issue: right length, wrong everything else", () => {
  it("[1, 2, 3] is no sliding window's compact answer (now 0, 1970): a store failure, and onStoreError decides", async () => {
    await refused(sliding, [1, 2, 3], "now is 0, more than 24 h from this process's clock");
  });

  it("[0, 0] is no fixed window's compact answer", async () => {
    await refused(fixed, [0, 0], "now is 0, more than 24 h from this process's clock");
  });
});

describe("the full form: 7 numbers per policy in their ranges", () => {
  // fixedWindow({ limit: 5, window: "1m" }) decided at `now`: allowed, 4 left, the window ends in a minute
  const now = Date.now();
  const end = now + 60_000;
  const good = [now, 1, 4, end, 0, 0, end, 0];
  const at = (i: number, value: unknown) => good.map((v, j) => (j === i ? value : v));

  it.each([
    ["allowed 2", at(1, 2), "policies[0]'s allowed is 2, not 0 or 1"],
    ["remaining above the limit", at(2, 6), "policies[0].remaining is 6, outside [0, 5]"],
    ["remaining below 0", at(2, -1), "policies[0].remaining is -1, outside [0, 5]"],
    ["resetAt before now", at(3, now - 1), `policies[0].resetAt is ${now - 1}, outside [${now}, `],
    ["resetAt 2^52 ms (142,000 years) away", at(3, now + 2 ** 52), `policies[0].resetAt is ${now + 2 ** 52}, outside [${now}, `],
    ["a retry on an allowed policy", at(4, 1000), "policies[0].retryAfterMs is 1000, outside [0, 0]"],
    ["a negative delay", at(5, -1), "policies[0].delayMs is -1, outside [0, "],
    ["refillAt before now", at(6, 0), "policies[0].refillAt is 0, outside ["],
    ["a block on an allowed policy", at(7, end), "policies[0].blocked is true on an allowed policy"],
    ["a negative block", at(7, -5), "policies[0].blocked is true on an allowed policy"],
    ["now two days off", at(0, now - 2 * 86_400_000), "more than 24 h from this process's clock"],
    ["an override body that does not parse", [...good, "s,nope"], 'the override\'s body "s,nope" does not parse'],
    ["a number for the override's body", [...good, 7], "the override's body 7 does not parse"],
  ])("%s: a store failure", async (_label, reply, problem) => {
    await refused(fixed, reply, problem);
  });

  it.each([
    ["a denial without a wait", [now, 0, 0, end, 0, 0, end, 0], "policies[0].retryAfterMs is 0, outside [1, "],
    ["a denial saying never for a cost that fits", [now, 0, 0, end, -1, 0, end, 0], "policies[0].retryAfterMs is Infinity, outside [1, "],
    ["-2 for never", [now, 0, 0, end, -2, 0, end, 0], "policies[0].retryAfterMs is -2, outside [1, "],
    ["a denial with a delay", [now, 0, 0, end, 60_000, 5, end, 0], "policies[0].delayMs is 5, outside [0, 0]"],
    ["a denial whose quota grows after its retry", [now, 0, 0, end, 1000, 0, end, 0], `policies[0].refillAt is ${end}, after the retry at ${now + 1000}`],
    ["a block that ended", [now, 0, 0, end, 60_000, 0, end, now], `policies[0].blockedUntil is ${now}, outside [${now + 1}, `],
  ])("%s: a store failure", async (_label, reply, problem) => {
    await refused(fixed, reply, problem);
  });

  it("a reply in range is the decision it says; the same with a mark, which the full form never has, is a store failure", async () => {
    for (const [client, store] of stores(() => good)) {
      const { decision, failures } = await decide(store, fixed);
      expect([decision.reason, decision.now, decision.remaining, decision.resetAt], client).toEqual(["ok", now, 4, end]);
      expect(failures, client).toEqual([]);
    }
    await refused(bucket, [now, 0, 0, now + 1000, 200, 0, now + 200, 0, now * 1000], "a mark in a reply that charged nothing");
  });

  it("a denial of a cost that can never pass must say never (-1)", async () => {
    for (const [client, store] of stores(() => [now, 0, 5, end, 60_000, 0, end, 0])) {
      const limiter = new RateLimiter({ store, limits: fixed, onStoreError: "deny", denyCache: false });
      const decision = await limiter.limit("k", { cost: 6 });
      expect(decision.reason, client).toBe("store-error");
    }
  });
});

describe("the compact form: an allowed consume's new state, or its answer", () => {
  const nowUs = Date.now() * 1000;

  it.each([
    ["a fixed window's count of 0 (nothing charged)", fixed, [nowUs, 0]],
    ["a fixed window's count above its limit", fixed, [nowUs, 6]],
    ["a sliding window's current count of 0", sliding, [nowUs, 0, 0]],
    ["a sliding window over its quota", sliding, [nowUs, 5, 5]],
    ["a negative previous count", sliding, [nowUs, -1, 1]],
    ["a token bucket's TAT at now (nothing charged)", bucket, [nowUs, nowUs, nowUs + 1]],
    ["a token bucket's TAT past its burst", bucket, [nowUs, nowUs + 5_000_001, nowUs + 5_000_001]],
  ])("%s: a store failure", async (_label, limits, reply) => {
    await refused(limits, reply, "policies[0]'s state is none an allowed consume leaves");
  });

  it("a charge's mark at or before now: a store failure", async () => {
    await refused(bucket, [nowUs, nowUs + 1_000_000, nowUs], "the mark of policies[0] is not after now");
  });

  it("an answer with the whole quota left (nothing charged): a store failure", async () => {
    // a leaky bucket with a queue answers with its 4 numbers: remaining, resetAt, delay, refillAt
    const queued = [leakyBucket({ rate: 1, period: "1s", burst: 3, queue: 2, name: "lb" })];
    const ms = nowUs / 1000;
    await refused(queued, [nowUs, 3, ms + 1000, 0, ms + 1000, nowUs + 1_000_000], "policies[0]'s state is none an allowed consume leaves");
  });

  it("a state in range is core's answer from it for a consume; for a peek, which never takes the fast path, a store failure", async () => {
    for (const [client, store] of stores(() => [nowUs, 3])) {
      const { decision } = await decide(store, fixed);
      expect([decision.reason, decision.remaining], client).toEqual(["ok", 2]);
      const limiter = new RateLimiter({ store, limits: fixed, denyCache: false });
      const peeked = await limiter.peek("k");
      expect(peeked.reason, client).toBe("store-error");
    }
  });
});

describe("the clock", () => {
  it("with a test clock, now must be exactly the time sent (a year from the process's clock is fine)", async () => {
    const sent = Date.UTC(2020, 0, 1, 0, 0, 0, 123);
    const end = Math.floor(sent / 60_000) * 60_000 + 60_000;
    for (const [client, store] of stores(() => [sent, 1, 4, end, 0, 0, end, 0], () => sent)) {
      expect((await decide(store, fixed)).decision.reason, client).toBe("ok");
    }
    await refused(fixed, [sent + 1, 1, 4, end, 0, 0, end, 0], `now is ${sent + 1}, but the store was sent the time ${sent}`, () => sent);
    await refused(fixed, [sent * 1000 + 1, 3], `now is ${sent * 1000 + 1} µs, but the store sent ${sent * 1000}`, () => sent);
  });

  it("with Redis's clock, now may be up to a day off this process's, not more", async () => {
    const now = Date.now() - 86_400_000 + 60_000;
    const end = now + 60_000;
    for (const [client, store] of stores(() => [now, 1, 4, end, 0, 0, end, 0])) {
      expect((await decide(store, fixed)).decision.reason, client).toBe("ok");
    }
    await refused(fixed, [now - 120_000, 1, 4, end, 0, 0, end, 0], "more than 24 h from this process's clock");
  });
});

describe("the control script's reply", () => {
  const cases: [string, unknown, string][] = [
    ["now 0", [0], "now is 0, more than 24 h from this process's clock"],
    ["a body that does not parse", [Date.now(), "q,=1"], 'the override\'s body "q,=1" does not parse'],
    ["a number for the body", [Date.now(), 5], "the override's body 5 does not parse"],
  ];
  it.each(cases)("%s: setOverride and getOverride reject with a SluiceStoreError", async (_label, reply, problem) => {
    for (const [client, store] of stores(() => reply)) {
      const limiter = new RateLimiter({ store, limits: fixed });
      for (const call of [() => limiter.setOverride("k", { scale: 2 }), () => limiter.getOverride("k")]) {
        const error = await call().catch((e: unknown) => e);
        expect(error, client).toBeInstanceOf(SluiceStoreError);
        expect((error as Error).message, client).toContain(`[sluice] [redis] malformed reply from the control script: ${problem}`);
      }
    }
  });
});
