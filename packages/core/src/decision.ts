/**
 * Decision building: what turns a store's answer (one result per policy) into the {@link Decision}
 * a caller gets — the binding policy, the reason, `retryAfterMs` and `delayMs` — and the decision
 * a limiter gives when its store failed and `onStoreError` is `"allow"` or `"deny"`. The decisions
 * it makes ({@link StoreDecision}) also carry, privately, what `RateLimiter.refund` checks and
 * gives back. The limiter (`limiter/`) orchestrates: when to ask the store, the timeout, the
 * fallback, the deny cache, leases.
 *
 * Internal to core: `toDecision` is public through `@sluice/core/store`, `STORE_FAILURE_RETRY_MS`
 * nowhere (it is the documented one second of a fail-closed decision's `Retry-After`).
 *
 * @module
 */
import type { Policy } from "./algorithms/index.js";
import { refundedMark, unitPrices } from "./engine.js";
import { effectivePolicies, overrideBody } from "./overrides.js";
import type { Decision, DecisionReason, PolicyResult, RefundCharge, StoreResult } from "./types.js";

/** A resolved promise shared by every decision that has no background work. */
const NO_PENDING: Promise<void> = Promise.resolve();
/** `retryAfterMs` of a fail-closed decision (`onStoreError: "deny"`): ask clients to come back in a second. */
export const STORE_FAILURE_RETRY_MS = 1000;

/** Whether a penalty box denies any of the policies (a loop: the denial path allocates nothing more). */
function anyBlocked(policies: readonly PolicyResult[]): boolean {
  for (let i = 0; i < policies.length; i++) if ((policies[i] as PolicyResult).blocked === true) return true;
  return false;
}

/**
 * Combines per-policy results into a {@link Decision}. The binding policy is, when denied, the
 * denying policy with the largest `retryAfterMs` (first on ties); when allowed, the policy with the
 * least `remaining` (first on ties).
 */
export function toDecision(result: StoreResult, reason?: DecisionReason): Decision {
  const decision = decisionOf(result.now, result.policies, reason);
  if (result.override !== undefined) decision.override = result.override;
  return decision;
}

/** {@link toDecision} from the parts of a {@link StoreResult}: `now` (epoch ms) and the policies' results. */
export function decisionOf(now: number, policies: PolicyResult[], reason?: DecisionReason): Decision {
  if (policies.length === 1) {
    // one policy: it binds (the common case, kept free of loops)
    const r = policies[0] as PolicyResult;
    const allowed = r.allowed;
    return new StoreDecision(
      allowed,
      now,
      r.limit,
      r.remaining,
      r.resetAt,
      allowed ? 0 : r.retryAfterMs,
      allowed ? r.delayMs : 0,
      r.policy,
      policies,
      reason ?? (allowed ? "ok" : r.blocked === true ? "blocked" : r.retryAfterMs === Infinity ? "cost-exceeds-limit" : "limit"),
    );
  }
  let allowed = true;
  for (let i = 0; i < policies.length; i++) if (!(policies[i] as PolicyResult).allowed) allowed = false;
  let binding = policies[0] as PolicyResult;
  let delayMs = 0;
  if (allowed) {
    for (let i = 0; i < policies.length; i++) {
      const r = policies[i] as PolicyResult;
      if (r.remaining < binding.remaining) binding = r;
      if (r.delayMs > delayMs) delayMs = r.delayMs;
    }
  } else {
    let found = false;
    for (let i = 0; i < policies.length; i++) {
      const r = policies[i] as PolicyResult;
      if (!r.allowed && (!found || r.retryAfterMs > binding.retryAfterMs)) {
        binding = r;
        found = true;
      }
    }
  }
  return new StoreDecision(
    allowed,
    now,
    binding.limit,
    binding.remaining,
    binding.resetAt,
    allowed ? 0 : binding.retryAfterMs,
    delayMs,
    binding.policy,
    policies,
    reason ?? (allowed ? "ok" : anyBlocked(policies) ? "blocked" : binding.retryAfterMs === Infinity ? "cost-exceeds-limit" : "limit"),
  );
}

/**
 * A decision as {@link toDecision} makes it: the {@link Decision} fields, in the same order as
 * before, plus what `refund()` needs to know of it — private fields, so spreading, JSON and
 * equality see a plain decision, and recording a charge costs a few stores, not a WeakMap entry per
 * allowed request (measured: the WeakMap took about a third of a hot key's decisions/s).
 */
// the fields of Decision, declared once (in types.ts) and set by the constructor in one order
export interface StoreDecision extends Decision {}
export class StoreDecision implements Decision {
  pending: Promise<void> = NO_PENDING;
  dryRun = false;
  declare lease?: string;
  /** The namespace (store, prefix, tier, policies) of the limiter that made it: see {@link namespaceToken}. */
  #owner: object | undefined = undefined;
  /** The key it was made for. */
  #key: string | undefined = undefined;
  /** Units the store charged for it and that no refund has given back yet. */
  #refundable = 0;
  /** Units of it given back so far. */
  #refunded = 0;
  /** The charge's marks, as the store returned them (`StoreResult.marks`). */
  #marks: readonly number[] | undefined = undefined;
  /** The refund of it in progress: refunds of one decision run one after another. */
  #refunding: Promise<unknown> | undefined = undefined;
  /** For a decision made from a reservation: the reservation's own charge, which its units came from. */
  #source: Decision | undefined = undefined;

