/**
 * A key's policies together, over the algorithms of the registry (`algorithms/`): where each
 * policy's state sits in the key's record ({@link layoutOf}), one all-or-nothing decision over all
 * of them ({@link consumeAll}), peeks, refunds and releases, with the penalty box
 * (`algorithms/penalty-box.ts`) around them. Shared by every store that runs in JavaScript (the
 * memory store, the Durable Object, `decideState`); `@sluice/redis` mirrors it in Lua, and the
 * conformance suite and the recorded vectors keep the two identical.
 *
 * Nothing here knows an algorithm: each policy's part is its definition's.
 *
 * @module
 */
import { type Policy, algorithmOf, evaluate, peekPolicy, stateAt, stateNow } from "./algorithms/index.js";
import { applyBlocks, blockedUntilUs, isBlocked, markBlocked, startBlocks } from "./algorithms/penalty-box.js";
import type { PolicyResult } from "./types.js";

export { blockExpiresAtUs } from "./algorithms/penalty-box.js";
export { evaluate } from "./algorithms/index.js";

/** Where each policy's state sits inside one key's record. Computed once per namespace. */
export interface Layout {
  readonly policies: readonly Policy[];
  readonly numOffsets: readonly number[];
  readonly objOffsets: readonly number[];
  /** Numbers per key. */
  readonly numStride: number;
  /** Object slots per key (0 unless a policy keeps a list). */
  readonly objStride: number;
  /** The largest cost every policy can admit; beyond it the request is `cost-exceeds-limit`. */
  readonly maxCost: number;
  /**
   * Per policy, where its penalty box sits in the key's numbers (`[blocked until (µs), offences]`,
   * after every policy's own state), or -1 for a policy without `block`.
   */
  readonly blockOffsets: readonly number[];
  /** Whether any policy has a penalty box. */
  readonly hasBlock: boolean;
  /** Whether any policy holds leases (a concurrency cap). */
  readonly hasConcurrency: boolean;
  /** Whether any policy's charges carry a mark for refunds (a bucket: see {@link chargeMarks}). */
  readonly hasBucket: boolean;
}

/** The largest cost a policy can ever admit (beyond it: `cost-exceeds-limit`). */
export function maxCost(policy: Policy): number {
  return algorithmOf(policy).maxCost(policy);
}

/** Computes the state layout of a list of policies. */
export function layoutOf(policies: readonly Policy[]): Layout {
  const numOffsets: number[] = [];
  const objOffsets: number[] = [];
  let numStride = 0;
  let objStride = 0;
  let max = Infinity;
  for (const p of policies) {
    const algorithm = algorithmOf(p);
    numOffsets.push(numStride);
    objOffsets.push(objStride);
    numStride += algorithm.state.numWidth;
    objStride += algorithm.state.objWidth;
    max = Math.min(max, algorithm.maxCost(p));
  }
  const blockOffsets: number[] = [];
  for (const p of policies) {
    if (p.block === undefined) blockOffsets.push(-1);
    else {
      blockOffsets.push(numStride);
      numStride += 2;
    }
  }
  const hasBlock = blockOffsets.some((o) => o >= 0);
  const hasConcurrency = policies.some((p) => algorithmOf(p).leases);
  const hasBucket = policies.some((p) => algorithmOf(p).mark !== undefined);
  return { policies, numOffsets, objOffsets, numStride, objStride, maxCost: max, blockOffsets, hasBlock, hasConcurrency, hasBucket };
}

/** The lists of a key whose policies keep none. */
const NO_LISTS: unknown[] = [];

/** Results of a decision that started a block: its state must be written although it was denied. */
const BLOCK_STARTED = new WeakSet<PolicyResult[]>();

/** Whether `consumeAll` started a penalty box for these results (a denial that must still be written). */
export function startedBlock(results: PolicyResult[]): boolean {
  return BLOCK_STARTED.has(results);
}

/**
 * Every policy's answer to a request of `cost` made while a penalty box of the key runs: the
 * others as they would decide it (their state now when they would allow, their own denial when they
 * would not), the blocked ones denying (see `applyBlocks`). Writes nothing: no policy consumes, and
 * no offence is counted while a block runs.
 */
function blockedNow(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, cost: number): PolicyResult[] {
  const { policies } = layout;
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const off = base + (layout.numOffsets[i] as number);
    const oOff = oBase + (layout.objOffsets[i] as number);
    const r = evaluate(policy, num, off, obj, oOff, nowUs, cost, false);
    results[i] = r.allowed ? stateNow(policy, num, off, obj, oOff, nowUs) : r;
  }
  applyBlocks(layout, results, num, base, nowUs);
  return results;
}

