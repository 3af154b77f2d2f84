/**
 * The concurrency cap: at most `limit` requests of a key in flight, each holding a lease.
 *
 * State: `latest`, the latest expiry among the stored leases (µs), and `leases`, the
 * `[expires (µs), id]` pairs in the order they were acquired; an expired lease
 * counts for nothing and is dropped at the next write. Stored as `[expires, id, expires, id, ...]`
 * (the live leases only).
 *
 * @module
 */
import { type Duration, toMs } from "../../duration.js";
import { SluiceConfigError, describe } from "../../errors.js";
import { type AlgorithmDefinition, MAX_QUOTA, type PolicyCommon, ceilDiv, isDurationMs, quotaInt, requireObject, result, validateName } from "../definition.js";
import { type State, stateLayout } from "../state.js";

/**
 * A cap on requests in flight per key: each allowed request holds a lease (one slot, whatever its
 * cost) until it is released (the response has been produced) or `leaseMs` has passed.
 * `windowSeconds` is the lease in whole seconds (internal; the IETF `RateLimit-Policy` member of a
 * concurrency policy has no `w`, but `qu="concurrent-requests"`).
 */
export interface ConcurrencyPolicy extends PolicyCommon {
  readonly kind: "concurrency";
  /** How long a lease lives when it is never released (a crashed instance, a lost connection). */
  readonly leaseMs: number;
  /** Never set: a concurrency policy has no penalty box. */
  readonly block?: undefined;
}

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions {
  /** Requests of one key that may be in flight at once: a positive integer of at most 2^52 (`MAX_QUOTA`). */
  limit: number;
  /**
   * How long a lease lives if it is never released (the instance crashed, the connection was
   * lost): after it the slot is free again. Longer than your slowest response.
   * @default "30s"
   */
  lease?: Duration;
  /** Name for headers and keys. Default `"<limit>-in-flight"`, e.g. `"2-in-flight"`. */
  name?: string;
}

/**
 * Concurrency: at most `limit` requests of a key in flight at once — the draft's
 * `qu="concurrent-requests"` quota unit — for expensive endpoints (exports, LLM calls, report
 * generation). An allowed request acquires a lease (`decision.lease`); the request pipeline of every
 * adapter releases it when the response has been produced (for a streamed body, when the stream
 * ends or is cancelled), and `limiter.release(key, decision)` does so for code outside an adapter.
 * A lease never released (a crashed instance, a lost connection) expires after `lease`, so slots
 * never leak.
 *
 * It combines with rate policies in one limiter, checked atomically with them in one round trip,
 * all or nothing: a request a rate policy denies acquires no lease, and one the concurrency policy
 * denies consumes no rate units. A request takes one slot whatever its `cost`. A denial's
 * `retryAfterMs` is 1 s, or the earliest lease expiry when that is sooner (a release may come at
 * any moment, so no exact retry time exists); with more leases held than the limit (taken under a
 * larger quota that an override gave and took back), the expiry that frees a slot under it. It
 * takes no `block` (a `SluiceConfigError`): a concurrency denial ends as soon as a request
 * finishes; put the penalty box on a rate policy.
 *
 * @example
 * ```ts
 * const exports = new RateLimiter({
 *   limits: [concurrency({ limit: 2, name: "exports" }), fixedWindow({ limit: 100, window: "1h" })],
 * });
 * // RateLimit-Policy: "exports";q=2;qu="concurrent-requests", "100-per-1h";q=100;w=3600
 * ```
 */
export function concurrency(options: ConcurrencyOptions): ConcurrencyPolicy {
  requireObject(options, "concurrency");
  const limit = quotaInt(options.limit, "limit");
  const leaseMs = options.lease === undefined ? 30_000 : toMs(options.lease, "lease");
  if ((options as { block?: unknown }).block !== undefined) {
    throw new SluiceConfigError(
      `block must be left out of concurrency() (a concurrency denial ends as soon as a request in flight finishes); put block on a rate policy of the same limiter; got ${describe((options as { block?: unknown }).block)}`,
      { option: "block" },
    );
  }
  const name = options.name === undefined ? `${limit}-in-flight` : validateName(options.name, "name");
  return Object.freeze({ kind: "concurrency", name, limit, leaseMs, windowSeconds: ceilDiv(leaseMs, 1000) });
}

/** How long a denied concurrency request waits: until the earliest lease expires, at most 1 s (a release may come any time). */
export const CONCURRENCY_RETRY_MS = 1000;

/** Ms until a slot may free: the earliest expiry (rounded up), at most {@link CONCURRENCY_RETRY_MS}. */
function slotWaitMs(earliestUs: number, nowUs: number): number {
  return Math.min(CONCURRENCY_RETRY_MS, Math.ceil((earliestUs - nowUs) / 1000));
}

/**
 * The `n`-th earliest expiry among the live leases: with more leases held than the quota (taken
 * under a larger one: an override that ended or was lowered), a slot is free again only once the
 * surplus and one more have expired.
 */
