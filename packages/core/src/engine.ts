/**
 * The algorithms' semantics in TypeScript, shared by every store that runs in JavaScript (the
 * memory store, the Durable Object). `@sluice/redis` mirrors this file in Lua; the conformance
 * suite and the recorded vectors keep the two identical.
 *
 * State lives in a `Float64Array` (numbers) plus, for the sliding log and the concurrency cap, an
 * array slot holding its entries (the log's requests, the cap's leases). An all-zero state is the
 * empty state for every algorithm.
 *
 * Integer arithmetic throughout: `nowUs` is integer microseconds; the window algorithms work on
 * `nowMs = floor(nowUs / 1000)` and whole-ms windows (the sliding window's weighted sum
 * `limit × window` must stay below 2^53, which is why it is kept in ms, not µs); the log and the
 * GCRA buckets keep µs. Every value handed out is rounded up to whole ms.
 *
 * @module
 */
import { type Policy, type PolicyKind, blockDurationMs } from "./algorithms.js";
import type { PolicyResult } from "./types.js";

/** How many numbers of state each algorithm keeps per key. */
export const NUM_WIDTH: Readonly<Record<PolicyKind, number>> = {
  fixedWindow: 2, // [window index, count]
  slidingWindow: 3, // [window index, previous count, current count]
  slidingLog: 1, // [sum of the stored entries' costs]
  tokenBucket: 1, // [theoretical arrival time, µs]
  leakyBucket: 1, // [theoretical arrival time, µs]
  concurrency: 1, // [the latest expiry among the stored leases, µs]
};

/** How many object slots each algorithm keeps per key (the sliding log's entry array). */
export const OBJ_WIDTH: Readonly<Record<PolicyKind, number>> = {
  fixedWindow: 0,
  slidingWindow: 0,
  slidingLog: 1,
  tokenBucket: 0,
  leakyBucket: 0,
  concurrency: 1,
};

/** The largest cost a policy can ever admit (beyond it: `cost-exceeds-limit`). */
export function maxCost(policy: Policy): number {
  if (policy.kind === "concurrency") return Infinity; // one slot per request, whatever its cost
  return policy.kind === "tokenBucket" || policy.kind === "leakyBucket" ? policy.burst + policy.queue : policy.limit;
}

function result(
  policy: Policy,
  allowed: boolean,
  remaining: number,
  resetAt: number,
  retryAfterMs: number,
  delayMs: number,
  refillAt: number,
): PolicyResult {
  return { policy: policy.name, allowed, limit: policy.limit, remaining, resetAt, retryAfterMs, delayMs, refillAt };
}

/**
 * Evaluates one policy for `cost` at `nowUs`. If allowed and `write`, stores the new state. A denied
 * request writes nothing. Returns the policy's result: after consumption when allowed, the state now
 * when denied. `lease` is the id of the lease an allowed request acquires on a concurrency policy
 * (ignored by the others); 0 means none was given (the slot is then freed by expiry only).
 */
export function evaluate(
  policy: Policy,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
  cost: number,
  write: boolean,
  lease = 0,
): PolicyResult {
  switch (policy.kind) {
    case "concurrency":
      return inFlight(policy, num, off, obj, oOff, nowUs, cost, write, lease);
    case "tokenBucket":
    case "leakyBucket":
      return gcra(policy, num, off, nowUs, cost, write);
    case "fixedWindow":
      return fixed(policy, num, off, nowUs, cost, write);
    case "slidingWindow":
      return sliding(policy, num, off, nowUs, cost, write);
    case "slidingLog":
      return log(policy, num, off, obj, oOff, nowUs, cost, write);
  }
}

/**
 * The policy's state now, consuming nothing, reported as allowed: used for a policy that would have
 * allowed a request another policy denied. (An infinite cost takes every algorithm's denial path,
 * which computes exactly the state now; the flags are then set for "would have allowed".)
 */
export function stateNow(
  policy: Policy,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
): PolicyResult {
  const r = evaluate(policy, num, off, obj, oOff, nowUs, Infinity, false);
  r.allowed = true;
  r.retryAfterMs = 0;
  return r;
}

/** `peek`: whether a cost-1 request would pass now, with `remaining`/`resetAt` of the state now. */
export function peekPolicy(
  policy: Policy,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
): PolicyResult {
  const r = evaluate(policy, num, off, obj, oOff, nowUs, 1, false);
  if (r.allowed) {
    const now = stateNow(policy, num, off, obj, oOff, nowUs);
    r.remaining = now.remaining;
    r.resetAt = now.resetAt;
    r.refillAt = now.refillAt;
  }
  return r;
}

