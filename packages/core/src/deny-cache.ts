/**
 * The deny cache: a bounded, per-limiter memory of recent denials, so that a key a remote store has
 * just denied for R ms is answered locally (`reason: "cached-deny"`) for the rest of R, with no
 * round trip. A client that keeps hammering after its 429 then costs nothing but a map lookup.
 *
 * The rules, each chosen to stay correct rather than clever:
 * - **What is remembered:** only a denial with `reason: "limit"` or `"blocked"` (a penalty box
 *   running: then until the block's end or the policy's own retry time, whichever is later — the
 *   `retryAfterMs` the store gave) and a finite `retryAfterMs` that came back from the store
 *   asynchronously (a network round trip). Never a denial from the
 *   fallback store, a store error, a timeout or `onStoreError: "deny"` (those say nothing about the
 *   key), never `cost-exceeds-limit` (`retryAfterMs: Infinity`: it depends on the cost, not on
 *   the key's state, and is rare enough to ask the store each time), and never a synchronous
 *   store's answer (`MemoryStore` is already local: a cached answer would save nothing).
 * - **Which requests it answers:** the same key with the **same cost**. Another cost would get
 *   another answer from the store (a larger one a longer wait, perhaps another binding policy and
 *   policies denying that allowed this one; a smaller one may pass), so it goes to the store, and
 *   a denial of it replaces the entry.
 * - **For how long:** while the store's own answer would read the same, moved on: until R, and
 *   until the first moment any policy's quota grows (its `refillAt`: a bucket's next token, the
 *   end of a window, a slot that may free), after which that policy's `remaining` and `t` would
 *   read otherwise; a policy whose quota is whole changes nothing. Counted from the moment the
 *   store call was *sent* (the store decided no earlier, so its `now + R` is no earlier either),
 *   by the local monotonic clock (`performance.now()`, else `Date.now()`), minus
 *   {@link denyCacheMarginMs}: 5 ms plus 1 ms per second of that time (1000 ppm, twice the most
 *   NTP slews a clock, so two machines' clocks running apart cannot make a cached denial outlast
 *   the store's). A denial shorter than its margin is not cached.
 * - **What it answers:** every field of the store's denial, moved on by the time elapsed since it
 *   *arrived*: `now` later by that much, each denying policy's `retryAfterMs` shorter by that much
 *   (at least 1), `resetAt`, `refillAt`, `blockedUntil` and every other absolute time unchanged,
 *   `remaining`, `blocked` and `override` (the key's override that applied) as the store reported,
 *   `dryRun` as the limiter marks every decision — so the decision, and the headers (`RateLimit`,
 *   `RateLimit-Policy`, `Retry-After`, …), read exactly as the store's own denial would then, but
 *   for `reason: "cached-deny"`.
 * - **Bounded:** at most `maxKeys` entries, least recently used evicted first; expired entries are
 *   dropped when looked up. No timers.
 * - **At most `maxAgeMs`** (default 60 s) whatever R: a long denial (a penalty box of an hour, a
 *   manual block) is asked of the store again once a minute, so that what another instance changed
 *   is seen within that bound.
 * - **Forgotten** by the limiter's own `reset(key)`, `refund`, `release`, `setOverride`,
 *   `clearOverride`, `block` and `unblock` of the key.
 *
 * Staleness is the price: a `reset`, refund, `unblock` or raised quota made by *another* process
 * (or another limiter instance), and an override that ends (its `ttl`) while a denial is cached,
 * are seen when the entry expires: within the denial's own `retryAfterMs` and at most `maxAgeMs`.
 * Turn the cache off (`denyCache: false`) where that matters more than the saved round trips.
 *
 * @module
 */
import { SluiceConfigError, describe } from "./errors.js";
import type { Override } from "./overrides.js";
import type { Decision, DecisionReason, PolicyResult, StoreResult } from "./types.js";

/** Options of the deny cache: the `denyCache` option of `RateLimiter` (and of a tiered guard). */
export interface DenyCacheOptions {
  /**
   * The most keys remembered at once; the least recently used is forgotten first. Each entry
   * holds the key and a copy of its denial.
   * @default 10_000
   * @example
   * ```ts
   * new RateLimiter({ store, limits, denyCache: { maxKeys: 50_000 } });
   * ```
   */
  maxKeys?: number;
  /**
   * The longest an entry is used, whatever the denial's `retryAfterMs`: the bound on how long a
   * change made through another instance (an `unblock`, a raised quota, a reset) can go unseen
   * here. A positive integer of ms.
   * @default 60_000
   * @example
   * ```ts
   * new RateLimiter({ store, limits, denyCache: { maxAgeMs: 10_000 } });
   * ```
   */
  maxAgeMs?: number;
  /**
   * The local monotonic clock, in milliseconds from any origin (a test hook). Not epoch time: only
   * differences are used.
   * @default performance.now() where it exists, else Date.now()
   * @example
   * ```ts
   * let local = 0; // moved by the test, together with the store's test clock
   * new RateLimiter({ store, limits, denyCache: { clock: () => local } });
   * ```
   */
  clock?: () => number;
}