function nthExpiry(leases: readonly number[], nowUs: number, n: number): number {
  const live: number[] = [];
  for (let i = 0; i < leases.length; i += 2) if ((leases[i] as number) > nowUs) live.push(leases[i] as number);
  live.sort((a, b) => a - b);
  return live[n - 1] as number;
}

/** Drops the expired `[expires, id]` pairs of a lease list in place, keeping the order. */
function dropExpired(leases: number[], nowUs: number): void {
  let w = 0;
  for (let r = 0; r < leases.length; r += 2) {
    if ((leases[r] as number) <= nowUs) continue;
    leases[w] = leases[r] as number;
    leases[w + 1] = leases[r + 1] as number;
    w += 2;
  }
  leases.length = w;
}

/** The latest expiry among the leases (µs), and the leases `[expires (µs), lease id, ...]`. */
type ConcurrencyState = State<"latest", "leases">;

export const concurrencyAlgorithm: AlgorithmDefinition<ConcurrencyPolicy, ConcurrencyState> = {
  kind: "concurrency",
  code: "cc",
  state: stateLayout(["latest"], ["leases"]),
  leases: true,
  create: (options) => concurrency(options as unknown as ConcurrencyOptions),
  options: (p) => ({ limit: p.limit, lease: p.leaseMs }),
  isValid: (p) => p.block === undefined && isDurationMs(p.leaseMs),
  maxCost: () => Infinity, // one slot per request, whatever its cost
  maxQuota: () => MAX_QUOTA,
  withQuota: (p, quota) => Object.freeze({ ...p, limit: quota }),
  quotaUnit: "concurrent-requests",

  /**
   * A request takes one slot whatever its cost. `refillAt` is when a slot may next free: the
   * earliest expiry of the leases held (after the request), at most {@link CONCURRENCY_RETRY_MS}
   * away (a release may come any time), `now` when none is held; a denial's `retryAfterMs` is the
   * same wait, so `t ≤ Retry-After`.
   */
  evaluate(policy, state, nowUs, cost, write, lease) {
    const leases = state.leases;
    const limit = policy.limit;
    const nowMs = Math.floor(nowUs / 1000);
    let live = 0;
    let earliest = Infinity;
    let latest = 0;
    if (leases !== undefined) {
      for (let i = 0; i < leases.length; i += 2) {
        const expires = leases[i] as number;
        if (expires <= nowUs) continue;
        live++;
        if (expires < earliest) earliest = expires;
        if (expires > latest) latest = expires;
      }
    }
    if (cost !== Infinity && live < limit) {
      const expires = nowUs + policy.leaseMs * 1000;
      if (write) {
        if (leases === undefined || live === 0) state.leases = [expires, lease];
        else {
          if (live * 2 < leases.length) dropExpired(leases, nowUs);
          leases.push(expires, lease);
        }
        state.latest = Math.max(latest, expires);
      }
      const first = Math.min(earliest, expires);
      return result(policy, true, limit - live - 1, Math.ceil(Math.max(latest, expires) / 1000), 0, 0, nowMs + slotWaitMs(first, nowUs));
    }
    const wait = live === 0 ? 0 : slotWaitMs(live <= limit ? earliest : nthExpiry(leases as number[], nowUs, live - limit + 1), nowUs);
    return result(policy, false, Math.max(0, limit - live), live === 0 ? nowMs : Math.ceil(latest / 1000), wait, 0, nowMs + wait);
  },

  /** A lease is freed by `release`, never by a refund. */
  refund: () => false,

  /** Frees lease `lease` (and drops the expired ones). An unknown, released or expired lease changes nothing but the purge. */
  release(_policy, state, nowUs, lease) {
    const leases = state.leases;
    if (leases === undefined) return false;
    let w = 0;
    let latest = 0;
    for (let r = 0; r < leases.length; r += 2) {
      const expires = leases[r] as number;
      if (expires <= nowUs || leases[r + 1] === lease) continue;
      leases[w] = expires;
      leases[w + 1] = leases[r + 1] as number;
      if (expires > latest) latest = expires;
      w += 2;
    }
    if (w === leases.length) return false;
    leases.length = w;
    if (w === 0) state.leases = undefined;
    state.latest = latest;
    return true;
  },

  expiresAtUs: (_policy, state) => state.latest,

  encode(_policy, state, nowUs, out) {
    const leases = state.leases ?? [];
    const before = out.length;
    for (let j = 0; j < leases.length; j += 2) {
      if ((leases[j] as number) > nowUs) out.push(leases[j] as number, leases[j + 1] as number);
    }
    return out.length > before;
  },

  decode(_policy, value, state, nowUs) {
    // [expires, lease expires, lease id, ...]: the live leases only (expired ones are purged on read)
    if (value.length % 2 !== 1) return false;
    const leases: number[] = [];
    let latest = 0;
    for (let j = 1; j < value.length; j += 2) {
      const expires = value[j] as number;
      const id = value[j + 1] as number;
      if (id < 0 || expires <= nowUs) continue;
      leases.push(expires, id);
      if (expires > latest) latest = expires;
    }
    if (leases.length === 0) return false;
    state.latest = latest;
    state.leases = leases;
    return true;
  },
};