  constructor(
    allowed: boolean,
    now: number,
    limit: number,
    remaining: number,
    resetAt: number,
    retryAfterMs: number,
    delayMs: number,
    policy: string,
    policies: PolicyResult[],
    reason: DecisionReason,
  ) {
    this.allowed = allowed;
    this.now = now;
    this.limit = limit;
    this.remaining = remaining;
    this.resetAt = resetAt;
    this.retryAfterMs = retryAfterMs;
    this.delayMs = delayMs;
    this.policy = policy;
    this.policies = policies;
    this.reason = reason;
  }

  /** Records which namespace and key a decision belongs to (a decision made elsewhere records nothing). */
  static stamp(decision: Decision, owner: object, key: string): void {
    if (decision instanceof StoreDecision) {
      decision.#owner = owner;
      decision.#key = key;
    }
  }

  /** Records that `decision` charged `units`, with the store's marks of the charge. */
  static charge(decision: Decision, units: number, marks: readonly number[] | undefined): void {
    if (decision instanceof StoreDecision) {
      decision.#refundable = units;
      decision.#marks = marks;
    }
  }

  /**
   * Why `decision` may not be refunded to `key` of the namespace `owner`: a message for
   * {@link SluiceInputError}, or `undefined` when it may.
   */
  static foreign(decision: Decision, owner: object, key: string): string | undefined {
    if (!(decision instanceof StoreDecision) || decision.#owner === undefined) {
      return "decision must be a Decision that limit() returned (a copy, a decision rebuilt from JSON or made by hand cannot be checked)";
    }
    if (decision.#owner !== owner) {
      return "decision must come from this limiter (a decision only refunds the limiter and key that charged it); got one made by a limiter of another namespace (another store, prefix, tier or list of policies)";
    }
    if (decision.#key !== key) {
      return `decision must be for the key ${JSON.stringify(key)} (a decision only refunds the key it charged); got one for ${JSON.stringify(decision.#key)}`;
    }
    return undefined;
  }

  /** Runs the refunds of one decision one after another (each needs to know what the previous gave back). */
  static serially<T>(decision: Decision, run: () => Promise<T>): Promise<T> {
    const d = decision as StoreDecision;
    const previous = d.#refunding;
    const next = previous === undefined ? run() : previous.then(run, run);
    d.#refunding = next;
    const clear = () => {
      if (d.#refunding === next) d.#refunding = undefined;
    };
    next.then(clear, clear);
    return next;
  }

  /** Units of `decision` still refundable (at most `units`), and the charge to name to the store. */
  static refundable(decision: Decision, units: number, policies: readonly Policy[]): { units: number; charge: RefundCharge } {
    const d = decision as StoreDecision;
    const marks = d.#marks;
    const refunded = d.#refunded;
    // a charge made under an override weighs what its effective policies said then (a bucket's T),
    // whatever override is in force when it is refunded
    const charged = d.override === undefined || marks === undefined ? policies : effectivePolicies(policies, overrideBody(d.override));
    const charge: RefundCharge = {
      atMs: d.now,
      marks: marks === undefined || refunded === 0 ? marks : marks.map((mark, i) => refundedMark(charged[i] as Policy, mark, refunded)),
      prices: marks === undefined ? undefined : unitPrices(charged),
    };
    return { units: Math.min(units, d.#refundable), charge };
  }

  /**
   * Records that `decision` (made from a reservation) took `units` of the reservation whose charge
   * is `source`: a refund of it gives back to that reservation, or through its charge.
   */
  static drawn(decision: Decision, units: number, source: Decision): void {
    if (decision instanceof StoreDecision) {
      decision.#refundable = units;
      decision.#source = source;
    }
  }

  /** The reservation charge a decision drew its units from (see {@link StoreDecision.drawn}), or `undefined`. */
  static sourceOf(decision: Decision): Decision | undefined {
    return decision instanceof StoreDecision ? decision.#source : undefined;
  }

  /** Units of `decision` still refundable. */
  static refundableUnits(decision: Decision): number {
    return decision instanceof StoreDecision ? decision.#refundable : 0;
  }

  /** Records that `units` of `decision` were given back (or may have been: a timeout). */
  static refunded(decision: Decision, units: number): void {
    const d = decision as StoreDecision;
    d.#refundable -= units;
    d.#refunded += units;
  }
}


/**
 * The decision of a limiter whose store failed, under `onStoreError: "allow"` (`allowed`: every
 * policy allows with its whole quota) or `"deny"` (every policy denies, to be retried in
 * {@link STORE_FAILURE_RETRY_MS}), at `now` by the limiter's own clock.
 */
export function storeFailureDecision(policies: readonly Policy[], now: number, allowed: boolean, reason: DecisionReason): Decision {
  const results: PolicyResult[] = policies.map((p) => ({
    policy: p.name,
    allowed,
    limit: p.limit,
    remaining: allowed ? p.limit : 0,
    resetAt: allowed ? now : now + STORE_FAILURE_RETRY_MS,
    retryAfterMs: allowed ? 0 : STORE_FAILURE_RETRY_MS,
    delayMs: 0,
    refillAt: allowed ? now : now + STORE_FAILURE_RETRY_MS,
  }));
  return toDecision({ now, policies: results }, reason);
}