function fixed(
  policy: Extract<Policy, { kind: "fixedWindow" }>,
  num: Float64Array,
  off: number,
  nowUs: number,
  cost: number,
  write: boolean,
): PolicyResult {
  const windowMs = policy.windowMs;
  const limit = policy.limit;
  const nowMs = Math.floor(nowUs / 1000);
  const idx = Math.floor(nowMs / windowMs);
  const count = num[off] === idx ? (num[off + 1] as number) : 0;
  const resetAt = (idx + 1) * windowMs;
  if (cost <= limit - count) {
    if (write) {
      num[off] = idx;
      num[off + 1] = count + cost;
    }
    return result(policy, true, limit - count - cost, resetAt, 0, 0, resetAt);
  }
  return result(policy, false, limit - count, resetAt, cost > limit ? Infinity : resetAt - nowMs, 0, resetAt);
}

function sliding(
  policy: Extract<Policy, { kind: "slidingWindow" }>,
  num: Float64Array,
  off: number,
  nowUs: number,
  cost: number,
  write: boolean,
): PolicyResult {
  const W = policy.windowMs;
  const limit = policy.limit;
  const nowMs = Math.floor(nowUs / 1000);
  const idx = Math.floor(nowMs / W);
  const r = nowMs - idx * W;
  const storedIdx = num[off];
  let prev = 0;
  let cur = 0;
  if (storedIdx === idx) {
    prev = num[off + 1] as number;
    cur = num[off + 2] as number;
  } else if (storedIdx === idx - 1) {
    prev = num[off + 2] as number;
  }
  // allowed iff prev*(W-r) + (cur+cost)*W <= limit*W, written so that no product exceeds limit*W
  const weighted = prev * (W - r);
  const left = Math.floor((limit * W - weighted) / W); // limit minus the weighted previous count, rounded down
  if (cost <= limit - cur && weighted <= (limit - cur - cost) * W) {
    const after = cur + cost;
    if (write) {
      num[off] = idx;
      num[off + 1] = prev;
      num[off + 2] = after;
    }
    const remaining = Math.max(0, left - after);
    return result(policy, true, remaining, (idx + 2) * W, 0, 0, slidingRefillAt(W, limit, nowMs, r, prev, after, remaining));
  }
  const resetAt = cur > 0 ? (idx + 2) * W : prev > 0 ? (idx + 1) * W : nowMs;
  const retryAfterMs = cost > limit ? Infinity : slidingRetry(W, limit, r, prev, cur, cost);
  const remaining = Math.max(0, left - cur);
  return result(policy, false, remaining, resetAt, retryAfterMs, 0, slidingRefillAt(W, limit, nowMs, r, prev, cur, remaining));
}

/**
 * When the available quota next grows: the moment a request of `remaining + 1` would pass with the
 * state unchanged (`nowMs` when the quota is already full).
 */
function slidingRefillAt(W: number, limit: number, nowMs: number, r: number, prev: number, cur: number, remaining: number): number {
  return remaining >= limit ? nowMs : nowMs + slidingRetry(W, limit, r, prev, cur, remaining + 1);
}

/** The least whole `d >= 0` (ms) at which the same request passes with the state unchanged. */
function slidingRetry(W: number, limit: number, r: number, prev: number, cur: number, cost: number): number {
  const k = limit - cur - cost;
  if (k >= 0 && prev > 0) {
    // same window: prev*(W - r - d) <= k*W  <=>  d >= W - r - floor(k*W/prev)
    const m = Math.floor((k * W) / prev);
    if (m > 0) return W - r - m;
  }
  // the window rolls over after W - r: then prev = cur, cur = 0, and r' must satisfy
  // cur*(W - r') <= (limit - cost)*W
  const toNext = W - r;
  if (cur === 0) return toNext;
  return toNext + Math.max(0, W - Math.floor(((limit - cost) * W) / cur));
}