/**
 * Runs one decision over every policy of a key, all or nothing: if every policy allows `cost`, all
 * consume (a concurrency policy acquires `lease`); otherwise none does, and the policies that would
 * have allowed report their state now.
 */
export function consumeAll(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, cost: number, lease = 0): PolicyResult[] {
  const policies = layout.policies;
  const { numOffsets, objOffsets } = layout;
  if (layout.hasBlock) {
    if (isBlocked(layout, num, base, nowUs)) return blockedNow(layout, num, base, obj, oBase, nowUs, cost);
  } else if (policies.length === 1) {
    return [evaluate(policies[0] as Policy, num, base, obj, oBase, nowUs, cost, true, lease)];
  }
  const results: PolicyResult[] = new Array(policies.length);
  let allowed = true;
  for (let i = 0; i < policies.length; i++) {
    const r = evaluate(policies[i] as Policy, num, base + (numOffsets[i] as number), obj, oBase + (objOffsets[i] as number), nowUs, cost, false);
    results[i] = r;
    if (!r.allowed) allowed = false;
  }
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i] as Policy;
    const off = base + (numOffsets[i] as number);
    const oOff = oBase + (objOffsets[i] as number);
    if (allowed) results[i] = evaluate(p, num, off, obj, oOff, nowUs, cost, true, lease);
    else if ((results[i] as PolicyResult).allowed) results[i] = stateNow(p, num, off, obj, oOff, nowUs);
  }
  if (!allowed && layout.hasBlock && startBlocks(layout, results, num, base, nowUs)) BLOCK_STARTED.add(results);
  return results;
}

/**
 * Every policy's answer to a request of `cost` made while a manual block (`limiter.block`) of the
 * key runs until `untilUs`: each policy's own answer, written nowhere, then marked blocked like a
 * penalty box's (until the later of the manual block's end and the policy's own penalty box's), so
 * that `retryAfterMs` is the later of the block's end and the policy's own retry time for that cost.
 */
export function manuallyBlocked(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, cost: number, untilUs: number): PolicyResult[] {
  const { policies } = layout;
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const off = base + (layout.numOffsets[i] as number);
    const oOff = oBase + (layout.objOffsets[i] as number);
    const r = evaluate(policy, num, off, obj, oOff, nowUs, cost, false);
    const result = r.allowed ? stateNow(policy, num, off, obj, oOff, nowUs) : r;
    const own = blockedUntilUs(layout, i, num, base);
    markBlocked(result, nowUs, Math.ceil(((own > untilUs ? own : untilUs) - nowUs) / 1000));
    results[i] = result;
  }
  return results;
}

/** What {@link reserveAll} answers: the units granted, and every policy's answer after them. */
export interface Reserved {
  /** Units charged to every policy (0: none; nothing changed). */
  readonly granted: number;
  /** Each policy's state after the charge (as a peek answers it), or its peek when nothing was granted. */
  readonly results: PolicyResult[];
}

/**
 * Charges up to `units` to every policy of a key at once, all or nothing, for an instance to admit
 * requests from later (the limiter's `reserve` option): as many as every policy can give now (the
 * least of their `remaining`), counted as if used at `nowUs + holdUs` by the policies whose units
 * would otherwise lose value while held (see `ReservationRule.hold`). Grants nothing while a
 * penalty box runs, and nothing for a policy that cannot reserve. Never a denial: it starts no
 * penalty box.
 */
export function reserveAll(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, units: number, holdUs: number): Reserved {
  const policies = layout.policies;
  if (layout.hasBlock && isBlocked(layout, num, base, nowUs)) return { granted: 0, results: peekAll(layout, num, base, obj, oBase, nowUs) };
  let granted = units;
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const rule = algorithmOf(policy).reservation;
    if (rule === undefined || !rule.reservable(policy)) return { granted: 0, results: peekAll(layout, num, base, obj, oBase, nowUs) };
    const now = stateNow(policy, num, base + (layout.numOffsets[i] as number), obj, oBase + (layout.objOffsets[i] as number), nowUs);
    if (now.remaining < granted) granted = now.remaining;
  }
  if (granted <= 0) return { granted: 0, results: peekAll(layout, num, base, obj, oBase, nowUs) };
  // every policy fits `granted` now (it is within each one's remaining): this consume allows
  consumeAll(layout, num, base, obj, oBase, nowUs, granted);
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const off = base + (layout.numOffsets[i] as number);
    algorithmOf(policy).reservation!.hold?.(policy, stateAt(policy, num, off, obj, oBase + (layout.objOffsets[i] as number)), nowUs, holdUs, granted);
    results[i] = stateNow(policy, num, off, obj, oBase + (layout.objOffsets[i] as number), nowUs);
  }
  return { granted, results };
}

