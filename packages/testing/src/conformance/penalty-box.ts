/**
 * The penalty box (a policy's `block` option): the denial that starts a block and every request
 * until it ends are `"blocked"`, for every policy of the key; repeats escalate up to `max` and a
 * quiet spell starts over; a client that retries when told is never blocked again for that wait.
 *
 * @module
 */
import { fixedWindow, setRateLimitHeaders, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { brief, burst } from "./helpers.js";

/** Blocks that start on a denial, escalate, and end exactly when they say. */
export function testPenaltyBox(suite: SuiteContext): void {
  it('block: "15m": the denial that starts it and every request until it ends are "blocked"', async () => {
    const l = suite.limiter(fixedWindow({ limit: 2, window: "1m", name: "login", block: "15m" }));
    suite.at(0);
    await burst(l, "k", 2);
    const third = await l.limit("k");
    expect(brief(third)).toEqual({ allowed: false, remaining: 0, resetAt: 900_000, retryAfterMs: 900_000, delayMs: 0, reason: "blocked" });
    expect(third.policies[0]).toMatchObject({ blocked: true, refillAt: T0 + 900_000 });
    const headers = new Headers();
    setRateLimitHeaders(headers, third, ["ietf"], l.policies);
    expect([headers.get("RateLimit"), headers.get("Retry-After")]).toEqual(['"login";r=0;t=900', "900"]);
    suite.at(60_000); // the window has rolled, the block has not
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 840_000, reason: "blocked" });
    expect(brief(await l.peek("k"))).toMatchObject({ allowed: false, retryAfterMs: 840_000, reason: "blocked" });
    suite.at(900_000 - 1);
    expect((await l.limit("k")).reason).toBe("blocked");
    suite.at(900_000);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
  });

  it("escalates repeats within max of the last block's end, and starts again after a quiet spell", async () => {
    const l = suite.limiter(tokenBucket({ capacity: 1, refillRate: 1, interval: "1h", block: { base: "1s", factor: 2, max: "4s" } }));
    suite.at(0);
    await l.limit("k");
    const blocks: number[] = [];
    let t = 0;
    for (let i = 0; i < 5; i++) {
      // a client that comes back as soon as each block ends, before the bucket has a token:
      // denied by the empty bucket again, a new block each time, each longer
      const d = await l.limit("k");
      expect(d.reason).toBe("blocked");
      const p = d.policies[0]!;
      blocks.push(p.blockedUntil! - d.now);
      // Retry-After is when the bucket has a token again (the later of that and the block's end)
      expect(d.retryAfterMs).toBe(3_600_000 - t);
      t = p.blockedUntil! - T0;
      suite.at(t);
    }
    expect(blocks).toEqual([1_000, 2_000, 4_000, 4_000, 4_000]);
    suite.at(t + 4_001); // more than max (4 s) after the last block ended: a first offence again
    const again = await l.limit("k");
    expect(again.policies[0]!.blockedUntil! - again.now).toBe(1_000);
  });

  it("a client that retries at now + retryAfterMs is never denied again for that wait, nor escalated", async () => {
    // Retry-After (the window's end, 1 h) is later than the block's end (1 min): a client that
    // waits for it has served its block, so its retry is allowed and counts as no repeat offence
    const l = suite.limiter(fixedWindow({ limit: 2, window: "1h", block: { base: "1m", factor: 2, max: "1h" } }));
    suite.at(0);
    await burst(l, "k", 2);
    const denied = await l.limit("k");
    expect([denied.reason, denied.retryAfterMs, denied.policies[0]!.blockedUntil! - denied.now]).toEqual(["blocked", 3_600_000, 60_000]);
    const headers = new Headers();
    setRateLimitHeaders(headers, denied, ["ietf"], l.policies);
    expect([headers.get("RateLimit"), headers.get("Retry-After")]).toEqual(['"2-per-1h";r=0;t=3600', "3600"]);
    suite.at(denied.retryAfterMs);
    const retried = await l.limit("k");
    expect([retried.allowed, retried.reason]).toEqual([true, "ok"]);
    // over the limit again within an hour of the last block's end: a repeat, blocked for 2 min
    await l.limit("k");
    const again = await l.limit("k");
    expect([again.reason, again.policies[0]!.blockedUntil! - again.now, again.retryAfterMs]).toEqual(["blocked", 120_000, 3_600_000]);
    // a client that comes back when the block ends, not when told, is denied by the window: a third offence
    suite.at(denied.retryAfterMs + 120_000);
    const early = await l.limit("k");
    expect([early.reason, early.policies[0]!.blockedUntil! - early.now]).toEqual(["blocked", 240_000]);
  });

  it("blocks the key for every policy, consumes nothing meanwhile; reset lifts it; a cost that can never pass is no offence", async () => {
    const l = suite.limiter([
      fixedWindow({ limit: 3, window: "1m", name: "burst", block: "10s" }),
      fixedWindow({ limit: 100, window: "1h", name: "hourly" }),
    ]);
    suite.at(0);
    expect((await l.limit("k", { cost: 101 })).reason).toBe("cost-exceeds-limit");
    expect((await l.limit("k")).allowed).toBe(true);
    await burst(l, "k", 2);
    const d = await l.limit("k");
    expect(d.reason).toBe("blocked");
    // blocked for 10 s; told to come back when the window ends (60 s), when the request passes
    expect(d.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs, p.blocked, p.blockedUntil])).toEqual([
      ["burst", false, 0, 60_000, true, T0 + 10_000],
      ["hourly", true, 97, 0, undefined, undefined],
    ]);
    suite.at(5_000);
    await burst(l, "k", 3);
    expect((await l.peek("k")).policies[1]!.remaining).toBe(97);
    await l.reset("k");
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, reason: "ok" });
  });
}