function log(
  policy: Extract<Policy, { kind: "slidingLog" }>,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
  cost: number,
  write: boolean,
): PolicyResult {
  const windowUs = policy.windowMs * 1000;
  const limit = policy.limit;
  const cutoff = nowUs - windowUs; // entries at or before the cutoff have left the window
  let entries = obj[oOff] as number[] | undefined; // flat [time, cost, time, cost, ...], oldest first
  let sum = num[off] as number;
  let start = 0;
  const n = entries === undefined ? 0 : entries.length;
  if (entries !== undefined) {
    while (start < n && (entries[start] as number) <= cutoff) {
      sum -= entries[start + 1] as number;
      start += 2;
    }
  }
  if (cost <= limit - sum) {
    // the oldest entry still in the window after this request leaves first (this request's own, if none)
    const oldest = start < n ? ((entries as number[])[start] as number) : nowUs;
    if (write) {
      if (entries === undefined || start === n) {
        // a fresh, exactly sized array (an empty one that grows reserves room for ~19 numbers)
        obj[oOff] = [nowUs, cost];
      } else {
        if (start > 0) {
          // drop the entries that left the window without allocating (splice would return them)
          entries.copyWithin(0, start);
          entries.length = n - start;
        }
        const len = entries.length;
        if (entries[len - 2] === nowUs) entries[len - 1] = (entries[len - 1] as number) + cost;
        else entries.push(nowUs, cost);
      }
      num[off] = sum + cost;
    }
    const nowMs = Math.floor(nowUs / 1000);
    return result(policy, true, limit - sum - cost, Math.ceil((nowUs + windowUs) / 1000), 0, 0, nowMs + Math.ceil((oldest + windowUs - nowUs) / 1000));
  }
  const newest = start < n ? ((entries as number[])[n - 2] as number) : undefined;
  const resetAt = Math.ceil((newest === undefined ? nowUs : newest + windowUs) / 1000);
  let retryAfterMs = Infinity;
  if (cost <= limit) {
    // the oldest entries must leave until sum + cost <= limit; entry t leaves at t + window
    const need = sum + cost - limit;
    let freed = 0;
    for (let i = start; i < n; i += 2) {
      freed += (entries as number[])[i + 1] as number;
      if (freed >= need) {
        retryAfterMs = Math.ceil((((entries as number[])[i] as number) + windowUs - nowUs) / 1000);
        break;
      }
    }
  }
  const nowMs = Math.floor(nowUs / 1000);
  const refillAt = start < n ? nowMs + Math.ceil((((entries as number[])[start] as number) + windowUs - nowUs) / 1000) : nowMs;
  return result(policy, false, limit - sum, resetAt, retryAfterMs, 0, refillAt);
}

/** How long a denied concurrency request waits: until the earliest lease expires, at most 1 s (a release may come any time). */
export const CONCURRENCY_RETRY_MS = 1000;

/**
 * The concurrency cap. Leases are `[expires (µs), id]` pairs in the object slot, in the order they
 * were acquired; an expired lease counts for nothing and is dropped at the next write. A request
 * takes one slot whatever its cost; `cost === Infinity` (never a real request) asks for the state
 * now, as for every algorithm. `refillAt` is when a slot may next free: the earliest expiry of the
 * leases held (after the request), at most {@link CONCURRENCY_RETRY_MS} away (a release may come any
 * time), `now` when none is held; a denial's `retryAfterMs` is the same wait, so `t ≤ Retry-After`.
 */
function inFlight(
  policy: Extract<Policy, { kind: "concurrency" }>,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
  cost: number,
  write: boolean,
  lease: number,
): PolicyResult {
  const leases = obj[oOff] as number[] | undefined;
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
      if (leases === undefined || live === 0) obj[oOff] = [expires, lease];
      else {
        if (live * 2 < leases.length) dropExpired(leases, nowUs);
        leases.push(expires, lease);
      }
      num[off] = Math.max(latest, expires);
    }
    const first = Math.min(earliest, expires);
    return result(policy, true, limit - live - 1, Math.ceil(Math.max(latest, expires) / 1000), 0, 0, nowMs + slotWaitMs(first, nowUs));
  }
  const wait = live === 0 ? 0 : slotWaitMs(earliest, nowUs);
  return result(policy, false, Math.max(0, limit - live), live === 0 ? nowMs : Math.ceil(latest / 1000), wait, 0, nowMs + wait);
}

