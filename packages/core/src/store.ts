/**
 * `@sluice/core/store`: what a store author needs, and nothing an application does.
 *
 * - The contract: {@link Store}, {@link BoundStore}, {@link StoreNamespace}, {@link StoreResult}.
 * - The one key schema: {@link storageKey} (the identifier of a key in a namespace, the same on
 *   every store), {@link policyField} (the field a policy's state lives under), and the limits
 *   every store enforces, {@link MAX_POLICIES} and {@link MAX_KEY_LENGTH}, with
 *   {@link assertNamespace} and {@link assertKey} to check them.
 * - A pure decision over a JSON value: {@link decideState} and {@link peekState} (and
 *   {@link refundState}, {@link releaseState}) take the key's
 *   stored state (whatever your storage returns, parsed) and give back the results and the state
 *   to write. The algorithms, their state format and its expiry stay inside Sluice: a store only
 *   reads, decides and writes, atomically per identifier. (How the algorithms lay out their
 *   numbers in memory, `MemoryStore`'s typed arrays, is not part of this entry.)
 * - {@link toDecision}, the {@link Decision} a limiter makes of a {@link StoreResult} (for a
 *   wrapper that reports what its store answered); the constants and plain-data form of the
 *   policies a store in another language or process mirrors ({@link CONCURRENCY_RETRY_MS},
 *   {@link MAX_GCRA_SHIFT_US}, {@link MAX_QUOTA}, {@link policyData}, {@link policyFromData}, {@link POLICY_KINDS}, {@link blockDurationMs}).
 * - The checks of a reply that crossed a wire ({@link storeResultProblem}, {@link storeClockProblem}):
 *   a reply that no algorithm can produce is a store failure, never a decision.
 *
 * Every method of a {@link BoundStore} but `extendTimeout` is required, `refund` and `release`
 * included: a `RateLimiter` refuses a store without them at construction.
 *
 * @example
 * ```ts
 * import { type BoundStore, type Store, type StoreNamespace, type StoredState, assertNamespace, decideState, peekState, refundState, releaseState, storageKey } from "@sluice/core/store";
 *
 * // A store over any storage with an atomic read-modify-write per identifier (a Map here).
 * export class MapStore implements Store {
 *   readonly #rows = new Map<string, { state: StoredState; expiresAtUs: number }>();
 *
 *   bind(namespace: StoreNamespace): BoundStore {
 *     assertNamespace(namespace, "my-store");
 *     const rows = this.#rows;
 *     return {
 *       consume(key, cost, lease) {
 *         const id = storageKey(namespace, key);
 *         const nowUs = Date.now() * 1000;
 *         const d = decideState(namespace.policies, rows.get(id)?.state, nowUs, cost, lease);
 *         if (d.state !== undefined) rows.set(id, { state: d.state, expiresAtUs: d.expiresAtUs });
 *         return { now: Math.floor(nowUs / 1000), policies: d.policies, marks: d.marks };
 *       },
 *       // gives units back to the charge the limiter names (its decision's now and marks)
 *       refund(key, cost, charge) {
 *         const id = storageKey(namespace, key);
 *         const nowUs = Date.now() * 1000;
 *         const d = refundState(namespace.policies, rows.get(id)?.state, nowUs, cost, charge);
 *         if (d.state !== undefined) rows.set(id, { state: d.state, expiresAtUs: d.expiresAtUs });
 *         return { now: Math.floor(nowUs / 1000), policies: d.policies };
 *       },
 *       // concurrency() limits: frees the slot an allowed request holds under `lease`
 *       release(key, lease) {
 *         const id = storageKey(namespace, key);
 *         const nowUs = Date.now() * 1000;
 *         const d = releaseState(namespace.policies, rows.get(id)?.state, nowUs, lease);
 *         if (d.state !== undefined) rows.set(id, { state: d.state, expiresAtUs: d.expiresAtUs });
 *         return { now: Math.floor(nowUs / 1000), policies: d.policies };
 *       },
 *       peek(key) {
 *         const nowUs = Date.now() * 1000;
 *         return { now: Math.floor(nowUs / 1000), policies: peekState(namespace.policies, rows.get(storageKey(namespace, key))?.state, nowUs).policies };
 *       },
 *       reset(key) {
 *         rows.delete(storageKey(namespace, key));
 *       },
 *     };
 *   }
 * }
 * ```
 *
 * @module
 */