/**
 * The `denyCache` option: `true` or omitted for the default (on for every store but `MemoryStore`),
 * `false` for none, or its {@link DenyCacheOptions}.
 */
export type DenyCacheOption = boolean | DenyCacheOptions;

/** The default `maxAgeMs` of a deny cache: 60 s. */
export const DEFAULT_DENY_CACHE_MAX_AGE_MS = 60_000;

/** The default `maxKeys` of a deny cache. */
export const DEFAULT_DENY_CACHE_MAX_KEYS = 10_000;

/**
 * The skew margin taken off a denial of `retryAfterMs` before it is cached: 5 ms (rounding of
 * `retryAfterMs` to whole ms, coarse clocks) plus 1 ms per second of `retryAfterMs` (1000 ppm: two
 * clocks each within NTP's 500 ppm of true time).
 *
 * @example
 * ```ts
 * denyCacheMarginMs(1_000); // 6: a 1 s denial is answered locally for 994 ms
 * denyCacheMarginMs(60_000); // 65
 * ```
 */
export function denyCacheMarginMs(retryAfterMs: number): number {
  return 5 + Math.ceil(retryAfterMs / 1000);
}

interface Entry {
  /** The denied cost: the entry answers this cost only. */
  cost: number;
  /** Local ms after which the entry is no longer used. */
  expiresAt: number;
  /** Local ms when the store's answer arrived: the base of the time elapsed. */
  receivedAt: number;
  /** The store's denial: its clock and its per-policy results (a copy: the caller owns the decision). */
  now: number;
  policies: readonly PolicyResult[];
  /** The key's override that applied to the denial, if any: the answer carries it as the store's did. */
  override: Override | undefined;
}

/** The local monotonic clock: `performance.now()` where the runtime has one, else `Date.now()`. */
export function monotonicClock(): () => number {
  const perf = (globalThis as { performance?: { now?: () => number } }).performance;
  if (perf !== undefined && typeof perf.now === "function") return () => perf.now!();
  return Date.now;
}

/**
 * Validates the `denyCache` option (a `SluiceConfigError` whose `option` is `"denyCache"` or
 * `"denyCache.<field>"`). Returns `undefined` when the cache is off.
 */
export function resolveDenyCache(option: unknown, onByDefault: boolean): Required<DenyCacheOptions> | undefined {
  if (option === false) return undefined;
  if (option === undefined || option === true) {
    return option === true || onByDefault ? { maxKeys: DEFAULT_DENY_CACHE_MAX_KEYS, maxAgeMs: DEFAULT_DENY_CACHE_MAX_AGE_MS, clock: monotonicClock() } : undefined;
  }
  if (typeof option !== "object" || option === null || Array.isArray(option)) {
    throw new SluiceConfigError(`denyCache must be true, false or { maxKeys?, maxAgeMs?, clock? }; got ${describe(option)}`, { option: "denyCache" });
  }
  const { maxKeys = DEFAULT_DENY_CACHE_MAX_KEYS, maxAgeMs = DEFAULT_DENY_CACHE_MAX_AGE_MS, clock } = option as DenyCacheOptions;
  if (typeof maxAgeMs !== "number" || !Number.isSafeInteger(maxAgeMs) || maxAgeMs <= 0) {
    throw new SluiceConfigError(`denyCache.maxAgeMs must be a positive integer of ms; got ${describe(maxAgeMs)}`, { option: "denyCache.maxAgeMs" });
  }
  if (typeof maxKeys !== "number" || !Number.isSafeInteger(maxKeys) || maxKeys <= 0) {
    throw new SluiceConfigError(`denyCache.maxKeys must be a positive integer; got ${describe(maxKeys)}`, { option: "denyCache.maxKeys" });
  }
  if (clock !== undefined && typeof clock !== "function") {
    throw new SluiceConfigError(`denyCache.clock must be a function returning monotonic milliseconds; got ${describe(clock)}`, {
      option: "denyCache.clock",
    });
  }
  for (const name of Object.keys(option)) {
    if (name !== "maxKeys" && name !== "maxAgeMs" && name !== "clock") {
      throw new SluiceConfigError(`denyCache.${name} is not an option: denyCache takes maxKeys, maxAgeMs and clock`, { option: `denyCache.${name}` });
    }
  }
  return { maxKeys, maxAgeMs, clock: clock ?? monotonicClock() };
}

