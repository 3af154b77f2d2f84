/**
 * Deciding: `limit()` and `peek()`. A key's reservation answers first, then its cached denial, then
 * the store: a MemoryStore's own namespace in place and without the `StoreResult` wrapper, any
 * other store through `BoundStore.consume` under the timeout. This is the hot path: no closure,
 * promise or allocation beyond the decision itself when the store answers in place.
 *
 * @module
 */
import { StoreDecision, decisionOf, toDecision } from "../decision.js";
import { assertKey } from "../keys.js";
import { newLeaseId } from "../leases.js";
import { isUnlimited } from "../overrides.js";
import type { Decision, MaybePromise, PolicyResult, StoreResult } from "../types.js";
import { type LimitOptions, costOf } from "./options.js";
import type { LimiterCore } from "./state.js";
import { failed, isThenable, marked, withTimeout } from "./store-calls.js";

/**
 * `limit()` without the promise when the store answers in place: the decision itself from
 * MemoryStore, a promise from a store that answers over the network. Bad input throws
 * synchronously. For the request pipeline too (`limitNow` of `index.ts`).
 */
export function limitNow(core: LimiterCore, key: string, options: LimitOptions | undefined): Decision | Promise<Decision> {
  assertKey(key);
  const cost = costOf(options);
  const reservations = core.reservations;
  if (reservations !== undefined) {
    // units this instance holds for the key: no round trip
    const reserved = reservations.take(key, cost);
    if (reserved !== undefined) return reserved;
  }
  const denials = core.denials;
  let sentAt = 0;
  if (denials !== undefined) {
    // a denial the store gave for this key and a cost no larger, still running: no round trip
    const cached = denials.size === 0 ? undefined : denials.answer(key, cost);
    if (cached !== undefined) return marked(core, cached, key);
    sentAt = denials.now();
  }
  // a lease id only when a concurrency policy needs one: the common path draws nothing
  const lease = core.concurrent ? newLeaseId() : 0;
  const memory = core.memory;
  if (memory !== undefined) {
    // MemoryStore's own namespace: no StoreResult wrapper, so a denial allocates nothing but
    // the decision and its policies' results
    let policies: PolicyResult[];
    try {
      policies = memory.consumePolicies(key, cost, lease);
    } catch (error) {
      return consumeFailed(core, error, key, cost, lease);
    }
    const decision = decisionOf(memory.lastNow, policies);
    if (memory.lastOverride !== undefined) decision.override = memory.lastOverride;
    return consumed(core, decision, key, cost, lease, false, sentAt, memory.lastMarks);
  }
  let result: MaybePromise<StoreResult>;
  try {
    result = lease === 0 ? core.bound.consume(key, cost) : core.bound.consume(key, cost, lease);
  } catch (error) {
    return consumeFailed(core, error, key, cost, lease);
  }
  if (isThenable(result)) return consumeRemote(core, result, key, cost, lease, sentAt);
  return consumed(core, toDecision(result), key, cost, lease, false, sentAt, result.marks);
}

/** `limit()` over a store that answers over the network: the answer, or the failure's decision. */
async function consumeRemote(core: LimiterCore, pending: Promise<StoreResult>, key: string, cost: number, lease: number, sentAt: number): Promise<Decision> {
  let result: StoreResult;
  try {
    result = await withTimeout(core, pending);
  } catch (error) {
    return consumeFailed(core, error, key, cost, lease);
  }
  return consumed(core, toDecision(result), key, cost, lease, true, sentAt, result.marks);
}

/**
 * The decision when the store failed (store failures, timeouts and the fallback's answers are
 * never cached); throws what must not be turned into a decision (config and input errors).
 */
function consumeFailed(core: LimiterCore, error: unknown, key: string, cost: number, lease: number): Decision {
  const decision = failed(core, error, (fallback) => fallback.consume(key, cost, lease) as StoreResult);
  // the fallback store holds the lease (onStoreError "allow" acquires none)
  if (lease !== 0 && decision.allowed && core.onStoreError === "fallback") {
    decision.lease = String(lease);
    core.fallbackLeases.add(lease);
  }
  return marked(core, decision, key);
}

/** The decision of a store's answer: the charge recorded for refunds, the lease, a remote denial cached. */
function consumed(
  core: LimiterCore,
  decision: Decision,
  key: string,
  cost: number,
  lease: number,
  remote: boolean,
  sentAt: number,
  marks: readonly number[] | undefined,
): Decision {
  const denials = core.denials;
  if (remote && denials !== undefined && !decision.allowed) {
    // a concurrency cap's retryAfterMs is a hint (a slot may free at any moment, in any process):
    // a denial it binds is not cached, or this process would refuse a key whose slots are free
    if (!core.concurrent || !core.concurrencyNames.has(decision.policy)) denials.remember(key, cost, decision, sentAt, denials.now());
    else if (denials.size !== 0) denials.forget(key);
  } else if (decision.allowed && !isUnlimited(decision.override)) {
    // under an unlimited override nothing was counted: nothing to refund, no slot to release.
    // Otherwise the key's state changed: a cached denial (of another cost) no longer reads as the store would
    if (remote && denials !== undefined && denials.size !== 0) denials.forget(key);
    StoreDecision.charge(decision, cost, marks);
    if (lease !== 0) decision.lease = String(lease);
  }
  const work = core.reservations?.observe(key, decision);
  if (work !== undefined) decision.pending = work;
  return marked(core, decision, key);
}

/** `peek()`: the key's state now, nothing consumed; the fallback's (or a failure's) when the store fails. */
export async function peek(core: LimiterCore, key: string): Promise<Decision> {
  assertKey(key);
  let result: MaybePromise<StoreResult>;
  try {
    result = core.bound.peek(key);
    if (isThenable(result)) result = await withTimeout(core, result);
  } catch (error) {
    return marked(core, failed(core, error, (fallback) => fallback.peek(key) as StoreResult), key);
  }
  return marked(core, toDecision(result), key);
}
