/**
 * What a store may answer: the checks a store runs on a reply before it becomes a decision. A
 * reply that comes over a wire (Redis, a Durable Object's RPC) passes through parsers, proxies and
 * clients that Sluice does not control; one of the right length but with values no algorithm can
 * produce (a `now` of 0, a remaining above the quota, a retry time in the past) must be a store
 * failure, never a decision (see the Errors section of the design: a malformed reply is a
 * `SluiceStoreError`, and the limiter's `onStoreError` decides).
 *
 * Every range below follows from the algorithms (`algorithms/<kind>/`), for every override, penalty
 * box and manual block:
 *
 * - `remaining` lies in `[0, limit]`, `limit` being the policy's effective quota (its own under an
 *   unlimited override);
 * - `resetAt`, `refillAt` and `blockedUntil` are epoch ms no earlier than `now` and at most
 *   {@link MAX_AHEAD_US} after it; `blockedUntil` (with `blocked`) only on a denial;
 * - an allowed policy's `retryAfterMs` is 0 and its `delayMs` at least 0; a denying policy's
 *   `retryAfterMs` is at least 1 ms, `Infinity` exactly when the cost can never pass (it is larger
 *   than the policy's largest cost, and no unlimited override applies), no earlier than its
 *   `refillAt` otherwise, and its `delayMs` is 0;
 * - a mark (µs) lies in `[0, now + MAX_AHEAD_US]`;
 * - `now` is the clock the store was sent, exactly, or else within {@link MAX_CLOCK_SKEW_MS} of
 *   this process's clock.
 *
 * @module
 */
import { type Policy, algorithmOf } from "./algorithms/index.js";
import { describe } from "./errors.js";
import { effectivePolicies, overrideBody } from "./overrides.js";
import type { PolicyResult, StoreResult } from "./types.js";

/**
 * How far (ms) a store's clock may be from this process's when the store reads its own (Redis
 * `TIME`, a Durable Object's `Date.now()`): 24 hours. Clocks of a working deployment agree within
 * seconds, and one that NTP has lost drifts by minutes; a `now` a day or more away (1970, a count
 * in place of a time) is not a clock but a reply that went wrong on its way.
 */
export const MAX_CLOCK_SKEW_MS = 24 * 60 * 60 * 1000;

/**
 * How far after `now` (µs) any time in a store's answer may lie: 2^52 µs, about 142 years. The
 * furthest an algorithm reaches is a bucket's mark: its theoretical arrival time (at most 2^50 µs of
 * span ahead, a little more under an override) plus its refund shift (at most 2^50 µs).
 */
export const MAX_AHEAD_US = 2 ** 52;

/** {@link MAX_AHEAD_US} in whole ms, rounded up. */
const MAX_AHEAD_MS = Math.ceil(MAX_AHEAD_US / 1000);

/** What the store knows of the call a reply answers. */
export interface ReplyExpectations {
  /**
   * The `now` (epoch ms) the store sent with the call (a test clock, `clock: "client"`), as the
   * store's decision computes it; `undefined` when the store read its own clock.
   */
  readonly nowMs: number | undefined;
  /** The cost the call asked about: a consume's cost; 1 for a peek, a refund or a release. */
  readonly cost: number;
}

/**
 * Whether `now` (a store's clock, epoch ms) is the clock it was sent (`sentMs`), or, when none was
 * sent, within {@link MAX_CLOCK_SKEW_MS} of this process's. Returns what is wrong, or `undefined`.
 *
 * @example
 * ```ts
 * storeClockProblem(0, undefined); // "now is 0, more than 24 h from this process's clock (…)"
 * ```
 */
export function storeClockProblem(now: unknown, sentMs: number | undefined): string | undefined {
  if (!isInteger(now) || now < 0) return `now is ${describe(now)}, not an epoch time in ms`;
  if (sentMs !== undefined) return now === sentMs ? undefined : `now is ${now}, but the store was sent the time ${sentMs}`;
  const local = Date.now();
  if (Math.abs(now - local) > MAX_CLOCK_SKEW_MS) return `now is ${now}, more than 24 h from this process's clock (${local})`;
  return undefined;
}

/**
 * The first way `result` (a store's answer for `policies`, the namespace's own) falls outside what
 * the algorithms can produce (see the module notes), or `undefined` when it is a decision. A store
 * whose answers cross a wire calls it and throws a `SluiceStoreError` with the text.
 *
 * @example
 * ```ts
 * const problem = storeResultProblem(namespace.policies, result, { nowMs: undefined, cost });
 * if (problem !== undefined) throw new SluiceStoreError(`[sluice] [my-store] malformed reply: ${problem}`);
 * ```
 */
