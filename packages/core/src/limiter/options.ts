/**
 * The limiter's options, as a caller writes them, and the checks of those read on every call
 * (`cost`). The constructor's own checks are in `setup.ts`.
 *
 * @module
 */
import type { Policy } from "../algorithms/index.js";
import type { DenyCacheOption } from "../deny-cache.js";
import { SluiceInputError, type SluiceTimeoutError, describe } from "../errors.js";
import type { ReserveOption, ReserveOptions } from "../reservations.js";
import type { Decision, Store } from "../types.js";

/** What the limiter does when its store fails or times out. */
export type StoreErrorMode = "fallback" | "allow" | "deny";

/**
 * `"enforce"`: denied requests are denied. `"dry-run"` (shadow mode): every decision is computed
 * and every state change made exactly as when enforcing, and each decision says `dryRun: true`; the
 * request pipeline (`createGuard` and every adapter) then lets denied requests through.
 */
export type LimiterMode = "enforce" | "dry-run";

/** Options of {@link RateLimiter}. */
export interface RateLimiterOptions {
  /** One policy or several; a request must pass all of them (all or nothing). */
  limits: Policy | readonly Policy[];
  /**
   * Where state lives.
   * @default new MemoryStore()
   */
  store?: Store;
  /**
   * Key namespace: limiters with different prefixes never share state.
   * @default "sluice"
   */
  prefix?: string;
  /**
   * On a store failure or timeout: `"fallback"` runs the same limits in a per-instance
   * `MemoryStore` (limiting goes on, looser); `"allow"` fails open; `"deny"` fails closed (for auth
   * routes). The decision's `reason` is `"store-error"` or `"timeout"` either way.
   * @default "fallback"
   */
  onStoreError?: StoreErrorMode;
  /**
   * Milliseconds a store call may take before it counts as a failure (`reason: "timeout"`,
   * {@link SluiceTimeoutError}); `false` turns the timeout off. Only asynchronous stores can time
   * out: a synchronous store (`MemoryStore`) answers before a timer could fire. Left at its default,
   * a store that can tell a busy server from a hung one (`@sluice/redis`: one that answered other
   * calls within the last second) may keep a call waiting longer, up to 5 s in all (see
   * `BoundStore.extendTimeout`); a value set here is a hard limit.
   * @default 1000
   */
  timeoutMs?: number | false;
  /**
   * The plan this limiter's counters belong to: a tiered guard sets it for each tier, so a tier's
   * state never mixes with another tier's, nor with a plain limiter's under the same prefix. A name
   * like a policy name (visible ASCII, no spaces).
   * @default undefined (no tier)
   */
  tier?: string;
  /** Called with the error whenever a store call fails or times out (for logs and metrics). */
  onStoreFailure?: (error: unknown) => void;
  /**
   * The deny cache: once the store denies a key for `retryAfterMs` R (a limit, or a penalty box
   * that blocks it), later calls for that key with the same cost are answered here, with every
   * field of the store's denial moved on by the time elapsed (its `override` and penalty box
   * included, so the headers read as the store's own) and `reason: "cached-deny"`, with no store
   * round trip: for R, or less when a policy's quota grows sooner (by the local monotonic clock,
   * less a skew margin of 5 ms + 1 ms per second). Only asynchronous answers are cached, so it is
   * on by default for every store but `MemoryStore` (already local: nothing to save). Never cached: denials from the fallback store,
   * store errors, timeouts, and `cost-exceeds-limit`. `reset(key)` forgets the key's denial.
   * `true` turns it on with the defaults, `false` off; `{ maxKeys }` bounds it (least recently
   * used forgotten first). A reset made by another process is not seen until the entry expires.
   * A denial bound by a `concurrency()` limit is never cached: its slot may free at any moment, in
   * any process.
   * @default on ({ maxKeys: 10_000 }) for asynchronous stores; off for MemoryStore
   * @example
   * ```ts
   * const limiter = new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits, denyCache: { maxKeys: 50_000 } });
   * await limiter.limit("ip:203.0.113.7"); // denied by Redis: { allowed: false, reason: "limit" }
   * await limiter.limit("ip:203.0.113.7"); // { allowed: false, reason: "cached-deny" }, no request to Redis
   * ```
   */
  denyCache?: DenyCacheOption;
  /**
   * `"dry-run"` (shadow mode) measures a limit before it is enforced: decisions and state exactly
   * as when enforcing, every decision marked `dryRun: true` (`allowed` still says what enforcement
   * would do), and the request pipeline lets denied requests through — no 429, no `Retry-After`,
   * no `delayMs` wait, no rate-limit headers unless `dryRunHeaders: true` — reporting each of them
   * to `onLimited`, whose return value is ignored. Calling `limit()` yourself, read `dryRun` and
   * `allowed` and decide.
   * @default "enforce"
   * @example
   * ```ts
   * const limiter = new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }), mode: "dry-run" });
   * app.use(
   *   rateLimiter({
   *     limiter,
   *     key: (c) => c.req.header("x-api-key") ?? "anonymous",
   *     onLimited: (c, decision) => {
   *       if (decision.dryRun) metrics.increment("would-429", { policy: decision.policy }); // measured
   *       return c.json({ error: "slow down" }, 429); // sent once mode is "enforce"
   *     },
   *   }),
   * );
   * ```
   */
  mode?: LimiterMode;
  /**
   * Reservations: decisions without a round trip for hot keys. An instance that sees a key often
   * charges units for it ahead of their use, in one atomic store call, and admits that key's
   * requests from them locally (`decision.reserved === true`), asking for the next batch in the
   * background (`decision.pending`) before the units in hand run out. Strict by construction: a
   * unit is charged before it is used, a window's units serve only inside their window, a bucket's
   * are counted as used at the end of their hold, and a reservation lives at most `maxAgeMs`, so a
   * block or override set through another instance binds here within it (through this limiter, at
   * once). Near the limit nothing is reserved and every decision is exact. Unused units go back
   * through the exact refund (also on {@link RateLimiter.returnReservations}).
   *
   * Every algorithm reserves but the sliding log, a leaky bucket with a queue and a concurrency cap:
   * a limiter with one of those decides every request in the store. A `MemoryStore` is already
   * local: there it changes nothing. `true` turns it on with the defaults; see {@link ReserveOptions}.
   * @default false
   * @example
   * ```ts
   * const limiter = new RateLimiter({ store: new UpstashStore(Redis.fromEnv()), limits, reserve: { maxAgeMs: 1000 } });
   * const d = await limiter.limit("api-key:hot"); // d.reserved: true once the key is hot, no request to Redis
   * ```
   */
  reserve?: ReserveOption;
}