import { type Policy, algorithmOf } from "./algorithms/index.js";
import { type Layout, blockExpiresAtUs, chargeMarks, consumeAll, expiresAtUs, layoutOf, manuallyBlocked, peekAll, refundAll, releaseAll, reserveAll, startedBlock } from "./engine.js";
import { SluiceInputError, describe } from "./errors.js";
import { policyField } from "./keys.js";
import { BLOCK_FIELD, OVERRIDE_FIELD, type Override, type StoreCommand, assertStoreCommand, effectivePolicies, liveOverride, overrideField, overrideFromText, unlimitedBlockedResults, unlimitedResults } from "./overrides.js";
import type { PolicyResult, RefundCharge } from "./types.js";

export type {
  RefundCharge,
  ReserveResult,
  Store,
  BoundStore,
  StoreNamespace,
  StoreResult,
  PolicyResult,
  Decision,
  DecisionReason,
  MaybePromise,
} from "./types.js";
export type { Policy, PolicyKind } from "./algorithms/index.js";
export {
  storageKey,
  namespaceKey,
  encodeKeyPart,
  policyField,
  assertKey,
  assertNamespace,
  assertPrefixAndTier,
  MAX_POLICIES,
  MAX_KEY_LENGTH,
} from "./keys.js";
export { toDecision } from "./decision.js";
// overrides and manual blocks: the commands of BoundStore.control, the stored form, the effective policies
export {
  type ControlResult,
  type Override,
  type StoreCommand,
  BLOCK_FIELD,
  OVERRIDE_FIELD,
  assertStoreCommand,
  effectivePolicies,
  liveOverride,
  maxQuota,
  overrideField,
  overrideFromText,
  quotaOf,
} from "./overrides.js";
// the algorithms' constants a store in another language mirrors, and policies as plain data (for a store that rebuilds them elsewhere)
export { CONCURRENCY_RETRY_MS, MAX_GCRA_SHIFT_US, MAX_QUOTA, POLICY_KINDS, blockDurationMs, isPolicyKind, policyData, policyFromData } from "./algorithms/index.js";
// what a store checks of a reply that crossed a wire before it becomes a decision
export { MAX_AHEAD_US, MAX_CLOCK_SKEW_MS, type ReplyExpectations, storeClockProblem, storeResultProblem } from "./result-checks.js";
// an allowed request's answer from the state it left (a store that gets the state back rather than the answer: the Redis fast path)
export { allowedFromState } from "./algorithms/index.js";

/**
 * The stored state of one identifier (one {@link storageKey}): for each policy, under its
 * {@link policyField}, a list of integers — the epoch-µs time at which that policy's state is empty
 * again, then the algorithm's numbers (a concurrency cap's: its live leases, `expires (µs), id`
 * pairs). Plain JSON: store it as a JSON string, a hash of fields, a
 * row. Its contents are Sluice's business: keep it as it comes back from {@link decideState}.
 *
 * Several limiters with the same prefix and tier (with different policies) share one identifier;
 * each reads and writes only its own fields and carries the others over unchanged (dropping those
 * whose time has passed). Two fields belong to the key rather than to a policy:
 * {@link OVERRIDE_FIELD} (a string: see {@link controlState}) and {@link BLOCK_FIELD}.
 */
export type StoredState = Record<string, number[] | string>;