export function storeResultProblem(policies: readonly Policy[], result: StoreResult, expected: ReplyExpectations): string | undefined {
  const now = result.now;
  const clock = storeClockProblem(now, expected.nowMs);
  if (clock !== undefined) return clock;
  const list = result.policies;
  if (!Array.isArray(list) || list.length !== policies.length) return `policies must hold ${policies.length} results; got ${describe(list)}`;
  const override = result.override;
  const unlimited = override !== undefined && "unlimited" in override;
  const effective = override === undefined || unlimited ? policies : effectivePolicies(policies, overrideBody(override));
  for (let i = 0; i < list.length; i++) {
    const policy = effective[i] as Policy;
    // a cost beyond the largest a policy admits never passes (an unlimited override lets anything through)
    const neverPasses = !unlimited && expected.cost > algorithmOf(policy).maxCost(policy);
    const problem = policyResultProblem(list[i] as PolicyResult, policy, now, neverPasses);
    if (problem !== undefined) return `policies[${i}].${problem}`;
  }
  return marksProblem(result.marks, policies.length, now);
}

/** The first problem of one policy's result (its path inside the result first), or `undefined`. */
function policyResultProblem(r: PolicyResult, policy: Policy, now: number, neverPasses: boolean): string | undefined {
  if (typeof r !== "object" || r === null) return `result is ${describe(r)}`;
  if (r.policy !== policy.name) return `policy is ${describe(r.policy)}, not ${JSON.stringify(policy.name)}`;
  if (typeof r.allowed !== "boolean") return `allowed is ${describe(r.allowed)}, not a boolean`;
  if (r.limit !== policy.limit) return `limit is ${describe(r.limit)}, not the policy's quota ${policy.limit}`;
  return (
    outside("remaining", r.remaining, 0, policy.limit) ??
    outside("resetAt", r.resetAt, now, now + MAX_AHEAD_MS) ??
    outside("refillAt", r.refillAt, now, now + MAX_AHEAD_MS) ??
    retryProblem(r, now, neverPasses) ??
    outside("delayMs", r.delayMs, 0, r.allowed ? MAX_AHEAD_MS : 0) ??
    blockProblem(r, now)
  );
}

/**
 * An allowed policy waits 0; a denying one at least 1 ms, or never (`Infinity`) exactly when the
 * cost can never pass, and its quota grows again no later than the retry (so that a 429's
 * `Retry-After` is never earlier than the policy's `t`).
 */
function retryProblem(r: PolicyResult, now: number, neverPasses: boolean): string | undefined {
  const retry = r.retryAfterMs;
  if (r.allowed) return neverPasses ? "allowed is true for a cost the policy can never admit" : outside("retryAfterMs", retry, 0, 0);
  if (neverPasses) return retry === Infinity ? undefined : `retryAfterMs is ${describe(retry)} for a cost that can never pass (Infinity)`;
  return outside("retryAfterMs", retry, 1, MAX_AHEAD_MS) ?? (r.refillAt > now + retry ? `refillAt is ${r.refillAt}, after the retry at ${now + retry}` : undefined);
}

/** `blocked` and `blockedUntil` come together, only on a denial, and the block ends after now. */
function blockProblem(r: PolicyResult, now: number): string | undefined {
  if (r.blocked === undefined && r.blockedUntil === undefined) return undefined;
  if (r.blocked !== true) return `blocked is ${describe(r.blocked)}, not true or absent`;
  if (r.allowed) return "blocked is true on an allowed policy";
  return outside("blockedUntil", r.blockedUntil, now + 1, now + MAX_AHEAD_MS);
}

/** A charge's marks: one per policy, each a µs time no later than {@link MAX_AHEAD_US} after now (0: none). */
function marksProblem(marks: readonly number[] | undefined, n: number, now: number): string | undefined {
  if (marks === undefined) return undefined;
  if (!Array.isArray(marks) || marks.length !== n) return `marks must hold ${n} numbers; got ${describe(marks)}`;
  const latest = now * 1000 + 999 + MAX_AHEAD_US;
  for (let i = 0; i < n; i++) {
    const problem = outside(`marks[${i}]`, marks[i], 0, latest);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** `"<name> is <value>, outside [min, max]"` unless `value` is a safe integer in that range. */
function outside(name: string, value: unknown, min: number, max: number): string | undefined {
  return isInteger(value) && value >= min && value <= max ? undefined : `${name} is ${describe(value)}, outside [${min}, ${max}]`;
}

function isInteger(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value);
}
