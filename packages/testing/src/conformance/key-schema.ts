/**
 * The key-schema suite every store must pass: `testKeySchema({ name, makeStore })` registers Vitest
 * tests that two different (prefix, tier, key) never share state — the collisions of a store that
 * joins the parts with ":" (prefix `"app"` + key `"team:alice"` against prefix `"app:team"` + key
 * `"alice"`; a tier's namespace `P`/`free` + `"bob"` against plain `P` + `"free:bob"`), the escape
 * characters themselves, hash-tag braces — and that keys with lone surrogates are refused with
 * `SluiceInputError` before the store is called, while `"\ufffd"` (what a UTF-8 client would have
 * turned them into) is a key of its own.
 *
 * @example
 * ```ts
 * import { MemoryStore } from "@sluice/core";
 * import { testKeySchema } from "@sluice/testing/key-schema";
 *
 * testKeySchema({ name: "memory", makeStore: ({ clock }) => new MemoryStore({ clock }) });
 * ```
 *
 * @module
 */
import { type Policy, RateLimiter, SluiceInputError, type Store, fixedWindow, slidingLog, tokenBucket } from "@sluice/core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { T0, uniquePrefix } from "../suite-shared.js";
import type { SuiteContext } from "./context.js";

/** Options of {@link testKeySchema}: the same shape as `testStore`'s. */
export interface TestKeySchemaOptions {
  /** Suite name, e.g. `"memory"` or `"RedisStore + ioredis"`. */
  name: string;
  /** Builds the store under test; `clock` (epoch ms) is the store's test hook for time. */
  makeStore: (hooks: { clock: () => number }) => Store | Promise<Store>;
  /** Runs once after the suite (close connections). */
  teardown?: () => void | Promise<void>;
  /** Per-test timeout in ms. @default 20_000 */
  timeoutMs?: number;
  /** The limiters' `timeoutMs` (the test's budget, not the production default). @default half of timeoutMs */
  storeTimeoutMs?: number;
}

/**
 * The key-schema suite as a module of the conformance suite: on the suite's store, with its clock
 * at `T0 + 1234` (the time the key-schema suite's own store would read).
 */
export function testKeySchemaIn(suite: SuiteContext): void {
  beforeAll(() => {
    suite.at(1234);
  });
  testKeySchema({ name: suite.name, makeStore: () => suite.store(), timeoutMs: suite.timeoutMs, storeTimeoutMs: suite.storeTimeoutMs });
}