/** Options of one {@link RateLimiter.limit} call. */
export interface LimitOptions {
  /**
   * Units this request consumes: a positive safe integer.
   * @default 1
   */
  cost?: number;
}

/** Options of {@link RateLimiter.refund}. */
export interface RefundOptions {
  /**
   * Units to give back: a positive safe integer. Default: all the units `decision` charged, or 1
   * without a decision.
   */
  cost?: number;
  /** The decision `limit()` returned for the request: caps the refund at what it charged, in the window it was charged in. */
  decision?: Decision;
}

/** The default `timeoutMs` of a limiter over an asynchronous store. */
export const DEFAULT_TIMEOUT_MS = 1000;

/** The cost of one `limit()` call: its `cost` option, 1 without one. */
export function costOf(options: LimitOptions | undefined): number {
  if (options === undefined) return 1;
  if (typeof options !== "object" || options === null) {
    throw new SluiceInputError(`options must be an object like { cost: 1 }; got ${describe(options)}`, { option: "options" });
  }
  const cost = options.cost;
  if (cost === undefined) return 1;
  return checkCost(cost);
}

/** A cost (units) as given: a positive safe integer, else {@link SluiceInputError}. */
export function checkCost(cost: unknown): number {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    throw new SluiceInputError(`cost must be a positive safe integer; got ${describe(cost)}`, { option: "cost" });
  }
  return cost;
}
