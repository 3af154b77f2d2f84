/**
 * Concurrency caps (`concurrency({ limit, lease })`): one slot per allowed request until released
 * or until its lease expires on the store's clock, all or nothing with rate limits, released by a
 * reset and never by a refund.
 *
 * @module
 */
import { concurrency, fixedWindow, setRateLimitHeaders } from "@sluice/core";
import { expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { brief } from "./helpers.js";

/** Slots held, released, expired and reset. */
export function testConcurrency(suite: SuiteContext): void {
  it("holds one slot per allowed request, whatever its cost, until released; a denial says 1 s", async () => {
    const l = suite.limiter(concurrency({ limit: 2, name: "exports" }));
    suite.at(0);
    const a = await l.limit("k");
    const b = await l.limit("k", { cost: 5 });
    expect([a, b].map((d) => [d.allowed, d.remaining, typeof d.lease])).toEqual([
      [true, 1, "string"],
      [true, 0, "string"],
    ]);
    expect(a.lease).toMatch(/^[1-9][0-9]*$/);
    expect(a.lease).not.toBe(b.lease);
    // t: a slot may free any time, so within a second; full again when every lease has expired (30 s)
    expect(a.policies[0]).toEqual({ policy: "exports", allowed: true, limit: 2, remaining: 1, resetAt: T0 + 30_000, retryAfterMs: 0, delayMs: 0, refillAt: T0 + 1000 });
    const c = await l.limit("k");
    expect(brief(c)).toEqual({ allowed: false, remaining: 0, resetAt: 30_000, retryAfterMs: 1000, delayMs: 0, reason: "limit" });
    expect(c.lease).toBeUndefined();
    const headers = new Headers();
    setRateLimitHeaders(headers, c, ["ietf"], l.policies);
    expect([headers.get("RateLimit-Policy"), headers.get("RateLimit"), headers.get("Retry-After")]).toEqual([
      '"exports";q=2;qu="concurrent-requests"',
      '"exports";r=0;t=1',
      "1",
    ]);
    suite.at(500);
    expect(brief(await l.release("k", a))).toEqual({ allowed: true, remaining: 1, resetAt: 30_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect((await l.release("k", a.lease as string)).remaining).toBe(1); // released already: nothing changes
    expect((await l.release("k", "4503599627370495")).remaining).toBe(1); // a lease never handed out: nothing either
    expect((await l.release("other", b)).remaining).toBe(2); // another key holds no such lease
    const d = await l.limit("k");
    expect(brief(d)).toMatchObject({ allowed: true, remaining: 0, resetAt: 30_500 });
    expect((await l.limit("k")).allowed).toBe(false);
    expect((await l.limit("k2")).allowed).toBe(true); // keys never share slots
    await l.release("k", b);
    await l.release("k", d);
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 2, resetAt: 500, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(await l.release("k", "01").catch((e: unknown) => (e as Error).name)).toBe("SluiceInputError");
  });

  it("a lease never released expires after `lease` (the test clock): the wait is until the earliest expiry", async () => {
    const l = suite.limiter(concurrency({ limit: 2, lease: "5s" }));
    suite.at(0);
    await l.limit("k");
    suite.at(1000);
    await l.limit("k");
    suite.at(4500);
    expect(brief(await l.limit("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 6000, retryAfterMs: 500, delayMs: 0, reason: "limit" });
    suite.at(4999);
    expect(brief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1 });
    suite.at(5000); // the first lease has expired
    const e = await l.limit("k");
    expect(brief(e)).toEqual({ allowed: true, remaining: 0, resetAt: 10_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect(e.policies[0]!.refillAt).toBe(T0 + 6000); // the lease of t=1000 expires 1 s later
    suite.at(10_000);
    expect(brief(await l.peek("k"))).toEqual({ allowed: true, remaining: 2, resetAt: 10_000, retryAfterMs: 0, delayMs: 0, reason: "ok" });
    expect((await l.release("k", e)).remaining).toBe(2); // expired already: a no-op
  });

  it("is all or nothing with rate limits: a rate denial acquires no lease, a concurrency denial consumes no units", async () => {
    const l = suite.limiter([fixedWindow({ limit: 2, window: "1m", name: "per-minute" }), concurrency({ limit: 1, name: "one" })]);
    suite.at(0);
    const a = await l.limit("k");
    expect(a.policies.map((p) => p.remaining)).toEqual([1, 0]);
    const b = await l.limit("k");
    expect(b).toMatchObject({ allowed: false, policy: "one", retryAfterMs: 1000, reason: "limit" });
    expect(b.policies.map((p) => [p.allowed, p.remaining])).toEqual([
      [true, 1],
      [false, 0],
    ]);
    await l.release("k", a);
    const c = await l.limit("k");
    expect([c.allowed, c.policies.map((p) => p.remaining)]).toEqual([true, [0, 0]]);
    await l.release("k", c);
    const d = await l.limit("k");
    expect(d).toMatchObject({ allowed: false, policy: "per-minute", retryAfterMs: 60_000 });
    expect(d.lease).toBeUndefined();
    expect((await l.peek("k")).policies.map((p) => [p.allowed, p.remaining])).toEqual([
      [false, 0],
      [true, 1],
    ]);
  });

  it("reset frees every slot; a refund frees none", async () => {
    const l = suite.limiter(concurrency({ limit: 1 }));
    suite.at(0);
    const a = await l.limit("k");
    expect(a.policy).toBe("1-in-flight");
    await l.refund("k", { decision: a });
    expect((await l.limit("k")).allowed).toBe(false);
    await l.reset("k");
    expect((await l.limit("k")).allowed).toBe(true);
    expect((await l.release("k", a)).remaining).toBe(0); // a lease forgotten by the reset: a no-op
  });
}
