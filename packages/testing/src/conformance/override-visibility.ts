/**
 * Where an override or a block shows beyond the limiter that set it: a second limiter on the same
 * store and prefix sees it at its next decision, the headers carry the effective quotas, and the
 * limiter's own deny cache forgets the key at once.
 *
 * @module
 */
import { type Decision, RateLimiter, fixedWindow, setRateLimitHeaders, tokenBucket } from "@sluice/core";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";
import { burst, limitBrief } from "./helpers.js";

/** A second limiter, the headers and the deny cache see an override (or a block) at once. */
export function testOverrideVisibility(suite: SuiteContext): void {
  it("a second limiter on the same store and prefix sees an override and a block at its next decision; other keys keep the base quota", async () => {
    const prefix = suite.prefix();
    const policy = fixedWindow({ limit: 2, window: "1h", name: "hourly" });
    const admin = suite.limiter([policy], prefix);
    const worker = suite.limiter([policy], prefix);
    suite.at(0);
    expect((await worker.limit("k")).allowed).toBe(true);
    await admin.setOverride("k", { scale: 10 });
    expect(await worker.getOverride("k")).toEqual({ scale: 10 });
    const seen = await burst(worker, "k", 20);
    expect(seen.filter((d) => d.allowed).length).toBe(19); // 20 in all with the one before
    expect(seen.map((d) => [d.limit, d.override])).toEqual(Array(20).fill([20, { scale: 10 }]));
    expect((await burst(worker, "other", 3)).map((d) => [d.allowed, d.limit])).toEqual([
      [true, 2],
      [true, 2],
      [false, 2],
    ]);
    // another limiter of the prefix with other policies reads the key's override too
    const other = suite.limiter([tokenBucket({ capacity: 3, refillRate: 1, interval: "1h", name: "bucket" })], prefix);
    expect((await other.limit("k")).policies[0]!.limit).toBe(30);
    await admin.block("k", "1m");
    expect((await worker.limit("k")).reason).toBe("blocked");
    await admin.unblock("k");
    await admin.clearOverride("k");
    expect(limitBrief(await worker.limit("k"))).toMatchObject({ allowed: false, limit: 2, reason: "limit" });
  });

  it("the headers carry the effective quotas: q in RateLimit-Policy, r in RateLimit, the decision's limit in the others", async () => {
    const l = suite.limiter([fixedWindow({ limit: 3, window: "1m", name: "per-minute" }), tokenBucket({ capacity: 4, refillRate: 2, name: "burst" })]);
    const headersOf = (d: Decision) => {
      const headers = new Headers();
      setRateLimitHeaders(headers, d, ["ietf", "legacy"], l.policies);
      return ["RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After"].map((h) => headers.get(h));
    };
    suite.at(0);
    await l.setOverride("k", { scale: 2 }); // 6 per minute; 8 tokens, one per 250 ms
    const d = await l.limit("k");
    expect([d.policy, d.limit, d.remaining]).toEqual(["per-minute", 6, 5]);
    expect(headersOf(d)).toEqual(['"per-minute";q=6;w=60, "burst";q=8;w=2', '"per-minute";r=5;t=60, "burst";r=7;t=1', "6", "5", null]);
    await burst(l, "k", 5);
    const denied = await l.limit("k");
    expect(headersOf(denied)).toEqual(['"per-minute";q=6;w=60, "burst";q=8;w=2', '"per-minute";r=0;t=60, "burst";r=2;t=1', "6", "0", "60"]);
    // another key: the base quotas
    expect(headersOf(await l.limit("other"))).toEqual(['"per-minute";q=3;w=60, "burst";q=4;w=2', '"per-minute";r=2;t=60, "burst";r=3;t=1', "3", "2", null]);
  });

  it("the limiter's own setOverride and unblock end its cached denial of the key at once", async () => {
    let local = 0;
    const l = new RateLimiter({
      store: suite.store(),
      limits: fixedWindow({ limit: 1, window: "1h", name: "hourly" }),
      prefix: suite.prefix(),
      denyCache: { clock: () => local },
      timeoutMs: suite.storeTimeoutMs,
    });
    suite.at(0);
    expect((await l.limit("k")).allowed).toBe(true);
    expect((await l.limit("k")).allowed).toBe(false);
    local = 1000;
    suite.at(1000);
    await l.setOverride("k", { scale: 3 });
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 3, reason: "ok" });
    await l.block("k", "1h");
    expect((await l.limit("k")).reason).toBe("blocked");
    local = 2000;
    suite.at(2000);
    await l.unblock("k");
    expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, reason: "ok" });
  });
}
