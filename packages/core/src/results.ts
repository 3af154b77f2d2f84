/**
 * What one policy decided, and why a decision came out as it did: the plain result types every
 * algorithm builds, kept below everything that uses them (algorithms, overrides, stores, the
 * limiter), so that none of those needs another to name them.
 *
 * @module
 */
/** Why a decision came out the way it did (see {@link Decision.reason}). */
export type DecisionReason = "ok" | "limit" | "cost-exceeds-limit" | "cached-deny" | "blocked" | "store-error" | "timeout";

/** The outcome for one configured policy. */
export interface PolicyResult {
  /** The policy's name. */
  policy: string;
  /** Whether this policy allowed the request (a policy that would have allowed a denied request says `true` and reports its state unchanged). */
  allowed: boolean;
  /** The policy's quota (`limit`, `capacity` or `burst`). */
  limit: number;
  /** Whole units left after this request (state now if nothing was consumed), `>= 0`. */
  remaining: number;
  /** Epoch ms when the policy is back to its full quota, rounded up. */
  resetAt: number;
  /** 0 if allowed; else ms until the same cost can pass; `Infinity` if it never can. */
  retryAfterMs: number;
  /** > 0 only for a leaky bucket with a queue: wait this long before serving. */
  delayMs: number;
  /**
   * Epoch ms when the policy's available quota next grows, rounded up: the end of the window for
   * a fixed window; the moment the next unit frees for a sliding window or log; the next token (or
   * drip) for the buckets; `now` when the quota is already full. The IETF `t` parameter
   * ("effective window") is counted to it, so `t` never exceeds a denial's `Retry-After`.
   */
  refillAt: number;
  /**
   * `true` when the policy's penalty box (`block`) denies the key: the block began with this
   * request, or is still running. Absent otherwise.
   */
  blocked?: boolean;
  /**
   * Epoch ms when the policy's penalty box ends, set with `blocked`. `retryAfterMs` may reach
   * further: a request made at `now + retryAfterMs` must also pass the policy itself, so that a
   * client which waits as told is never denied again for that wait.
   */
  blockedUntil?: number;
}
