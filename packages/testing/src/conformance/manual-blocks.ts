/**
 * Manual blocks (`limiter.block(key, duration)`, `unblock(key)`): every request of the key is
 * denied with reason `"blocked"` and `retryAfterMs` to the block's end (or the later own retry),
 * nothing is counted meanwhile; `unblock` lifts the penalty boxes too; a block beats an unlimited
 * override; `reset` forgets both.
 *
 * @module
 */
import { fixedWindow, tokenBucket } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { T0 } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";
import { burst, limitBrief } from "./helpers.js";

/** Manual blocks: denied until they end, lifted by unblock and reset, stronger than unlimited. */
export function testManualBlocks(suite: SuiteContext): void {
  describe("manual blocks", () => {
    it('block: every request denied with reason "blocked" and retryAfterMs to its end (or the later own retry), nothing counted; served at its end', async () => {
      const l = suite.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" }), tokenBucket({ capacity: 2, refillRate: 1, interval: "1h", name: "hourly" })]);
      suite.at(0);
      expect((await l.limit("k")).allowed).toBe(true);
      suite.at(1000);
      await l.block("k", "5s");
      const d = await l.limit("k");
      expect(limitBrief(d)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 5000, delayMs: 0, reason: "blocked" });
      expect(d.policies.map((p) => [p.policy, p.allowed, p.remaining, p.retryAfterMs, p.blocked, p.blockedUntil! - T0])).toEqual([
        ["fixed", false, 0, 5000, true, 6000],
        ["hourly", false, 0, 5000, true, 6000],
      ]);
      // two tokens need the bucket full again, an hour after 0: that own retry is later than the block's end
      expect(limitBrief(await l.limit("k", { cost: 2 }))).toMatchObject({ allowed: false, retryAfterMs: 3_599_000, reason: "blocked" });
      suite.at(2000);
      expect(limitBrief(await l.peek("k"))).toMatchObject({ allowed: false, retryAfterMs: 4000, reason: "blocked" });
      suite.at(5999);
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 1, reason: "blocked" });
      suite.at(6000);
      // nothing was counted while blocked
      const served = await l.limit("k");
      expect([served.allowed, served.reason, served.policies.map((p) => p.remaining)]).toEqual([true, "ok", [1, 0]]);
      // a second block replaces the first (last write wins), shorter or longer
      await l.block("k", "1h");
      await l.block("k", 500);
      suite.at(6499);
      expect((await l.limit("k")).reason).toBe("blocked");
      suite.at(6500);
      expect((await l.peek("k")).reason).not.toBe("blocked");
    });

    it("unblock lifts the manual block and the key's penalty boxes (this limiter's policies)", async () => {
      const l = suite.limiter([fixedWindow({ limit: 2, window: "1s", name: "login", block: "1m" })]);
      suite.at(0);
      await burst(l, "k", 2);
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 60_000, reason: "blocked" });
      suite.at(1000); // the window has rolled; the penalty box has not
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: false, retryAfterMs: 59_000, reason: "blocked" });
      await l.unblock("k");
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 1, reason: "ok" });
      await l.block("k", "1h");
      expect((await l.limit("k")).reason).toBe("blocked");
      await l.unblock("k");
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 0, reason: "ok" });
      await l.unblock("never-seen");
    });

    it("a manual block beats an unlimited override; reset forgets the block and the override", async () => {
      const l = suite.limiter([fixedWindow({ limit: 3, window: "1m", name: "fixed" })]);
      suite.at(0);
      await l.setOverride("k", { unlimited: true });
      await l.block("k", "2s");
      const d = await l.limit("k");
      // the unlimited answer (the whole quota, full now), blocked until the block's end
      expect([limitBrief(d), d.override]).toEqual([{ allowed: false, limit: 3, remaining: 0, resetAt: 2000, retryAfterMs: 2000, delayMs: 0, reason: "blocked" }, { unlimited: true }]);
      suite.at(2000);
      expect(limitBrief(await l.limit("k"))).toMatchObject({ allowed: true, remaining: 3, reason: "ok" });
      await l.setOverride("k", { scale: 2 });
      await l.block("k", "1h");
      await l.reset("k");
      expect(await l.getOverride("k")).toBeUndefined();
      const after = await l.limit("k");
      expect([limitBrief(after), after.override]).toEqual([{ allowed: true, limit: 3, remaining: 2, resetAt: 60_000, retryAfterMs: 0, delayMs: 0, reason: "ok" }, undefined]);
    });
  });
}