/** What {@link decideState} and {@link peekState} answer. */
export interface StateDecision {
  /** One result per policy, in order: what `BoundStore.consume`/`peek` return as `policies`. */
  policies: PolicyResult[];
  /**
   * After an allowed {@link decideState}, the charge's marks: return them as `StoreResult.marks`
   * (the limiter hands them back to your `refund`). Absent otherwise.
   */
  marks?: number[];
  /**
   * The state to store in place of the one given (every field, other limiters' included), or
   * `undefined` when nothing changed: a denial or a peek writes nothing.
   */
  state: StoredState | undefined;
  /**
   * Epoch µs at which every field of the state (the new one, else the one given) is empty again:
   * keep the record until then (a TTL of `ceil((expiresAtUs - nowUs) / 1000)` ms). At or before
   * `nowUs` the record holds nothing live and may be deleted. 0 when there is no state;
   * `Number.MAX_SAFE_INTEGER` while it holds an override without an end (keep it until cleared).
   */
  expiresAtUs: number;
  /** The key's override that applied (return it as `StoreResult.override`), or absent. */
  override?: Override;
}

/** The key's override and manual block at `nowUs`, read from its stored state. */
interface Controls {
  /** The live override's body, or `undefined`. */
  readonly body: string | undefined;
  /** The manual block's end (µs), or 0. */
  readonly blockUntilUs: number;
}

const NO_CONTROLS: Controls = Object.freeze({ body: undefined, blockUntilUs: 0 });

function controlsOf(state: StoredState | undefined, nowUs: number): Controls {
  if (state === undefined || state === null || typeof state !== "object") return NO_CONTROLS;
  const o = (state as Record<string, unknown>)[OVERRIDE_FIELD];
  const b = (state as Record<string, unknown>)[BLOCK_FIELD];
  if (o === undefined && b === undefined) return NO_CONTROLS;
  const body = liveOverride(o, nowUs)?.body;
  const blockUntilUs = isField(b) && b.length === 1 && (b[0] as number) > nowUs ? (b[0] as number) : 0;
  return { body, blockUntilUs };
}

/** The policies that apply under `controls` (`undefined` under an unlimited override). */
function applied(policies: readonly Policy[], controls: Controls): readonly Policy[] | undefined {
  const body = controls.body;
  if (body === undefined) return policies;
  return body === "u" ? undefined : effectivePolicies(policies, body);
}

/** `decision` with `override` set when one applied. */
function withOverride<D extends StateDecision>(decision: D, controls: Controls): D {
  if (controls.body !== undefined) decision.override = overrideFromText(controls.body) as Override;
  return decision;
}

/**
 * The answer of every policy now (as a peek: a cost-1 request), under the key's override and
 * manual block.
 */
function answerNow(policies: readonly Policy[], state: StoredState | undefined, nowUs: number, controls: Controls, cost = 1): PolicyResult[] {
  const list = applied(policies, controls);
  if (controls.blockUntilUs > 0 && list === undefined) return unlimitedBlockedResults(policies, nowUs, controls.blockUntilUs);
  if (controls.blockUntilUs > 0) {
    const plan = planOf(list ?? policies);
    const { num, obj } = load(plan, state, nowUs);
    return manuallyBlocked(plan.layout, num, 0, obj, 0, nowUs, cost, controls.blockUntilUs);
  }
  if (list === undefined) return unlimitedResults(policies, Math.floor(nowUs / 1000));
  const plan = planOf(list);
  const { num, obj } = load(plan, state, nowUs);
  return peekAll(plan.layout, num, 0, obj, 0, nowUs);
}

/** A namespace's policies, their layout and their field names: computed once per list of policies. */
interface Plan {
  readonly layout: Layout;
  readonly fields: readonly string[];
  /** Per policy, the field of its penalty box (`<field>|block`: `[expires, blocked until (µs), offences]`), or `undefined`. */
  readonly blockFields: readonly (string | undefined)[];
}

