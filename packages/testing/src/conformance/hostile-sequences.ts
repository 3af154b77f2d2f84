/**
 * Hostile sequences against the protection features, each a test that must hold on the store
 * under test: a refund of a decision made for another key, prefix, tier or list of policies; a
 * refund of a charge the refill has erased; a refund that fails before reaching the store, or times
 * out; and a blocked key answered by the deny cache for the whole wait.
 *
 * @module
 */
import { type Decision, type Policy, RateLimiter, type RateLimiterOptions, SluiceInputError, SluiceStoreError, type Store, fixedWindow, tokenBucket } from "@sluice/core";
import type { BoundStore, StoreNamespace } from "@sluice/core/store";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** A store that forwards to `inner`, letting a test step in: count calls, fail or hold one. */
function steppedInto(
  inner: Store,
  intercept: { consume?: () => void; refund?: (forward: () => Promise<unknown>) => Promise<unknown> | undefined },
): Store {
  return {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      return {
        consume: async (key, cost, lease) => {
          intercept.consume?.();
          return lease === undefined ? bound.consume(key, cost) : bound.consume(key, cost, lease);
        },
        peek: async (key) => bound.peek(key),
        reset: async (key) => bound.reset(key),
        refund: async (key, cost, charge) => {
          const forward = async () => bound.refund(key, cost, charge);
          const stepped = intercept.refund?.(forward);
          return (stepped ?? forward()) as ReturnType<BoundStore["refund"]>;
        },
        release: async (key, lease) => bound.release(key, lease),
        // overrides and manual blocks pass through untouched, when the store holds them
        ...(bound.control === undefined ? {} : { control: async (key: string, command: Parameters<NonNullable<BoundStore["control"]>>[1]) => bound.control!(key, command) }),
      };
    },
  };
}