/**
 * How long after the store's `now` its denial still reads exactly as the store would answer it,
 * moved on (ms): until the denial's `retryAfterMs`, and until the first moment any policy's quota
 * grows (its `refillAt`), after which that policy's `remaining` and `t` would read otherwise. A
 * policy whose quota is already whole (`refillAt` at `now`) changes nothing.
 */
function unchangedForMs(decision: Pick<Decision, "now" | "retryAfterMs" | "policies">): number {
  let ms = decision.retryAfterMs;
  const policies = decision.policies;
  for (let i = 0; i < policies.length; i++) {
    const wait = (policies[i] as PolicyResult).refillAt - decision.now;
    if (wait > 0 && wait < ms) ms = wait;
  }
  return ms;
}

/**
 * A policy's result of a denial the store gave at `then`, as the store would give it at `now`
 * (while nothing changed the key's state): a denying policy's wait shorter by the time elapsed (at
 * least 1 ms), and a time that was `then` itself (a quota already whole: it is back, and grows
 * no more, "now") at `now`; every other absolute time as it was.
 */
function movedOn(p: PolicyResult, then: number, now: number): PolicyResult {
  const moved = { ...p };
  if (!p.allowed) moved.retryAfterMs = Math.max(1, p.retryAfterMs - (now - then));
  if (p.resetAt <= then) moved.resetAt = now;
  if (p.refillAt <= then) moved.refillAt = now;
  return moved;
}

/** A bounded LRU of denials, keyed by the rate-limit key. One per limiter. */
export class DenyCache {
  readonly maxKeys: number;
  readonly maxAgeMs: number;
  readonly now: () => number;
  /** Insertion order is recency order: the first entry is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  readonly #toDecision: (result: StoreResult, reason: DecisionReason) => Decision;

  constructor(options: Required<DenyCacheOptions>, toDecision: (result: StoreResult, reason: DecisionReason) => Decision) {
    this.maxKeys = options.maxKeys;
    this.maxAgeMs = options.maxAgeMs;
    this.now = options.clock;
    this.#toDecision = toDecision;
  }

  /** How many keys are remembered (expired entries included until they are looked up). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The cached denial for `key` at `cost`, moved on to now; `undefined` if there is none (no entry,
   * expired, or another cost than the one denied).
   */
  answer(key: string, cost: number): Decision | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    const now = this.now();
    if (now >= entry.expiresAt) {
      this.#entries.delete(key);
      return undefined;
    }
    if (cost !== entry.cost) return undefined;
    // most recently used: last in the map
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    const elapsed = Math.max(0, Math.floor(now - entry.receivedAt));
    const storeNow = entry.now + elapsed;
    const policies = entry.policies.map((p) => movedOn(p, entry.now, storeNow));
    return this.#toDecision({ now: storeNow, policies, override: entry.override }, "cached-deny");
  }

  /**
   * Remembers a store's denial of `key` at `cost` if it may be cached (see the module notes).
   * `sentAt` is the local time just before the store call, `receivedAt` when its answer came.
   */
  remember(key: string, cost: number, decision: Decision, sentAt: number, receivedAt: number): void {
    const entries = this.#entries;
    const cacheable = !decision.allowed && (decision.reason === "limit" || decision.reason === "blocked") && Number.isFinite(decision.retryAfterMs);
    const exactMs = cacheable ? unchangedForMs(decision) : 0;
    const expiresAt = Math.min(sentAt + exactMs - denyCacheMarginMs(exactMs), sentAt + this.maxAgeMs);
    if (!cacheable || expiresAt <= receivedAt) {
      // not kept (or already over, nearly): an entry of another cost goes too, since this answer
      // may have changed the key's state (a penalty box it started)
      entries.delete(key);
      return;
    }
    if (!entries.delete(key) && entries.size >= this.maxKeys) {
      entries.delete(entries.keys().next().value as string);
    }
    const policies = decision.policies.map((p) => ({ ...p }));
    entries.set(key, { cost, expiresAt, receivedAt, now: decision.now, policies, override: decision.override });
  }

  /** Forgets `key`'s denial (after a reset or a refund). */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** Forgets every denial. */
  clear(): void {
    this.#entries.clear();
  }
}