/** The field holding a policy's penalty box next to its own (`<policyField>|block`). */
export function blockField(policy: Policy): string {
  return `${policyField(policy)}|block`;
}

const plans = new WeakMap<readonly Policy[], Plan>();

function planOf(policies: readonly Policy[]): Plan {
  let plan = plans.get(policies);
  if (plan === undefined) {
    plan = {
      layout: layoutOf(policies),
      fields: policies.map(policyField),
      blockFields: policies.map((p) => (p.block === undefined ? undefined : blockField(p))),
    };
    plans.set(policies, plan);
  }
  return plan;
}

/** Whether `value` is a non-empty list of safe integers (the shape of every stored field). */
function isField(value: unknown): value is number[] {
  if (!Array.isArray(value) || value.length === 0) return false;
  for (let i = 0; i < value.length; i++) if (!Number.isSafeInteger(value[i])) return false;
  return true;
}

/**
 * Loads the live state of each policy into the engine's arrays. Anything expired or malformed reads
 * as the empty state: losing state may only ever forget it.
 */
function load(plan: Plan, state: StoredState | undefined, nowUs: number): { num: Float64Array; obj: unknown[] } {
  const { layout, fields, blockFields } = plan;
  const num = new Float64Array(layout.numStride);
  const obj: unknown[] = new Array(layout.objStride);
  if (state === undefined || state === null || typeof state !== "object") return { num, obj };
  const policies = layout.policies;
  for (let i = 0; i < policies.length; i++) {
    const bf = blockFields[i];
    if (bf === undefined) continue;
    const value = (state as Record<string, unknown>)[bf];
    if (!isField(value) || value.length !== 3 || (value[0] as number) <= nowUs) continue;
    const bo = layout.blockOffsets[i] as number;
    num[bo] = value[1] as number;
    num[bo + 1] = value[2] as number;
  }
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const value = (state as Record<string, unknown>)[fields[i] as string];
    if (!isField(value) || (value[0] as number) <= nowUs) continue;
    const off = layout.numOffsets[i] as number;
    const oOff = layout.objOffsets[i] as number;
    const algorithm = algorithmOf(policy);
    if (!algorithm.decode(policy, value, algorithm.state.at(num, off, obj, oOff), nowUs)) {
      // malformed: the policy starts empty (a partial read is undone)
      num.fill(0, off, off + algorithm.state.numWidth);
      obj.fill(undefined, oOff, oOff + algorithm.state.objWidth);
    }
  }
  return { num, obj };
}

/** The latest expiry among the fields of `state` (0 if none). */
function latestExpiry(state: StoredState | undefined): number {
  let at = 0;
  if (state === undefined || state === null || typeof state !== "object") return at;
  for (const [field, value] of Object.entries(state)) {
    if (isField(value)) {
      if ((value[0] as number) > at) at = value[0] as number;
    } else if (field === OVERRIDE_FIELD) {
      const end = liveOverride(value, 0)?.expiresAtUs ?? 0;
      if (end > at) at = end;
    }
  }
  return at;
}

/**
 * Runs one decision for one key over its stored state: every policy checks `cost`; if all allow,
 * all consume and the new state comes back to be written; otherwise nothing is consumed and
 * nothing is to be written (the policies that would have allowed report their state unchanged).
 * Pure: it neither keeps nor changes anything it is given.
 *
 * Call it inside your storage's atomic section (a transaction, a compare-and-set loop, a Durable
 * Object's synchronous handler): read the identifier's state, decide, write `state` if it is not
 * `undefined`, with `expiresAtUs` as its expiry.
 *
 * @param policies - The namespace's policies (`StoreNamespace.policies`).
 * @param state - The identifier's stored state, or `undefined` if there is none. Expired or
 *   malformed fields read as empty.
 * @param nowUs - The store's clock, integer epoch microseconds (`Date.now() * 1000`).
 * @param cost - Units to consume: a positive safe integer (else {@link SluiceInputError}).
 * @param lease - The id of the lease an allowed request acquires on each concurrency policy (the
 *   `lease` argument of `BoundStore.consume`): a non-negative safe integer; 0 or absent when none
 *   was given.
 *
 * @example
 * ```ts
 * const d = decideState(namespace.policies, row?.state, Date.now() * 1000, cost);
 * if (d.state !== undefined) await db.put(id, JSON.stringify(d.state), { expiresAtUs: d.expiresAtUs });
 * return { now: Math.floor(nowUs / 1000), policies: d.policies };
 * ```
 */