/** Hostile sequences against the protection features, each a test that must hold on the store under test. */
export function testHostileSequences(suite: SuiteContext): void {
  const at = (ms: number) => suite.setNow(suite.t0 + ms);
  const make = (limits: Policy | Policy[], options: Partial<RateLimiterOptions> = {}) =>
    new RateLimiter({ store: suite.store(), limits, prefix: suite.prefix(), denyCache: false, timeoutMs: suite.storeTimeoutMs, ...options });

  it("refund() refuses a decision made for another key, prefix, tier or list of policies (SluiceInputError), and nothing changes", async () => {
    at(0);
    const limits = fixedWindow({ limit: 3, window: "1h", name: "hourly" });
    const prefix = suite.prefix();
    const l = make(limits, { prefix });
    const dA = await l.limit("A");
    for (let i = 0; i < 3; i++) expect((await l.limit("B")).allowed).toBe(true);
    const refused = async (decision: Decision) => {
      const error = await l.refund("B", { decision }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceInputError);
      expect((error as Error).message).toMatch(/decision/);
    };
    await refused(dA); // another key
    await refused(await make(limits).limit("B")); // another prefix
    await refused(await make(limits, { prefix, tier: "pro" }).limit("B")); // another tier
    // another list of policies under the same prefix: a cost-3 tokenBucket decision
    await refused(await make(tokenBucket({ capacity: 5, refillRate: 1, name: "hourly" }), { prefix }).limit("B", { cost: 3 }));
    await refused({ ...dA }); // a copy: cannot be checked
    const after = await l.limit("B");
    expect([after.allowed, after.remaining]).toEqual([false, 0]); // B was never given a 4th
    // the same namespace through another limiter object: its decisions are this limiter's too
    const twin = new RateLimiter({ store: suite.store(), limits, prefix, denyCache: false, timeoutMs: suite.storeTimeoutMs });
    expect((await twin.refund("A", { decision: dA })).remaining).toBe(3);
  });

  it("a bucket refund of a charge the refill has erased gives nothing back: no 4th admission at one instant", async () => {
    const l = make(tokenBucket({ capacity: 3, refillRate: 1 }));
    at(0);
    const old = await l.limit("k");
    expect(old.allowed).toBe(true);
    at(10_000); // full again long since
    const recent: Decision[] = [];
    for (let i = 0; i < 3; i++) recent.push(await l.limit("k"));
    expect(recent.map((d) => d.allowed)).toEqual([true, true, true]);
    expect((await l.refund("k", { decision: old })).remaining).toBe(0);
    expect((await l.limit("k")).allowed).toBe(false);
    // a charge still in effect is given back in full, once
    expect((await l.refund("k", { decision: recent[1]! })).remaining).toBe(1);
    expect((await l.refund("k", { decision: recent[1]! })).remaining).toBe(1);
    expect((await l.limit("k")).allowed).toBe(true);
    expect((await l.limit("k")).allowed).toBe(false);
  });

  it("a refund that fails before reaching the store leaves the decision's units refundable; after a timeout they count as given back", async () => {
    let mode: "pass" | "refused" | "hang" = "pass";
    const store = steppedInto(suite.store(), {
      refund: (forward) => {
        if (mode === "refused") return Promise.reject(new SluiceStoreError("connect ECONNREFUSED", { notApplied: true }));
        if (mode === "hang") return new Promise(() => {}); // never answers (the store may or may not have applied it)
        return forward();
      },
    });
    const options = { store, limits: fixedWindow({ limit: 2, window: "1h" }), prefix: suite.prefix(), denyCache: false };
    const l = new RateLimiter({ ...options, timeoutMs: suite.storeTimeoutMs });
    // the same namespace with a short timeout, for the call that never answers (answered calls get
    // the test's budget: on a loaded machine a real store may take longer than 50 ms)
    const impatient = new RateLimiter({ ...options, timeoutMs: 50 });
    at(0);
    const d = await l.limit("k");
    await l.limit("k");
    mode = "refused";
    await expect(l.refund("k", { decision: d })).rejects.toMatchObject({ name: "SluiceStoreError", notApplied: true });
    mode = "pass";
    expect((await l.refund("k", { decision: d })).remaining).toBe(1); // the retry gives the unit back
    const e = await l.limit("k");
    mode = "hang";
    await expect(impatient.refund("k", { decision: e })).rejects.toMatchObject({ name: "SluiceTimeoutError" });
    mode = "pass";
    expect((await l.refund("k", { decision: e })).remaining).toBe(0); // may have been applied: not twice
  });

  it("a blocked key is answered by the deny cache until its Retry-After: 200 calls, one store call", async () => {
    let consumes = 0;
    let local = 0;
    const store = steppedInto(suite.store(), { consume: () => consumes++ });
    const l = new RateLimiter({
      store,
      limits: fixedWindow({ limit: 1, window: "1h", name: "login", block: "1m" }),
      prefix: suite.prefix(),
      // an entry lives at most maxAgeMs (60 s by default, so that another instance's unblock is
      // seen within it): an hour here, to hold it for the whole wait
      denyCache: { clock: () => local, maxAgeMs: 3_600_000 },
    });
    at(0);
    expect((await l.limit("k")).allowed).toBe(true);
    const blocked = await l.limit("k");
    expect([blocked.reason, blocked.retryAfterMs]).toEqual(["blocked", 3_600_000]);
    consumes = 0;
    for (let i = 0; i < 200; i++) {
      local += 10_000; // 2,000 s in all: inside the wait (less its skew margin)
      at(local);
      const d = await l.limit("k");
      expect([d.allowed, d.reason]).toEqual([false, "cached-deny"]);
      expect(d.retryAfterMs).toBe(Math.max(1, 3_600_000 - local));
    }
    expect(consumes).toBe(0);
    local = 3_600_000; // the wait is over
    at(local);
    expect((await l.limit("k")).allowed).toBe(true);
    expect(consumes).toBe(1);
  });
}
