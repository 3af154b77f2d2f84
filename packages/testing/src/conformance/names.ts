/**
 * The conformance suite's section on names as data, run on every store by `testStore`: a policy,
 * an override's quota key, a rate-limit key, a prefix and a tier named like a member of
 * `Object.prototype` (`toString`, `constructor`, `__proto__`, `hasOwnProperty`, `valueOf`) behave
 * exactly as an ordinary name does — the same decisions, the same headers, the override given back
 * as it was set. An ordinary name runs through the same tests, as the yardstick.
 *
 * Each test stays clear of every other suite sharing the store (several files run against one
 * redis-server at once): where a prefix, a tier and a key are all named, one of them is unique.
 *
 * @module
 */
import { type Decision, type Policy, RateLimiter, createGuard, fixedWindow, setRateLimitHeaders, slidingWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** The names `Object.prototype` answers for, each of which must be an ordinary name everywhere. */
export const PROTOTYPE_NAMES = Object.freeze(["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"]);

/** The prototype's names and an ordinary one, which every test must treat alike. */
const NAMES = [...PROTOTYPE_NAMES, "ordinary"];

/** What a decision says, times relative to `t0`. */
function briefOf(d: Decision, t0: number) {
  return {
    allowed: d.allowed,
    reason: d.reason,
    policy: d.policy,
    limit: d.limit,
    remaining: d.remaining,
    resetAt: d.resetAt - t0,
    retryAfterMs: d.retryAfterMs,
    policies: d.policies.map((p) => [p.policy, p.allowed, p.limit, p.remaining, p.resetAt - t0, p.retryAfterMs, p.refillAt - t0]),
  };
}

function headersOf(d: Decision, policies: readonly Policy[]): Record<string, string> {
  const headers = new Headers();
  setRateLimitHeaders(headers, d, ["ietf", "draft-6"], policies);
  return Object.fromEntries(headers);
}

/** `{ [name]: value }` as an own data property, whatever the name (JSON.parse makes `__proto__` one). */
function record(name: string, value: number): Record<string, number> {
  return JSON.parse(`{${JSON.stringify(name)}:${value}}`) as Record<string, number>;
}

/** Registers the names section (call inside a store's `describe`). */
export function testNames(suite: SuiteContext): void {
  const at = (ms: number) => suite.setNow(suite.t0 + ms);
  const brief = (d: Decision) => briefOf(d, suite.t0);
  /** A limiter over the store under test in the namespace (`prefix`, `tier`), asking the store every time. */
  const limiter = (limits: Policy[], prefix: string, tier?: string) =>
    new RateLimiter({ store: suite.store(), limits, prefix, tier, denyCache: false, onStoreError: "deny", timeoutMs: suite.storeTimeoutMs });

  describe.each(NAMES)("the name %j", (name) => {
    it("as a policy name, beside an override of another policy: its own quota, counted and shown", async () => {
      const l = suite.limiter([fixedWindow({ limit: 5, window: "1s", name: "other" }), tokenBucket({ capacity: 2, refillRate: 1, interval: "1s", name })]);
      at(0);
      await l.setOverride("k", { quotas: { other: 10 } });
      const seen = [await l.limit("k"), await l.limit("k"), await l.limit("k")];
      expect(seen.map(brief)).toEqual([
        { allowed: true, reason: "ok", policy: name, limit: 2, remaining: 1, resetAt: 1000, retryAfterMs: 0, policies: [["other", true, 10, 9, 1000, 0, 1000], [name, true, 2, 1, 1000, 0, 1000]] },
        { allowed: true, reason: "ok", policy: name, limit: 2, remaining: 0, resetAt: 2000, retryAfterMs: 0, policies: [["other", true, 10, 8, 1000, 0, 1000], [name, true, 2, 0, 2000, 0, 1000]] },
        { allowed: false, reason: "limit", policy: name, limit: 2, remaining: 0, resetAt: 2000, retryAfterMs: 1000, policies: [["other", true, 10, 8, 1000, 0, 1000], [name, false, 2, 0, 2000, 1000, 1000]] },
      ]);
      expect(seen.map((d) => d.override)).toEqual([{ quotas: { other: 10 } }, { quotas: { other: 10 } }, { quotas: { other: 10 } }]);
      expect(headersOf(seen[2]!, l.policies)).toEqual({
        "ratelimit-policy": `"other";q=10;w=1, "${name}";q=2;w=2`,
        ratelimit: `"other";r=8;t=1, "${name}";r=0;t=1`,
        "ratelimit-limit": "2",
        "ratelimit-remaining": "0",
        "ratelimit-reset": "2",
        "retry-after": "1",
      });
      // a second later the bucket has one token again, and the override still applies
      at(1000);
      expect(brief(await l.limit("k"))).toMatchObject({ allowed: true, limit: 2, remaining: 0, policies: [["other", true, 10, 9, 2000, 0, 2000], [name, true, 2, 0, 3000, 0, 2000]] });
    });

    it("as an override's quota key: applied, and given back by getOverride exactly as it was set", async () => {
      const l = suite.limiter([slidingWindow({ limit: 2, window: "1s", name }), fixedWindow({ limit: 100, window: "1s", name: "other" })]);
      const quotas = record(name, 4);
      at(0);
      await l.setOverride("k", { quotas });
      const got = await l.getOverride("k");
      expect(got).toEqual({ quotas });
      expect(Object.keys((got as { quotas: object }).quotas)).toEqual([name]);
      expect(Object.getPrototypeOf((got as { quotas: object }).quotas)).toBe(Object.prototype);
      expect(JSON.stringify(got)).toBe(`{"quotas":{"${name}":4}}`);
      const seen: Decision[] = [];
      for (let i = 0; i < 5; i++) seen.push(await l.limit("k"));
      expect(seen.map((d) => [d.allowed, d.reason, d.policy, d.limit, d.remaining, d.retryAfterMs])).toEqual([
        [true, "ok", name, 4, 3, 0],
        [true, "ok", name, 4, 2, 0],
        [true, "ok", name, 4, 1, 0],
        [true, "ok", name, 4, 0, 0],
        [false, "limit", name, 4, 0, 1250],
      ]);
      expect(seen[4]!.override).toEqual({ quotas });
      expect(seen[4]!.policies.map((p) => [p.policy, p.limit, p.remaining])).toEqual([
        [name, 4, 0],
        ["other", 100, 96],
      ]);
      expect(headersOf(seen[4]!, l.policies)["ratelimit-policy"]).toBe(`"${name}";q=4;w=1, "other";q=100;w=1`);
      // the quota is the named policy's only: another key keeps the base quota of 2
      const other = [await l.limit("k2"), await l.limit("k2"), await l.limit("k2")];
      expect(other.map((d) => [d.allowed, d.limit])).toEqual([
        [true, 2],
        [true, 2],
        [false, 2],
      ]);
      await l.clearOverride("k");
      expect(await l.getOverride("k")).toBeUndefined();
    });

    it("as a prefix and a key: state of its own, overrides and blocks on it", async () => {
      const limits = [fixedWindow({ limit: 2, window: "1s", name: "w" })];
      const tier = suite.prefix(); // unique, so that no other suite on this store shares the namespace
      const l = limiter(limits, name, tier);
      at(0);
      const first = [await l.limit(name), await l.limit(name), await l.limit(name)];
      expect(first.map((d) => [d.allowed, d.reason, d.remaining, d.retryAfterMs])).toEqual([
        [true, "ok", 1, 0],
        [true, "ok", 0, 0],
        [false, "limit", 0, 1000],
      ]);
      // another key of the namespace, and the same key in another prefix, start empty
      expect((await l.limit("other")).remaining).toBe(1);
      expect((await limiter(limits, "other", tier).limit(name)).remaining).toBe(1);
      await l.setOverride(name, { scale: 2 });
      expect(await l.getOverride(name)).toEqual({ scale: 2 });
      expect(await l.limit(name)).toMatchObject({ allowed: true, limit: 4, remaining: 1, override: { scale: 2 } });
      await l.block(name, "1m");
      expect(await l.limit(name)).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 60_000 });
      expect((await l.limit("other")).allowed).toBe(true);
      await l.unblock(name);
      await l.reset(name);
      expect(await l.getOverride(name)).toBeUndefined();
      expect(await l.limit(name)).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
    });

    it("as a tier name (and the key) of a tiered guard: its own limits, its own namespace", async () => {
      const prefix = suite.prefix();
      const tiers: Record<string, Policy[]> = { other: [fixedWindow({ limit: 5, window: "1s", name: "base" })] };
      Object.defineProperty(tiers, name, { value: [fixedWindow({ limit: 1, window: "1s", name })], enumerable: true });
      let chosen = name;
      const guard = createGuard({
        store: suite.store(),
        prefix,
        tiers,
        tier: () => chosen,
        tierCacheTtlMs: 0,
        key: () => name,
        denyCache: false,
        onStoreError: "deny",
        timeoutMs: suite.storeTimeoutMs,
        headers: ["ietf", "draft-6"],
      });
      const request = () => new Request("https://api.test/");
      at(0);
      const allowed = await guard(request());
      expect(brief(allowed.decision as Decision)).toEqual({ allowed: true, reason: "ok", policy: name, limit: 1, remaining: 0, resetAt: 1000, retryAfterMs: 0, policies: [[name, true, 1, 0, 1000, 0, 1000]] });
      const denied = await guard(request());
      expect(denied.response?.status).toBe(429);
      expect(Object.fromEntries(denied.headers)).toEqual({
        "ratelimit-policy": `"${name}";q=1;w=1`,
        ratelimit: `"${name}";r=0;t=1`,
        "ratelimit-limit": "1",
        "ratelimit-remaining": "0",
        "ratelimit-reset": "1",
        "retry-after": "1",
      });
      expect(await denied.response?.json()).toMatchObject({ retryAfter: 1, "violated-policies": [name] });
      // the other tier, for the same key, counts apart
      chosen = "other";
      expect(brief((await guard(request())).decision as Decision)).toMatchObject({ allowed: true, policy: "base", limit: 5, remaining: 4 });
    });
  });
}