export function decideState(
  policies: readonly Policy[],
  state: StoredState | undefined,
  nowUs: number,
  cost: number,
  lease = 0,
): StateDecision {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    throw new SluiceInputError(`cost must be a positive safe integer; got ${describe(cost)}`, { option: "cost" });
  }
  if (typeof lease !== "number" || !Number.isSafeInteger(lease) || lease < 0) {
    throw new SluiceInputError(`lease must be a non-negative safe integer; got ${describe(lease)}`, { option: "lease" });
  }
  const controls = controlsOf(state, nowUs);
  if (controls !== NO_CONTROLS) {
    // a manual block denies, writing nothing; an unlimited override allows, counting nothing
    if (controls.blockUntilUs > 0 || controls.body === "u") {
      return withOverride({ policies: answerNow(policies, state, nowUs, controls, cost), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
    }
  }
  const plan = planOf(applied(policies, controls) as readonly Policy[]);
  const { num, obj } = load(plan, state, nowUs);
  const results = consumeAll(plan.layout, num, 0, obj, 0, nowUs, cost, lease);
  for (let i = 0; i < results.length; i++) {
    if (!(results[i] as PolicyResult).allowed) {
      // a denial writes nothing, unless it started a penalty box
      if (startedBlock(results)) return withOverride({ policies: results, ...written(plan, state, num, obj, nowUs) }, controls);
      return withOverride({ policies: results, state: undefined, expiresAtUs: latestExpiry(state) }, controls);
    }
  }
  // allowed: every policy consumed
  const marks = chargeMarks(plan.layout, num, 0);
  const decided: StateDecision = marks === undefined ? { policies: results, ...written(plan, state, num, obj, nowUs) } : { policies: results, marks, ...written(plan, state, num, obj, nowUs) };
  return withOverride(decided, controls);
}

/**
 * Carries a field of a stored record over into the state to write, as an own data property: the
 * record came from storage, and its field names are data whatever they read (assigning a field
 * named `__proto__` would set the object's prototype instead, and drop the field).
 */
function carry(next: StoredState, field: string, value: number[] | string): void {
  Object.defineProperty(next, field, { value, enumerable: true, writable: true, configurable: true });
}

/** The state to store after the engine changed `num`/`obj`: this namespace's fields, the other limiters' live ones carried over. */
function written(plan: Plan, state: StoredState | undefined, num: Float64Array, obj: unknown[], nowUs: number): { state: StoredState; expiresAtUs: number } {
  const { layout, fields } = plan;
  const next: StoredState = {};
  let latest = 0;
  if (state !== undefined && state !== null && typeof state === "object") {
    for (const [field, value] of Object.entries(state)) {
      if (isField(value)) {
        if ((value[0] as number) > nowUs) {
          carry(next, field, value);
          if ((value[0] as number) > latest) latest = value[0] as number;
        }
      } else if (field === OVERRIDE_FIELD) {
        const live = liveOverride(value, nowUs);
        if (live !== undefined) {
          carry(next, field, value);
          if (live.expiresAtUs > latest) latest = live.expiresAtUs;
        }
      }
    }
  }
  for (let i = 0; i < layout.policies.length; i++) {
    const policy = layout.policies[i] as Policy;
    const field = fields[i] as string;
    const off = layout.numOffsets[i] as number;
    const oOff = layout.objOffsets[i] as number;
    const at = expiresAtUs(policy, num, off, obj, oOff);
    if (at <= nowUs) {
      delete next[field];
      continue;
    }
    const value = [at];
    const algorithm = algorithmOf(policy);
    if (!algorithm.encode(policy, algorithm.state.at(num, off, obj, oOff), nowUs, value)) {
      delete next[field];
      continue;
    }
    next[field] = value;
    if (at > latest) latest = at;
  }
  for (let i = 0; i < layout.policies.length; i++) {
    const bf = plan.blockFields[i];
    if (bf === undefined) continue;
    const at = blockExpiresAtUs(layout, i, num, 0);
    if (at <= nowUs) {
      delete next[bf];
      continue;
    }
    const bo = layout.blockOffsets[i] as number;
    next[bf] = [at, num[bo] as number, num[bo + 1] as number];
    if (at > latest) latest = at;
  }
  return { state: next, expiresAtUs: latest };
}

/**
 * Gives `cost` units back to every policy, for the request `charge` names (`BoundStore.refund`'s
 * argument: the decision's `now` and marks; `undefined`: the latest charges): never more than the
 * state holds, never above a policy's quota, and never letting any span admit more than it would
 * have had the refunded request never been made (see `refundPolicy`). Answers the state afterwards
 * as {@link peekState} does, and the state to write (`undefined` when nothing changed). Pure, like
 * {@link decideState}.
 *
 * @example
 * ```ts
 * refund(key, cost, charge) {
 *   const r = refundState(namespace.policies, row?.state, Date.now() * 1000, cost, charge);
 *   if (r.state !== undefined) await db.put(id, JSON.stringify(r.state), { expiresAtUs: r.expiresAtUs });
 *   return { now: Math.floor(nowUs / 1000), policies: r.policies };
 * }
 * ```
 */
export function refundState(
  policies: readonly Policy[],
  state: StoredState | undefined,
  nowUs: number,
  cost: number,
  charge: RefundCharge | undefined,
): StateDecision {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    throw new SluiceInputError(`cost must be a positive safe integer; got ${describe(cost)}`, { option: "cost" });
  }
  const controls = controlsOf(state, nowUs);
  const list = applied(policies, controls);
  // under an unlimited override nothing is counted, and nothing is given back
  if (list === undefined) return withOverride({ policies: answerNow(policies, state, nowUs, controls), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
  const plan = planOf(list);
  const { num, obj } = load(plan, state, nowUs);
  const chargedAtUs = charge === undefined ? -1 : charge.atMs * 1000;
  const changed = refundAll(plan.layout, num, 0, obj, 0, nowUs, cost, chargedAtUs, charge === undefined ? undefined : (charge.marks ?? NO_MARKS), charge?.prices);
  if (!changed) return withOverride({ policies: answerNow(policies, state, nowUs, controls), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
  const next = written(plan, state, num, obj, nowUs);
  return withOverride({ policies: answerNow(policies, next.state, nowUs, controls), ...next }, controls);
}

/** A charge that came without marks: a bucket gives nothing back for it (it cannot tell what the charge still weighs). */
const NO_MARKS: readonly number[] = Object.freeze([]);

/**
 * Frees lease `lease` on every concurrency policy (`BoundStore.release`): the lease is dropped, and
 * every expired one with it. Idempotent: an unknown, released or expired lease changes nothing.
 * Answers the state afterwards as {@link peekState} does, and the state to write (`undefined` when
 * nothing changed). Pure, like {@link decideState}.
 *
 * @example
 * ```ts
 * const r = releaseState(namespace.policies, row?.state, Date.now() * 1000, lease);
 * if (r.state !== undefined) await db.put(id, JSON.stringify(r.state), { expiresAtUs: r.expiresAtUs });
 * ```
 */
export function releaseState(policies: readonly Policy[], state: StoredState | undefined, nowUs: number, lease: number): StateDecision {
  if (typeof lease !== "number" || !Number.isSafeInteger(lease) || lease <= 0) {
    throw new SluiceInputError(`lease must be a positive safe integer; got ${describe(lease)}`, { option: "lease" });
  }
  // a lease is freed whatever the override: quotas do not change what a lease list holds
  const controls = controlsOf(state, nowUs);
  const plan = planOf(policies);
  const { num, obj } = load(plan, state, nowUs);
  const changed = releaseAll(plan.layout, num, 0, obj, 0, nowUs, lease);
  if (!changed) return withOverride({ policies: answerNow(policies, state, nowUs, controls), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
  const next = written(plan, state, num, obj, nowUs);
  return withOverride({ policies: answerNow(policies, next.state, nowUs, controls), ...next }, controls);
}

/**
 * `peek` over a stored state: the state now, and whether a cost-1 request would pass; writes
 * nothing (`state` is always `undefined`). `expiresAtUs` is that of the state given, so a store may
 * delete a record that has fully expired.
 *
 * @example
 * ```ts
 * const { policies } = peekState(namespace.policies, row?.state, Date.now() * 1000);
 * ```
 */
export function peekState(policies: readonly Policy[], state: StoredState | undefined, nowUs: number): StateDecision {
  const controls = controlsOf(state, nowUs);
  return withOverride({ policies: answerNow(policies, state, nowUs, controls), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
}

/** What {@link reserveState} answers: a {@link StateDecision} and the units granted. */
export interface ReserveDecision extends StateDecision {
  /** Units charged to every policy (0: none, and `state` is `undefined`). */
  granted: number;
}

/**
 * `BoundStore.reserve` over a stored state: charges up to `units` to every policy at once, all or
 * nothing, as many as every policy can give now (the least of their `remaining`), under the key's
 * override; none while a manual block or penalty box runs, under an unlimited override, or for a
 * policy that cannot reserve (a sliding log, a concurrency cap, a bucket with a queue). A bucket
 * counts the units as used `holdUs` from now, the last moment they may serve, so that it never
 * refills beneath units held elsewhere. Answers each policy's state after the charge (as
 * {@link peekState} would), the marks of the charge (for the refund of the units left unused) and
 * the state to write (`undefined` when nothing was granted). Pure, like {@link decideState}.
 *
 * @param holdUs - How long (µs) the reserved units may serve: a non-negative safe integer.
 *
 * @example
 * ```ts
 * reserve(key, units, holdMs) {
 *   const nowUs = Date.now() * 1000;
 *   const r = reserveState(namespace.policies, row?.state, nowUs, units, holdMs * 1000);
 *   if (r.state !== undefined) await db.put(id, JSON.stringify(r.state), { expiresAtUs: r.expiresAtUs });
 *   return { now: Math.floor(nowUs / 1000), policies: r.policies, marks: r.marks, granted: r.granted };
 * }
 * ```
 */
export function reserveState(policies: readonly Policy[], state: StoredState | undefined, nowUs: number, units: number, holdUs: number): ReserveDecision {
  if (typeof units !== "number" || !Number.isSafeInteger(units) || units <= 0) {
    throw new SluiceInputError(`units must be a positive safe integer; got ${describe(units)}`, { option: "units" });
  }
  if (typeof holdUs !== "number" || !Number.isSafeInteger(holdUs) || holdUs < 0) {
    throw new SluiceInputError(`holdUs must be a non-negative safe integer; got ${describe(holdUs)}`, { option: "holdUs" });
  }
  const controls = controlsOf(state, nowUs);
  const list = applied(policies, controls);
  if (list === undefined || controls.blockUntilUs > 0) {
    return withOverride({ granted: 0, policies: answerNow(policies, state, nowUs, controls), state: undefined, expiresAtUs: latestExpiry(state) }, controls);
  }
  const plan = planOf(list);
  const { num, obj } = load(plan, state, nowUs);
  const { granted, results } = reserveAll(plan.layout, num, 0, obj, 0, nowUs, units, holdUs);
  if (granted === 0) return withOverride({ granted, policies: results, state: undefined, expiresAtUs: latestExpiry(state) }, controls);
  const marks = chargeMarks(plan.layout, num, 0);
  const decided: ReserveDecision = { granted, policies: results, ...written(plan, state, num, obj, nowUs) };
  if (marks !== undefined) decided.marks = marks;
  return withOverride(decided, controls);
}

/** What {@link controlState} answers. */
export interface ControlDecision {
  /** The state to store in place of the one given, or `undefined` when nothing changed. */
  state: StoredState | undefined;
  /** As {@link StateDecision.expiresAtUs}. */
  expiresAtUs: number;
  /** The body of the key's live override after the command (`ControlResult.override`), or `undefined`. */
  override: string | undefined;
}

/**
 * `BoundStore.control` over a stored state: runs an override or manual-block command on one key's
 * record. Pure, like {@link decideState}; call it in the same atomic section.
 *
 * - `getOverride`: writes nothing; answers the live override's body.
 * - `setOverride`: stores `"<end µs>,<body>"` in {@link OVERRIDE_FIELD} (end `nowUs + ttlMs × 1000`,
 *   or 0 with `ttlMs` 0: until cleared, and the record then never expires).
 * - `clearOverride`: removes it.
 * - `block`: stores `[nowUs + durationMs × 1000]` in {@link BLOCK_FIELD} (a manual block: every
 *   request is denied until then, `reason: "blocked"`), replacing any manual block.
 * - `unblock`: removes it, and every penalty box of `policies` (their `<field>|block`).
 *
 * Expired fields of the state are dropped from a state written back, as {@link decideState} does.
 *
 * @example
 * ```ts
 * control(key, command) {
 *   const nowUs = Date.now() * 1000;
 *   const c = controlState(namespace.policies, row?.state, nowUs, command);
 *   if (c.state !== undefined) await db.put(id, JSON.stringify(c.state), { expiresAtUs: c.expiresAtUs });
 *   return { now: Math.floor(nowUs / 1000), override: c.override };
 * }
 * ```
 */
export function controlState(policies: readonly Policy[], state: StoredState | undefined, nowUs: number, command: StoreCommand): ControlDecision {
  const op = assertStoreCommand(command);
  const live = liveOverride((state as Record<string, unknown> | undefined)?.[OVERRIDE_FIELD], nowUs);
  if (op === "getOverride") return { state: undefined, expiresAtUs: latestExpiry(state), override: live?.body };
  const next: StoredState = {};
  if (state !== undefined && state !== null && typeof state === "object") {
    for (const [field, value] of Object.entries(state)) {
      if (isField(value) ? (value[0] as number) > nowUs : field === OVERRIDE_FIELD && liveOverride(value, nowUs) !== undefined) carry(next, field, value);
    }
  }
  let override = live?.body;
  if (op === "setOverride") {
    const { override: body, ttlMs } = command as { override: string; ttlMs: number };
    next[OVERRIDE_FIELD] = overrideField(body, ttlMs === 0 ? 0 : nowUs + ttlMs * 1000);
    override = body;
  } else if (op === "clearOverride") {
    delete next[OVERRIDE_FIELD];
    override = undefined;
  } else if (op === "block") {
    const { durationMs } = command as { durationMs: number };
    next[BLOCK_FIELD] = [nowUs + durationMs * 1000];
  } else {
    // unblock
    delete next[BLOCK_FIELD];
    for (const policy of policies) if (policy.block !== undefined) delete next[blockField(policy)];
  }
  return { state: next, expiresAtUs: latestExpiry(next), override };
}
