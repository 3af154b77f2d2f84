/**
 * The override and block calls themselves: `getOverride` reads what was set, a new override
 * replaces the old and `clearOverride` removes it; bad input is a `SluiceInputError` naming the
 * field, thrown before the store is asked; and every call, like every decision, is one round trip.
 *
 * @module
 */
import { type Override, RateLimiter, SluiceInputError, fixedWindow, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { maxQuota } from "@sluice/core/store";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";
import { burst, failure, recordingStore } from "./helpers.js";

/** Round trips of the override calls, bad input refused before the store, one store call each. */
export function testOverrideCalls(suite: SuiteContext): void {
  it("getOverride reads what was set; a new override replaces the old; clearOverride removes it (twice is fine)", async () => {
    const l = suite.limiter([fixedWindow({ limit: 4, window: "1m", name: "a" }), slidingLog({ limit: 6, window: "1m", name: "b" })]);
    suite.at(0);
    expect(await l.getOverride("k")).toBeUndefined();
    const values: Override[] = [{ scale: 1.5 }, { quotas: { b: 5, a: 3 } }, { quotas: { a: 9 } }, { unlimited: true }, { scale: 0.5 }];
    for (const value of values) {
      await l.setOverride("k", value);
      expect(await l.getOverride("k")).toEqual(value);
    }
    expect((await l.limit("k")).policies.map((p) => p.limit)).toEqual([2, 3]);
    expect(await l.getOverride("other")).toBeUndefined();
    await l.clearOverride("k");
    expect(await l.getOverride("k")).toBeUndefined();
    await l.clearOverride("k");
    await l.clearOverride("never-seen");
    const d = await l.limit("k");
    expect([d.override, d.policies.map((p) => [p.limit, p.remaining])]).toEqual([
      undefined,
      [
        [4, 2],
        [6, 4],
      ],
    ]);
  });

  it("bad input is a SluiceInputError naming the field, thrown before the store is asked: nothing stored changes", async () => {
    const policies = [
      fixedWindow({ limit: 3, window: "1m", name: "fixed" }),
      tokenBucket({ capacity: 4, refillRate: 1, name: "burst" }),
      slidingWindow({ limit: 5, window: "1s", name: "sliding" }),
    ];
    const counted = recordingStore(suite.store());
    const l = new RateLimiter({ store: counted.store, limits: policies, prefix: suite.prefix(), denyCache: false, timeoutMs: suite.storeTimeoutMs });
    suite.at(0);
    await l.setOverride("k", { scale: 2 }, { ttl: "1h" });
    await burst(l, "k", 2);
    await l.block("b", "1m");
    const state = async () => [await l.peek("k"), await l.getOverride("k"), await l.peek("b")].map((x) => JSON.parse(JSON.stringify(x)) as unknown);
    const before = await state();
    const bad: [string, () => Promise<unknown>][] = [
      ["override.scale", () => l.setOverride("k", { scale: -1 })],
      ["override.scale", () => l.setOverride("k", { scale: 0 })],
      ["override.scale", () => l.setOverride("k", { scale: Number.NaN })],
      ["override.scale", () => l.setOverride("k", { scale: Infinity })],
      ["override.scale", () => l.setOverride("k", { scale: "2" } as never)],
      // 3 × 0.3 rounds down to 0
      ["override.scale", () => l.setOverride("k", { scale: 0.3 })],
      // above the buckets' largest quota (2^40)
      ["override.scale", () => l.setOverride("k", { scale: 2 ** 40 })],
      ["override.quotas.nope", () => l.setOverride("k", { quotas: { nope: 5 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: 0 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: 2.5 } })],
      ["override.quotas.fixed", () => l.setOverride("k", { quotas: { fixed: -3 } })],
      ["override.quotas.burst", () => l.setOverride("k", { quotas: { burst: maxQuota(policies[1]!) + 1 } })],
      ["override.quotas.sliding", () => l.setOverride("k", { quotas: { sliding: maxQuota(policies[2]!) + 1 } })],
      ["override.quotas", () => l.setOverride("k", { quotas: {} })],
      ["override.unlimited", () => l.setOverride("k", { unlimited: false } as never)],
      ["override", () => l.setOverride("k", {} as never)],
      ["override", () => l.setOverride("k", { scale: 2, unlimited: true } as never)],
      ["override", () => l.setOverride("k", null as never)],
      ["override.ratio", () => l.setOverride("k", { ratio: 2 } as never)],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 0 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: -1000 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 1.5 })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: "soon" as never })],
      ["ttl", () => l.setOverride("k", { scale: 3 }, { ttl: 2 ** 31 })],
      ["options.expires", () => l.setOverride("k", { scale: 3 }, { expires: "1h" } as never)],
      ["key", () => l.setOverride("", { scale: 3 })],
      ["duration", () => l.block("k", 0)],
      ["duration", () => l.block("k", -5)],
      ["duration", () => l.block("k", "forever" as never)],
      ["duration", () => l.block("k", 2 ** 31)],
      ["key", () => l.block("", "1m")],
      ["key", () => l.unblock("")],
      ["key", () => l.clearOverride("")],
      ["key", () => l.getOverride("")],
    ];
    counted.calls.length = 0;
    for (const [option, call] of bad) {
      const error = await failure(call);
      expect([option, error instanceof SluiceInputError, (error as SluiceInputError | undefined)?.option]).toEqual([option, true, option]);
    }
    expect(counted.calls).toEqual([]);
    expect(await state()).toEqual(before);
    // the largest quota itself is fine
    await l.setOverride("max", { quotas: { sliding: maxQuota(policies[2]!), burst: maxQuota(policies[1]!) } });
    expect((await l.limit("max")).policies.map((p) => p.limit)).toEqual([3, 2 ** 40, Math.floor(Number.MAX_SAFE_INTEGER / 1000)]);
  });

  it("every override and block call, and every decision with or without an override, makes exactly one call to the store", async () => {
    const counted = recordingStore(suite.store());
    const l = new RateLimiter({
      store: counted.store,
      limits: [fixedWindow({ limit: 3, window: "1m", name: "fixed" }), tokenBucket({ capacity: 2, refillRate: 1, name: "burst" })],
      prefix: suite.prefix(),
      denyCache: false,
      timeoutMs: suite.storeTimeoutMs,
    });
    const one = async (label: string, call: () => Promise<unknown>) => {
      counted.calls.length = 0;
      await call();
      return [label, counted.calls.length === 1 ? "one call" : counted.calls.join(", ") || "no call"];
    };
    suite.at(0);
    const seen = [
      await one("limit, no override", () => l.limit("k")),
      await one("setOverride", () => l.setOverride("k", { scale: 2 }, { ttl: "1h" })),
      await one("getOverride", () => l.getOverride("k")),
      await one("limit, scaled", () => l.limit("k")),
      await one("peek, scaled", () => l.peek("k")),
      await one("refund, scaled", () => l.refund("k", { cost: 1 })),
      await one("setOverride quotas", () => l.setOverride("k", { quotas: { burst: 5 } })),
      await one("limit, quotas", () => l.limit("k", { cost: 2 })),
      await one("setOverride unlimited", () => l.setOverride("k", { unlimited: true })),
      await one("limit, unlimited", () => l.limit("k")),
      await one("block", () => l.block("k", "1m")),
      await one("limit, blocked", () => l.limit("k")),
      await one("unblock", () => l.unblock("k")),
      await one("clearOverride", () => l.clearOverride("k")),
      await one("limit, cleared", () => l.limit("k")),
      await one("reset", () => l.reset("k")),
    ];
    expect(seen).toEqual(seen.map(([label]) => [label, "one call"]));
  });
}