/** `peek` over every policy of a key (a peek asks about a cost-1 request). */
export function peekAll(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number): PolicyResult[] {
  const policies = layout.policies;
  if (layout.hasBlock && isBlocked(layout, num, base, nowUs)) return blockedNow(layout, num, base, obj, oBase, nowUs, 1);
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    results[i] = peekPolicy(policies[i] as Policy, num, base + (layout.numOffsets[i] as number), obj, oBase + (layout.objOffsets[i] as number), nowUs);
  }
  return results;
}

/** When (µs) the policy's state becomes the empty state again: its natural expiry. 0 if already empty. */
export function expiresAtUs(policy: Policy, num: Float64Array, off: number, obj: unknown[], oOff: number): number {
  return algorithmOf(policy).expiresAtUs(policy, stateAt(policy, num, off, obj, oOff));
}

/**
 * Runs `change` on every policy of a key (at its offsets in the key's record); whether any changed.
 * For refunds and releases, which are not on the per-decision path.
 */
function changesAny(layout: Layout, base: number, oBase: number, change: (policy: Policy, i: number, off: number, oOff: number) => boolean): boolean {
  let changed = false;
  for (let i = 0; i < layout.policies.length; i++) {
    if (change(layout.policies[i] as Policy, i, base + (layout.numOffsets[i] as number), oBase + (layout.objOffsets[i] as number))) changed = true;
  }
  return changed;
}

/**
 * Frees lease `lease` on every policy of a key that holds leases (and drops the expired ones).
 * Idempotent: an unknown, released or expired lease changes nothing but the purge. Returns whether
 * any state changed.
 */
export function releaseAll(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, lease: number): boolean {
  return changesAny(layout, base, oBase, (policy, _i, off, oOff) => algorithmOf(policy).release?.(policy, stateAt(policy, num, off, obj, oOff), nowUs, lease) ?? false);
}

/**
 * The marks of a charge a key's policies just made (read right after an allowed `consumeAll`),
 * which a refund of that charge needs (see {@link refundAll}): per policy, its definition's `mark`
 * (a bucket's theoretical arrival time right after the charge, µs); 0 for the others, which need
 * none. `undefined` when no policy has marks.
 */
export function chargeMarks(layout: Layout, num: Float64Array, base: number, obj: unknown[] = NO_LISTS, oBase = 0): number[] | undefined {
  if (!layout.hasBucket) return undefined;
  const { policies, numOffsets } = layout;
  const marks: number[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const mark = algorithmOf(policy).mark;
    marks[i] = mark === undefined ? 0 : mark(policy, stateAt(policy, num, base + (numOffsets[i] as number), obj, oBase + (layout.objOffsets[i] as number)));
  }
  return marks;
}

/**
 * What one unit of a charge weighs per policy (`AlgorithmDefinition.unitPrice`: a bucket's emission
 * interval, µs; 0 for a policy whose unit is a count), for the policies in force when it was made.
 * `undefined` when no policy prices its units.
 */
export function unitPrices(policies: readonly Policy[]): number[] | undefined {
  let prices: number[] | undefined;
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const price = algorithmOf(policy).unitPrice?.(policy);
    if (price === undefined) continue;
    prices ??= new Array(policies.length).fill(0);
    prices[i] = price;
  }
  return prices;
}

/** A charge's mark once `units` of it have been given back already (a refund of a charge may come in parts). */
export function refundedMark(policy: Policy, mark: number, units: number): number {
  return algorithmOf(policy).refundedMark?.(policy, mark, units) ?? mark;
}

/**
 * Gives `cost` units back to every policy of a key, for a request charged at `chargedAtUs` (-1:
 * the latest charge), each by its algorithm's rule (never more than the state holds, never above
 * the quota, never letting any span admit more than it would have had the refunded request never
 * been made). `marks`: the charge's marks (see {@link chargeMarks}, moved back by
 * {@link refundedMark} for what was refunded already), or `undefined` for the latest charge; a mark
 * missing from the list is unknown (0), and a bucket then gives nothing back. `prices`: what one
 * unit of the charge weighed per policy (see {@link unitPrices}; absent or 0: the policy's price
 * now). Returns whether any state changed.
 */
export function refundAll(
  layout: Layout,
  num: Float64Array,
  base: number,
  obj: unknown[],
  oBase: number,
  nowUs: number,
  cost: number,
  chargedAtUs: number,
  marks?: readonly number[],
  prices?: readonly number[],
): boolean {
  return changesAny(layout, base, oBase, (policy, i, off, oOff) =>
    algorithmOf(policy).refund(policy, stateAt(policy, num, off, obj, oOff), nowUs, cost, chargedAtUs, marks === undefined ? -1 : (marks[i] ?? 0), prices?.[i] ?? 0),
  );
}