/** Registers the key-schema suite for one store. */
export function testKeySchema(options: TestKeySchemaOptions): void {
  const now = T0 + 1234;
  let store: Store;
  const failures: unknown[] = [];
  /** A quota of one per hour (every algorithm family: the schema must not depend on it). */
  const one = (): Policy[] => [fixedWindow({ limit: 1, window: "1h", name: "once" })];
  const limiter = (prefix: string, extra: { tier?: string; limits?: Policy[] } = {}) =>
    new RateLimiter({
      store,
      limits: extra.limits ?? one(),
      prefix,
      ...(extra.tier === undefined ? {} : { tier: extra.tier }),
      onStoreError: "deny",
      onStoreFailure: (error) => failures.push(error),
      timeoutMs: options.storeTimeoutMs ?? Math.floor((options.timeoutMs ?? 20_000) / 2),
    });
  /** Spends `a`'s one unit, then says whether `b` can still spend its own. */
  const separate = async (a: [RateLimiter, string], b: [RateLimiter, string]) => {
    expect((await a[0].limit(a[1])).allowed).toBe(true);
    expect((await a[0].limit(a[1])).allowed).toBe(false);
    return (await b[0].limit(b[1])).allowed;
  };

  describe(`key schema: ${options.name}`, { timeout: options.timeoutMs ?? 20_000 }, () => {
    beforeAll(async () => {
      store = await options.makeStore({ clock: () => now });
    });
    afterAll(async () => {
      await options.teardown?.();
    });
    afterEach(() => {
      const seen = failures.splice(0);
      if (seen.length > 0) throw new Error(`the store failed during the test: ${String(seen[0])}`, { cause: seen[0] });
    });

    it('prefix "app" + key "team:alice" and prefix "app:team" + key "alice" are two quotas', async () => {
      const base = uniquePrefix("ks");
      expect(await separate([limiter(`${base}-app`), "team:alice"], [limiter(`${base}-app:team`), "alice"])).toBe(true);
      // and the other way round, on fresh keys
      expect(await separate([limiter(`${base}-app:team`), "bob"], [limiter(`${base}-app`), "team:bob"])).toBe(true);
    });

    it('a tier\'s namespace (prefix P, tier "free") + "bob" and plain P + "free:bob" are two quotas', async () => {
      const P = uniquePrefix("ks");
      expect(await separate([limiter(P, { tier: "free" }), "bob"], [limiter(P), "free:bob"])).toBe(true);
      expect(await separate([limiter(P), "free:carol"], [limiter(P, { tier: "free" }), "carol"])).toBe(true);
      // and prefix "P:free" with no tier is yet another namespace
      expect(await separate([limiter(P, { tier: "free" }), "dave"], [limiter(`${P}:free`), "dave"])).toBe(true);
      // two tiers of one prefix never share
      expect(await separate([limiter(P, { tier: "free" }), "erin"], [limiter(P, { tier: "pro" }), "erin"])).toBe(true);
    });

    it("escape characters and hash-tag braces in prefixes and keys never make two namespaces meet", async () => {
      const base = uniquePrefix("ks");
      // "%3A" is how ":" is escaped: a literal "%3A" must not meet a real ":"
      expect(await separate([limiter(`${base}-a:b`), "k"], [limiter(`${base}-a%3Ab`), "k"])).toBe(true);
      expect(await separate([limiter(base), "x:y"], [limiter(base), "x%3Ay"])).toBe(true);
      // braces: a key that closes the hash tag early must not reach another identifier
      expect(await separate([limiter(base), "u}:{v"], [limiter(base), "u"])).toBe(true);
      expect(await separate([limiter(base), "{w}"], [limiter(base), "w"])).toBe(true);
      // the ":" on either side of the join: prefix "p" + key ":k" against prefix "p:" + key "k"
      expect(await separate([limiter(`${base}-p`), ":k"], [limiter(`${base}-p:`), "k"])).toBe(true);
    });

    it("the same (prefix, tier, key) shares one quota across limiters", async () => {
      const P = uniquePrefix("ks");
      expect(await separate([limiter(P, { tier: "free" }), "team:alice"], [limiter(P, { tier: "free" }), "team:alice"])).toBe(false);
    });

    it('keys with lone surrogates are refused with SluiceInputError; "\\ufffd" is a quota of its own', async () => {
      const P = uniquePrefix("ks");
      const l = limiter(P, { limits: [fixedWindow({ limit: 1, window: "1h", name: "once" }), slidingLog({ limit: 1, window: "1h", name: "log" })] });
      for (const bad of ["\ud800", "\udc00", "a\ud800b", "\udc00\ud800", "\ud83d"]) {
        await expect(l.limit(bad), JSON.stringify(bad)).rejects.toBeInstanceOf(SluiceInputError);
        await expect(l.peek(bad), JSON.stringify(bad)).rejects.toBeInstanceOf(SluiceInputError);
      }
      expect((await l.limit("\ufffd")).allowed).toBe(true);
      expect((await l.limit("\ufffd")).allowed).toBe(false);
      // a well-formed pair and other replacement-looking keys are their own quotas
      expect((await l.limit("\ud83d\ude00")).allowed).toBe(true);
      expect((await l.limit("\ufffd\ufffd")).allowed).toBe(true);
      expect((await l.limit("?")).allowed).toBe(true);
    });

    it("keys of up to 4096 characters work (multi-byte included); longer ones are refused", async () => {
      const l = limiter(uniquePrefix("ks"), { limits: [tokenBucket({ capacity: 1, refillRate: 1, interval: "1h", name: "tb" })] });
      const long = "\u00e9".repeat(4096);
      expect((await l.limit(long)).allowed).toBe(true);
      expect((await l.limit(long)).allowed).toBe(false);
      expect((await l.limit(`${long.slice(1)}e`)).allowed).toBe(true);
      await expect(l.limit("k".repeat(4097))).rejects.toBeInstanceOf(SluiceInputError);
    });
  });
}