/** Ms until a slot may free: the earliest expiry (rounded up), at most {@link CONCURRENCY_RETRY_MS}. */
function slotWaitMs(earliestUs: number, nowUs: number): number {
  return Math.min(CONCURRENCY_RETRY_MS, Math.ceil((earliestUs - nowUs) / 1000));
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

/**
 * Frees lease `lease` of a concurrency policy (and drops the expired ones). Idempotent: an unknown,
 * released or expired lease changes nothing but the purge. Returns whether the state changed.
 */
export function releasePolicy(
  policy: Policy,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
  lease: number,
): boolean {
  if (policy.kind !== "concurrency") return false;
  const leases = obj[oOff] as number[] | undefined;
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
  if (w === 0) obj[oOff] = undefined;
  num[off] = latest;
  return true;
}

/** {@link releasePolicy} for every concurrency policy of a key; returns whether any state changed. */
export function releaseAll(
  layout: Layout,
  num: Float64Array,
  base: number,
  obj: unknown[],
  oBase: number,
  nowUs: number,
  lease: number,
): boolean {
  return changesAny(layout, base, oBase, (policy, off, oOff) => releasePolicy(policy, num, off, obj, oOff, nowUs, lease));
}

/**
 * Runs `change` on every policy of a key (at its offsets in the key's record); whether any changed.
 * For refunds and releases, which are not on the per-decision path.
 */
function changesAny(layout: Layout, base: number, oBase: number, change: (policy: Policy, off: number, oOff: number) => boolean): boolean {
  let changed = false;
  for (let i = 0; i < layout.policies.length; i++) {
    if (change(layout.policies[i] as Policy, base + (layout.numOffsets[i] as number), oBase + (layout.objOffsets[i] as number))) changed = true;
  }
  return changed;
}

function gcra(
  policy: Extract<Policy, { kind: "tokenBucket" | "leakyBucket" }>,
  num: Float64Array,
  off: number,
  nowUs: number,
  cost: number,
  write: boolean,
): PolicyResult {
  const T = policy.emissionIntervalUs;
  const burst = policy.burst;
  const queue = policy.queue;
  const stored = num[off] as number;
  const tat = stored > nowUs ? stored : nowUs;
  if (cost <= burst + queue) {
    const newTat = tat + cost * T;
    const diff = nowUs - (newTat - burst * T);
    if (diff >= 0) {
      if (write) num[off] = newTat;
      return result(policy, true, Math.floor(diff / T), Math.ceil(newTat / 1000), 0, 0, gcraRefillAt(nowUs, diff, burst * T, T));
    }
    if (diff >= -queue * T) {
      if (write) num[off] = newTat;
      return result(policy, true, 0, Math.ceil(newTat / 1000), 0, Math.ceil(-diff / 1000), gcraRefillAt(nowUs, diff, burst * T, T));
    }
    const credit = nowUs - tat + burst * T;
    const remaining = Math.max(0, Math.floor(credit / T));
    return result(policy, false, remaining, Math.ceil(tat / 1000), Math.ceil((-diff - queue * T) / 1000), 0, gcraRefillAt(nowUs, credit, burst * T, T));
  }
  const credit = nowUs - tat + burst * T;
  const remaining = Math.max(0, Math.floor(credit / T));
  return result(policy, false, remaining, Math.ceil(tat / 1000), Infinity, 0, gcraRefillAt(nowUs, credit, burst * T, T));
}

/**
 * When the next unit drips back. `credit` (µs) is `now - tat + burst × T` for the state after the
 * request: a unit (a token, or a place in the queue) is added each time it reaches the next
 * multiple of `T`; at `burst × T` the bucket is full and nothing more comes (`now`).
 */
function gcraRefillAt(nowUs: number, credit: number, full: number, T: number): number {
  const nowMs = Math.floor(nowUs / 1000);
  if (credit >= full) return nowMs;
  return nowMs + Math.ceil(((Math.floor(credit / T) + 1) * T - credit) / 1000);
}

/** Where each policy's state sits inside one key's record. Computed once per namespace. */
export interface Layout {
  readonly policies: readonly Policy[];
  readonly numOffsets: readonly number[];
  readonly objOffsets: readonly number[];
  /** Numbers per key. */
  readonly numStride: number;
  /** Object slots per key (0 unless a sliding log is configured). */
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
  /** Whether any policy is a concurrency cap (its requests acquire leases). */
  readonly hasConcurrency: boolean;
  /** Whether any policy is a bucket (its charges carry a mark for refunds: see {@link chargeMarks}). */
  readonly hasBucket: boolean;
}

/** How many offences of a key are counted at most (the block stops growing long before). */
const MAX_OFFENCES = 64;

/** Results of a decision that started a block: its state must be written although it was denied. */
const BLOCK_STARTED = new WeakSet<PolicyResult[]>();

/** Whether `consumeAll` started a penalty box for these results (a denial that must still be written). */
export function startedBlock(results: PolicyResult[]): boolean {
  return BLOCK_STARTED.has(results);
}

/** Computes the state layout of a list of policies. */
export function layoutOf(policies: readonly Policy[]): Layout {
  const numOffsets: number[] = [];
  const objOffsets: number[] = [];
  let numStride = 0;
  let objStride = 0;
  let max = Infinity;
  for (const p of policies) {
    numOffsets.push(numStride);
    objOffsets.push(objStride);
    numStride += NUM_WIDTH[p.kind];
    objStride += OBJ_WIDTH[p.kind];
    max = Math.min(max, maxCost(p));
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
  const hasConcurrency = policies.some((p) => p.kind === "concurrency");
  const hasBucket = policies.some(isBucket);
  return { policies, numOffsets, objOffsets, numStride, objStride, maxCost: max, blockOffsets, hasBlock, hasConcurrency, hasBucket };
}

/**
 * If a penalty box of the key is running: every policy's result for a request of `cost`, the
 * blocked ones denying (`reason: "blocked"`) until the later of the block's end and their own retry
 * time for that cost, the others as they would decide it (their state now when they would allow,
 * their own denial when they would not). Writes nothing: no policy consumes, and no offence is
 * counted while a block runs. A request made at `now + retryAfterMs` (the largest of them) is
 * therefore allowed when nothing else consumed meanwhile — an obedient client is never denied twice
 * for one wait, nor escalated.
 */
function blockedNow(layout: Layout, num: Float64Array, base: number, obj: unknown[], oBase: number, nowUs: number, cost: number): PolicyResult[] | undefined {
  const { policies, blockOffsets } = layout;
  let blocked = false;
  for (let i = 0; i < policies.length; i++) {
    const bo = blockOffsets[i] as number;
    if (bo >= 0 && (num[base + bo] as number) > nowUs) blocked = true;
  }
  if (!blocked) return undefined;
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as Policy;
    const off = base + (layout.numOffsets[i] as number);
    const oOff = oBase + (layout.objOffsets[i] as number);
    let r = evaluate(policy, num, off, obj, oOff, nowUs, cost, false);
    if (r.allowed) r = stateNow(policy, num, off, obj, oOff, nowUs);
    const bo = blockOffsets[i] as number;
    const until = bo >= 0 ? (num[base + bo] as number) : 0;
    if (until > nowUs) markBlocked(r, nowUs, Math.ceil((until - nowUs) / 1000));
    results[i] = r;
  }
  return results;
}

/**
 * Turns a result into a penalty-box denial: blocked for `ms` more milliseconds, and told to retry
 * at the later of the block's end and the policy's own retry time for the request (a denial's
 * `retryAfterMs`; 0 for a policy that would have allowed it), so that the retry passes.
 */
function markBlocked(r: PolicyResult, nowUs: number, ms: number): void {
  const nowMs = Math.floor(nowUs / 1000);
  const own = r.allowed ? 0 : r.retryAfterMs;
  const wait = own > ms ? own : ms;
  r.allowed = false;
  r.remaining = 0;
  r.retryAfterMs = wait;
  r.delayMs = 0;
  r.refillAt = nowMs + (wait === Infinity ? ms : wait);
  if (r.resetAt < r.refillAt) r.resetAt = r.refillAt;
  r.blocked = true;
  r.blockedUntil = nowMs + ms;
}

/**
 * After a denial: each denying policy with a penalty box blocks the key (a cost that can never
 * pass is not an offence). Escalates when the previous block ended at most `maxMs` ago.
 */
function startBlocks(layout: Layout, results: PolicyResult[], num: Float64Array, base: number, nowUs: number): void {
  const { policies, blockOffsets } = layout;
  for (let i = 0; i < policies.length; i++) {
    const bo = blockOffsets[i] as number;
    const r = results[i] as PolicyResult;
    const block = (policies[i] as Policy).block;
    if (bo < 0 || block === undefined || r.allowed || r.retryAfterMs === Infinity) continue;
    const previousUntil = num[base + bo] as number;
    const offences = previousUntil > 0 && nowUs <= previousUntil + block.maxMs * 1000 ? Math.min(MAX_OFFENCES, (num[base + bo + 1] as number) + 1) : 1;
    const ms = blockDurationMs(block, offences);
    num[base + bo] = nowUs + ms * 1000;
    num[base + bo + 1] = offences;
    markBlocked(r, nowUs, ms);
    BLOCK_STARTED.add(results);
  }
}

/** When (µs) a policy's penalty box is forgotten: `maxMs` after the block ends (0: none kept). */
export function blockExpiresAtUs(layout: Layout, i: number, num: Float64Array, base: number): number {
  const bo = layout.blockOffsets[i] as number;
  const block = (layout.policies[i] as Policy).block;
  if (bo < 0 || block === undefined) return 0;
  const until = num[base + bo] as number;
  return until > 0 ? until + block.maxMs * 1000 : 0;
}

/**
 * Runs one decision over every policy of a key, all or nothing: if every policy allows `cost`, all
 * consume (a concurrency policy acquires `lease`); otherwise none does, and the policies that would
 * have allowed report their state now.
 */
export function consumeAll(
  layout: Layout,
  num: Float64Array,
  base: number,
  obj: unknown[],
  oBase: number,
  nowUs: number,
  cost: number,
  lease = 0,
): PolicyResult[] {
  const policies = layout.policies;
  const { numOffsets, objOffsets } = layout;
  if (layout.hasBlock) {
    const blocked = blockedNow(layout, num, base, obj, oBase, nowUs, cost);
    if (blocked !== undefined) return blocked;
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
  if (!allowed && layout.hasBlock) startBlocks(layout, results, num, base, nowUs);
  return results;
}

/** `peek` over every policy of a key. */
export function peekAll(
  layout: Layout,
  num: Float64Array,
  base: number,
  obj: unknown[],
  oBase: number,
  nowUs: number,
): PolicyResult[] {
  const policies = layout.policies;
  if (layout.hasBlock) {
    // a peek asks about a cost-1 request
    const blocked = blockedNow(layout, num, base, obj, oBase, nowUs, 1);
    if (blocked !== undefined) return blocked;
  }
  const results: PolicyResult[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) {
    results[i] = peekPolicy(
      policies[i] as Policy,
      num,
      base + (layout.numOffsets[i] as number),
      obj,
      oBase + (layout.objOffsets[i] as number),
      nowUs,
    );
  }
  return results;
}

/** When (µs) the policy's state becomes the empty state again: its natural expiry. 0 if already empty. */
export function expiresAtUs(policy: Policy, num: Float64Array, off: number, obj: unknown[], oOff: number): number {
  switch (policy.kind) {
    case "tokenBucket":
    case "leakyBucket":
      return num[off] as number;
    case "fixedWindow":
      return ((num[off] as number) + 1) * policy.windowMs * 1000;
    case "slidingWindow":
      return ((num[off] as number) + 2) * policy.windowMs * 1000;
    case "slidingLog": {
      const entries = obj[oOff] as number[] | undefined;
      return entries === undefined || entries.length === 0 ? 0 : (entries[entries.length - 2] as number) + policy.windowMs * 1000;
    }
    case "concurrency":
      return num[off] as number;
  }
}

/** Whether a policy is a GCRA bucket (a token or a leaky bucket). */
function isBucket(policy: Policy): policy is Extract<Policy, { kind: "tokenBucket" | "leakyBucket" }> {
  return policy.kind === "tokenBucket" || policy.kind === "leakyBucket";
}

/**
 * The marks of a charge a key's policies just made (read right after an allowed `consumeAll`),
 * which a refund of that charge needs (see {@link refundPolicy}): per policy, for a bucket, its
 * theoretical arrival time right after the charge (µs); 0 for the others, which need none.
 * `undefined` when no policy is a bucket.
 */
export function chargeMarks(layout: Layout, num: Float64Array, base: number): number[] | undefined {
  if (!layout.hasBucket) return undefined;
  const { policies, numOffsets } = layout;
  const marks: number[] = new Array(policies.length);
  for (let i = 0; i < policies.length; i++) marks[i] = isBucket(policies[i] as Policy) ? (num[base + (numOffsets[i] as number)] as number) : 0;
  return marks;
}

/**
 * A charge's mark once `units` of it have been given back already (a refund of a charge may come
 * in parts): a bucket's mark moves back by `units` emission intervals; the others' do not change.
 */
export function refundedMark(policy: Policy, mark: number, units: number): number {
  return isBucket(policy) && mark > 0 ? mark - units * policy.emissionIntervalUs : mark;
}

/**
 * Gives `cost` units back to one policy, for a request charged at `chargedAtUs` (-1: the latest
 * charge), never more than the state holds and never above the quota, and never letting any span
 * admit more than it would have admitted had the refunded request never been made:
 *
 * - a fixed window only within the window it was charged in;
 * - a sliding window in that window (the current or the previous one);
 * - a sliding log from that request's entry (the newest entries first);
 * - a bucket at most what the charge still weighs: `markUs` is its theoretical arrival time (TAT)
 *   right after the charge (-1: the current TAT, i.e. the latest charge), and the refund moves the
 *   TAT back by `min(cost × T, markUs − now, TAT − now)`. A charge whose effect the refill has
 *   erased (`markUs <= now`: the bucket has been full since, or would have been) refunds nothing.
 *   Why this is safe: the TAT without the charge is the larger of `TAT − cost × T` and the TAT of
 *   the later charges alone, which is at most `now + (TAT − markUs)`.
 * - a concurrency cap gives nothing back (a lease is freed by `releasePolicy`, not by a refund).
 *
 * Returns whether the state changed.
 */
export function refundPolicy(
  policy: Policy,
  num: Float64Array,
  off: number,
  obj: unknown[],
  oOff: number,
  nowUs: number,
  cost: number,
  chargedAtUs: number,
  markUs = -1,
): boolean {
  const at = chargedAtUs < 0 ? nowUs : chargedAtUs;
  switch (policy.kind) {
    case "fixedWindow": {
      const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
      const count = num[off + 1] as number;
      if (num[off] !== idx || count <= 0) return false;
      num[off + 1] = Math.max(0, count - cost);
      return true;
    }
    case "slidingWindow": {
      const idx = Math.floor(Math.floor(at / 1000) / policy.windowMs);
      const stored = num[off] as number;
      // [window index, previous count, current count]: the charge sits in the current count of its
      // window, or in the previous count once the next window has begun
      const slot = stored === idx ? off + 2 : stored === idx + 1 ? off + 1 : -1;
      if (slot < 0 || (num[slot] as number) <= 0) return false;
      num[slot] = Math.max(0, (num[slot] as number) - cost);
      return true;
    }
    case "slidingLog": {
      const entries = obj[oOff] as number[] | undefined;
      if (entries === undefined) return false;
      const cutoff = nowUs - policy.windowMs * 1000;
      const atMs = chargedAtUs < 0 ? -1 : Math.floor(chargedAtUs / 1000);
      let left = cost;
      let changed = false;
      for (let i = entries.length - 2; i >= 0 && left > 0; i -= 2) {
        const time = entries[i] as number;
        if (time <= cutoff) break;
        if (atMs >= 0 && Math.floor(time / 1000) !== atMs) continue;
        const take = Math.min(left, entries[i + 1] as number);
        entries[i + 1] = (entries[i + 1] as number) - take;
        num[off] = (num[off] as number) - take;
        left -= take;
        changed = true;
      }
      if (!changed) return false;
      // drop the emptied entries, keeping the order
      let w = 0;
      for (let r = 0; r < entries.length; r += 2) {
        if ((entries[r + 1] as number) > 0) {
          entries[w] = entries[r] as number;
          entries[w + 1] = entries[r + 1] as number;
          w += 2;
        }
      }
      entries.length = w;
      if (w === 0) obj[oOff] = undefined;
      return true;
    }
    case "concurrency":
      return false;
    case "tokenBucket":
    case "leakyBucket": {
      const tat = num[off] as number;
      const mark = markUs < 0 ? tat : markUs;
      const back = Math.min(cost * policy.emissionIntervalUs, mark - nowUs, tat - nowUs);
      if (back <= 0) return false;
      num[off] = tat - back;
      return true;
    }
  }
}

/**
 * {@link refundPolicy} for every policy of a key; returns whether any state changed. `marks`: the
 * charge's marks (see {@link chargeMarks}, moved back by {@link refundedMark} for what was refunded
 * already), or `undefined` for the latest charge.
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
): boolean {
  let i = 0;
  return changesAny(layout, base, oBase, (policy, off, oOff) => {
    // no marks: the latest charge; a mark missing from the list: nothing known, so a bucket gives nothing back
    const mark = marks === undefined ? -1 : (marks[i] ?? 0);
    i++;
    return refundPolicy(policy, num, off, obj, oOff, nowUs, cost, chargedAtUs, mark);
  });
}
