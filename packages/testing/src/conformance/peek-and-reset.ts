/**
 * `peek` and `reset`: a peek consumes nothing and says whether a cost-1 request would pass; a reset
 * forgets every limit of one key and nothing else.
 *
 * @module
 */
import { fixedWindow, slidingLog } from "@sluice/core";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";
import { brief, burst } from "./helpers.js";

/** peek consumes nothing; reset forgets one key. */
export function testPeekAndReset(suite: SuiteContext): void {
  it("peek consumes nothing and says whether a cost-1 request would pass", async () => {
    const l = suite.limiter(fixedWindow({ limit: 2, window: "1m" }));
    suite.at(0);
    for (let i = 0; i < 5; i++) expect(brief(await l.peek("k"))).toMatchObject({ allowed: true, remaining: 2 });
    await burst(l, "k", 2);
    expect(brief(await l.peek("k"))).toEqual({ allowed: false, remaining: 0, resetAt: 60_000, retryAfterMs: 60_000, delayMs: 0, reason: "limit" });
  });

  it("reset forgets every limit of the key and only that key", async () => {
    const l = suite.limiter([fixedWindow({ limit: 2, window: "1m", name: "fixed" }), slidingLog({ limit: 2, window: "1m", name: "log" })]);
    suite.at(0);
    await burst(l, "k", 2);
    await burst(l, "other", 2);
    expect((await l.limit("k")).allowed).toBe(false);
    await l.reset("k");
    expect(await l.limit("k")).toMatchObject({ allowed: true, remaining: 1 });
    expect((await l.limit("other")).allowed).toBe(false);
    await l.reset("never-seen"); // resetting an unknown key is fine
  });
}
