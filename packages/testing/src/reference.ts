/**
 * Naive reference models, one per algorithm, written from the textbook description rather than
 * from the engine: counters per window index, a list of every admitted request, a token level that
 * refills, a water level that drains, a list of leases held, and `retryAfterMs` found by trying
 * every millisecond. Slow
 * and obviously right; the property tests and the recorded vectors compare every store with them.
 *
 * Time is whole milliseconds (the stores' test clocks are ms). Internally µs where the design says
 * µs (the bucket's emission interval), so the models match the design's integer definitions.
 */
import { type Policy, type PolicyResult, blockDurationMs } from "@sluice/core";

/** One policy's model: `check` must not change state; `commit` applies an allowed request. */
interface Model {
  readonly policy: Policy;
  /** Would `cost` pass at `nowMs`? Also `remaining`/`resetAt` (after, if allowed; now, if not) and `delayMs`. */
  check(nowMs: number, cost: number): { allowed: boolean; remaining: number; resetAt: number; delayMs: number };
  /** `lease`: the id under which a concurrency cap holds the request's slot (ignored by the others). */
  commit(nowMs: number, cost: number, lease?: number): void;
  /** The state now: remaining and resetAt without consuming. */
  now(nowMs: number): { remaining: number; resetAt: number };
  /**
   * Gives `cost` units back for the request `charge` describes (`undefined`: the latest charges),
   * never above the quota, never more than the charge still weighs.
   */
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined): void;
  /** What a refund of the charge just committed needs to know (a bucket's level right after it). */
  snapshot(): number;
  /** The largest cost the policy can ever admit. */
  readonly maxCost: number;
}

const ceilDiv = (a: number, b: number) => Math.ceil(a / b);

/**
 * One model's view of a charge to refund: when it was made, the model's {@link Model.snapshot}
 * right after it, and how many of its units were given back already.
 */
export interface ModelCharge {
  atMs: number;
  snapshot: number;
  refunded: number;
}

class FixedWindowModel implements Model {
  readonly counts = new Map<number, number>();
  readonly maxCost: number;
  constructor(readonly policy: Extract<Policy, { kind: "fixedWindow" }>) {
    this.maxCost = policy.limit;
  }
  private window(nowMs: number) {
    const idx = Math.floor(nowMs / this.policy.windowMs);
    return { idx, used: this.counts.get(idx) ?? 0, end: (idx + 1) * this.policy.windowMs };
  }
  check(nowMs: number, cost: number) {
    const { used, end } = this.window(nowMs);
    const allowed = used + cost <= this.policy.limit;
    return { allowed, remaining: this.policy.limit - used - (allowed ? cost : 0), resetAt: end, delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    const { idx, used } = this.window(nowMs);
    this.counts.set(idx, used + cost);
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // the count of the window the request was charged in, if that window is still the current one
    const idx = Math.floor((charge?.atMs ?? nowMs) / this.policy.windowMs);
    if (idx !== Math.floor(nowMs / this.policy.windowMs)) return;
    this.counts.set(idx, Math.max(0, (this.counts.get(idx) ?? 0) - cost));
  }
  snapshot() {
    return 0;
  }
  now(nowMs: number) {
    const { used, end } = this.window(nowMs);
    return { remaining: this.policy.limit - used, resetAt: end };
  }
}

class SlidingWindowModel implements Model {
  readonly counts = new Map<number, number>();
  readonly maxCost: number;
  constructor(readonly policy: Extract<Policy, { kind: "slidingWindow" }>) {
    this.maxCost = policy.limit;
  }
  /** The weighted count scaled by W: prev*(W - r) + cur*W, with the counts of the real windows. */
  private view(nowMs: number) {
    const W = this.policy.windowMs;
    const idx = Math.floor(nowMs / W);
    const r = nowMs % W;
    const prev = this.counts.get(idx - 1) ?? 0;
    const cur = this.counts.get(idx) ?? 0;
    return { W, idx, r, prev, cur };
  }
  private passes(nowMs: number, cost: number, extra = new Map<number, number>()) {
    const { W, idx, r } = this.view(nowMs);
    const prev = (this.counts.get(idx - 1) ?? 0) + (extra.get(idx - 1) ?? 0);
    const cur = (this.counts.get(idx) ?? 0) + (extra.get(idx) ?? 0);
    return BigInt(prev) * BigInt(W - r) + BigInt(cur + cost) * BigInt(W) <= BigInt(this.policy.limit) * BigInt(W);
  }
  private remainingWith(nowMs: number, cur: number) {
    const { W, r, prev } = this.view(nowMs);
    const left = (BigInt(this.policy.limit) * BigInt(W) - BigInt(prev) * BigInt(W - r)) / BigInt(W);
    return Math.max(0, Number(left) - cur);
  }
  private resetWith(nowMs: number, cur: number) {
    const { W, idx, prev } = this.view(nowMs);
    return cur > 0 ? (idx + 2) * W : prev > 0 ? (idx + 1) * W : nowMs;
  }
  check(nowMs: number, cost: number) {
    const { cur } = this.view(nowMs);
    const allowed = cost <= this.policy.limit && this.passes(nowMs, cost);
    const after = allowed ? cur + cost : cur;
    return { allowed, remaining: this.remainingWith(nowMs, after), resetAt: this.resetWith(nowMs, after), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    const idx = Math.floor(nowMs / this.policy.windowMs);
    this.counts.set(idx, (this.counts.get(idx) ?? 0) + cost);
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // the count of the window the request was charged in, while it still counts (current or previous)
    const idx = Math.floor((charge?.atMs ?? nowMs) / this.policy.windowMs);
    if (idx < Math.floor(nowMs / this.policy.windowMs) - 1) return;
    this.counts.set(idx, Math.max(0, (this.counts.get(idx) ?? 0) - cost));
  }
  snapshot() {
    return 0;
  }
  now(nowMs: number) {
    const { cur } = this.view(nowMs);
    return { remaining: this.remainingWith(nowMs, cur), resetAt: this.resetWith(nowMs, cur) };
  }
}

class SlidingLogModel implements Model {
  readonly log: { at: number; cost: number }[] = [];
  readonly maxCost: number;
  constructor(readonly policy: Extract<Policy, { kind: "slidingLog" }>) {
    this.maxCost = policy.limit;
  }
  private live(nowMs: number) {
    return this.log.filter((e) => e.at > nowMs - this.policy.windowMs && e.at <= nowMs);
  }
  check(nowMs: number, cost: number) {
    const live = this.live(nowMs);
    const used = live.reduce((s, e) => s + e.cost, 0);
    const allowed = used + cost <= this.policy.limit;
    if (allowed) return { allowed, remaining: this.policy.limit - used - cost, resetAt: nowMs + this.policy.windowMs, delayMs: 0 };
    return { allowed, ...this.now(nowMs), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    this.log.push({ at: nowMs, cost });
  }
  snapshot() {
    return 0;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // that request's entries (or the latest ones), newest first, among those still in the window
    const chargedAtMs = charge?.atMs;
    let left = cost;
    for (let i = this.log.length - 1; i >= 0 && left > 0; i--) {
      const e = this.log[i]!;
      if (e.at <= nowMs - this.policy.windowMs) break;
      if (chargedAtMs !== undefined && e.at !== chargedAtMs) continue;
      const take = Math.min(left, e.cost);
      e.cost -= take;
      left -= take;
    }
    for (let i = this.log.length - 1; i >= 0; i--) if (this.log[i]!.cost === 0) this.log.splice(i, 1);
  }
  now(nowMs: number) {
    const live = this.live(nowMs);
    const used = live.reduce((s, e) => s + e.cost, 0);
    const newest = live.length > 0 ? Math.max(...live.map((e) => e.at)) : undefined;
    return { remaining: this.policy.limit - used, resetAt: newest === undefined ? nowMs : newest + this.policy.windowMs };
  }
}

/**
 * Token bucket as the seed's class: starts full, refills continuously. The level is kept in
 * "µs of refill" (tokens × emission interval) so it stays an integer.
 */
class TokenBucketModel implements Model {
  readonly levels = { level: -1, at: 0 };
  readonly maxCost: number;
  readonly T: number;
  readonly full: number;
  constructor(readonly policy: Extract<Policy, { kind: "tokenBucket" }>) {
    this.maxCost = policy.capacity;
    this.T = ceilDiv(policy.intervalMs * 1000, policy.refillRate);
    this.full = policy.capacity * this.T;
  }
  private levelAt(nowMs: number) {
    if (this.levels.level < 0) return this.full;
    return Math.min(this.full, this.levels.level + (nowMs - this.levels.at) * 1000);
  }
  check(nowMs: number, cost: number) {
    const level = this.levelAt(nowMs);
    const allowed = level >= cost * this.T;
    const after = allowed ? level - cost * this.T : level;
    return { allowed, remaining: Math.floor(after / this.T), resetAt: ceilDiv(nowMs * 1000 + this.full - after, 1000), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    this.levels.level = this.levelAt(nowMs) - cost * this.T;
    this.levels.at = nowMs;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // tokens back, the bucket never above full, and never more than the charge still weighs: the
    // deficit it left (full − the level right after it), less the refill since and what was given
    // back of it already. A charge the refill has erased (the bucket has been full since) weighs nothing.
    const level = this.levelAt(nowMs);
    let back = Math.min(cost * this.T, this.full - level);
    if (charge !== undefined) back = Math.min(back, this.full - charge.snapshot - (nowMs - charge.atMs) * 1000 - charge.refunded * this.T);
    if (back <= 0) return;
    this.levels.level = level + back;
    this.levels.at = nowMs;
  }
  snapshot() {
    return this.levels.level;
  }
  now(nowMs: number) {
    const level = this.levelAt(nowMs);
    return { remaining: Math.floor(level / this.T), resetAt: ceilDiv(nowMs * 1000 + this.full - level, 1000) };
  }
}

/** Leaky bucket as a meter: water (µs of backlog) drains at 1 µs per µs; a request pours cost × T. */
class LeakyBucketModel implements Model {
  readonly water = { level: 0, at: 0 };
  readonly maxCost: number;
  readonly T: number;
  constructor(readonly policy: Extract<Policy, { kind: "leakyBucket" }>) {
    this.maxCost = policy.burst + policy.queue;
    this.T = ceilDiv(policy.periodMs * 1000, policy.rate);
  }
  private levelAt(nowMs: number) {
    return Math.max(0, this.water.level - (nowMs - this.water.at) * 1000);
  }
  check(nowMs: number, cost: number) {
    const level = this.levelAt(nowMs);
    const poured = level + cost * this.T;
    const { burst, queue } = this.policy;
    if (poured <= burst * this.T) {
      return { allowed: true, remaining: Math.floor((burst * this.T - poured) / this.T), resetAt: ceilDiv(nowMs * 1000 + poured, 1000), delayMs: 0 };
    }
    if (poured <= (burst + queue) * this.T) {
      return { allowed: true, remaining: 0, resetAt: ceilDiv(nowMs * 1000 + poured, 1000), delayMs: ceilDiv(poured - burst * this.T, 1000) };
    }
    return { allowed: false, ...this.now(nowMs), delayMs: 0 };
  }
  commit(nowMs: number, cost: number) {
    this.water.level = this.levelAt(nowMs) + cost * this.T;
    this.water.at = nowMs;
  }
  refund(nowMs: number, cost: number, charge: ModelCharge | undefined) {
    // water out, the bucket never below empty, and never more than the charge still weighs: the
    // water right after it, less what drained since and what was given back of it already
    const level = this.levelAt(nowMs);
    let back = Math.min(cost * this.T, level);
    if (charge !== undefined) back = Math.min(back, charge.snapshot - (nowMs - charge.atMs) * 1000 - charge.refunded * this.T);
    if (back <= 0) return;
    this.water.level = level - back;
    this.water.at = nowMs;
  }
  snapshot() {
    return this.water.level;
  }
  now(nowMs: number) {
    const level = this.levelAt(nowMs);
    return {
      remaining: Math.max(0, Math.floor((this.policy.burst * this.T - level) / this.T)),
      resetAt: ceilDiv(nowMs * 1000 + level, 1000),
    };
  }
}

/**
 * Concurrency cap: a list of the leases held, each with the time it expires unless released. A
 * request takes one slot whatever its cost; an expired lease holds nothing.
 */
class ConcurrencyModel implements Model {
  leases: { expires: number; id: number }[] = [];
  readonly maxCost = Infinity;
  constructor(readonly policy: Extract<Policy, { kind: "concurrency" }>) {}
  live(nowMs: number) {
    return this.leases.filter((l) => l.expires > nowMs);
  }
  check(nowMs: number) {
    const live = this.live(nowMs);
    const allowed = live.length < this.policy.limit;
    if (!allowed) return { allowed, ...this.now(nowMs), delayMs: 0 };
    const expiries = [...live.map((l) => l.expires), nowMs + this.policy.leaseMs];
    return { allowed, remaining: this.policy.limit - live.length - 1, resetAt: Math.max(...expiries), delayMs: 0 };
  }
  commit(nowMs: number, _cost: number, lease = 0) {
    this.leases.push({ expires: nowMs + this.policy.leaseMs, id: lease });
  }
  refund() {
    // a refund gives rate units back; a slot is freed by a release
  }
  snapshot() {
    return 0;
  }
  release(nowMs: number, lease: number) {
    this.leases = this.live(nowMs).filter((l) => l.id !== lease);
  }
  now(nowMs: number) {
    const live = this.live(nowMs);
    return {
      remaining: Math.max(0, this.policy.limit - live.length),
      resetAt: live.length === 0 ? nowMs : Math.max(...live.map((l) => l.expires)),
    };
  }
}

/** A denied concurrency request is told to come back when the earliest lease expires, but within a second: a release may come any time. */
const CONCURRENCY_RETRY_MS = 1000;

function modelOf(policy: Policy): Model {
  switch (policy.kind) {
    case "fixedWindow":
      return new FixedWindowModel(policy);
    case "slidingWindow":
      return new SlidingWindowModel(policy);
    case "slidingLog":
      return new SlidingLogModel(policy);
    case "tokenBucket":
      return new TokenBucketModel(policy);
    case "leakyBucket":
      return new LeakyBucketModel(policy);
    case "concurrency":
      return new ConcurrencyModel(policy);
  }
}

/** The decision fields a store must reproduce (everything but `pending`). */
export interface PlainDecision {
  allowed: boolean;
  now: number;
  limit: number;
  remaining: number;
  resetAt: number;
  retryAfterMs: number | null; // null stands for Infinity (JSON has no Infinity)
  delayMs: number;
  policy: string;
  reason: string;
  policies: (Omit<PolicyResult, "retryAfterMs"> & { retryAfterMs: number | null })[];
}

/** How far ahead the brute-force retry search looks before it calls a cost impossible (ms). */
const SEARCH_LIMIT_MS = 40 * 86_400_000;

/**
 * A naive limiter over several policies for many keys: all or nothing, the binding policy as the
 * design defines it, `retryAfterMs` by trying every millisecond until the request passes.
 */
export class ReferenceLimiter {
  readonly #models = new Map<string, Model[]>();
  /** Per key, per policy: the penalty box (blocked until, epoch ms; offences so far). */
  readonly #blocks = new Map<string, { until: number; offences: number }[]>();
  /**
   * The charge the last `limit` made (`undefined` if it was denied): its time and each model's
   * snapshot right after it, for a refund of it later.
   */
  lastCharge: { atMs: number; snapshots: readonly number[] } | undefined = undefined;
  constructor(readonly policies: readonly Policy[]) {}

  #blocksOf(key: string): { until: number; offences: number }[] {
    let blocks = this.#blocks.get(key);
    if (!blocks) {
      blocks = this.policies.map(() => ({ until: 0, offences: 0 }));
      this.#blocks.set(key, blocks);
    }
    return blocks;
  }

  /**
   * While a penalty box runs, every request is denied: a blocked policy until the later of the
   * block's end and its own retry time for `cost`; the others as they would decide the request
   * (their state when they would allow it, their own denial when not). Nothing is consumed and no
   * offence counted.
   */
  #blockedResults(key: string, nowMs: number, cost: number): PlainDecision | undefined {
    const blocks = this.#blocksOf(key);
    if (!blocks.some((b) => b.until > nowMs)) return undefined;
    const results = this.#of(key).map((m, i) => {
      const until = blocks[i]!.until;
      const c = m.check(nowMs, cost);
      const state = c.allowed
        ? { policy: m.policy.name, allowed: true, limit: m.policy.limit, ...m.now(nowMs), retryAfterMs: 0 as number | null, delayMs: 0, refillAt: ReferenceLimiter.refillAt(m, nowMs) }
        : {
            policy: m.policy.name,
            allowed: false,
            limit: m.policy.limit,
            remaining: c.remaining,
            resetAt: c.resetAt,
            retryAfterMs: ReferenceLimiter.retryAfter(m, nowMs, cost),
            delayMs: 0,
            refillAt: ReferenceLimiter.refillAt(m, nowMs),
          };
      return until > nowMs ? blockedResult(state, nowMs, until - nowMs) : state;
    });
    return combine(results, nowMs);
  }

  #of(key: string): Model[] {
    let models = this.#models.get(key);
    if (!models) {
      models = this.policies.map(modelOf);
      this.#models.set(key, models);
    }
    return models;
  }

  /**
   * When the policy's available quota next grows (`refillAt`): for a fixed window, the end of the
   * window; otherwise, with `a` the largest cost that passes now, the first moment a cost of
   * `a + 1` passes (the state unchanged) — now if `a` is already the most the policy can admit.
   */
  static refillAt(model: Model, nowMs: number): number {
    if (model.policy.kind === "fixedWindow") return model.now(nowMs).resetAt;
    if (model instanceof ConcurrencyModel) {
      // a slot may free at the earliest expiry, or any time before through a release: at most a second away
      const live = model.live(nowMs);
      return live.length === 0 ? nowMs : nowMs + Math.min(CONCURRENCY_RETRY_MS, Math.min(...live.map((l) => l.expires)) - nowMs);
    }
    let low = 0; // passes (a cost of 0 always does)
    let high = model.maxCost + 1; // never passes
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      if (model.check(nowMs, mid).allowed) low = mid;
      else high = mid;
    }
    if (low >= model.maxCost) return nowMs;
    return nowMs + (ReferenceLimiter.retryAfter(model, nowMs, low + 1) as number);
  }

  /** The least d >= 0 such that `cost` passes `model` at nowMs + d (the state unchanged), or null. */
  static retryAfter(model: Model, nowMs: number, cost: number): number | null {
    if (cost > model.maxCost) return null;
    // step coarsely to the first passing time, then walk back 1 ms at a time to the least one
    let step = 1;
    let d = 0;
    while (!model.check(nowMs + d, cost).allowed) {
      d += step;
      if (d > SEARCH_LIMIT_MS) return null;
      step = Math.min(step * 2, 1024);
    }
    while (d > 0 && model.check(nowMs + d - 1, cost).allowed) d--;
    // a concurrency cap: its earliest lease expiry, but at most a second (a release may come any time)
    return model instanceof ConcurrencyModel ? Math.min(CONCURRENCY_RETRY_MS, d) : d;
  }

  /** `lease`: the id an allowed request's slot is held under on every concurrency policy. */
  limit(key: string, cost: number, nowMs: number, lease = 0): PlainDecision {
    this.lastCharge = undefined;
    const blocked = this.#blockedResults(key, nowMs, cost);
    if (blocked !== undefined) return blocked;
    const models = this.#of(key);
    const checks = models.map((m) => m.check(nowMs, cost));
    const allowed = checks.every((c) => c.allowed);
    // retry times are searched on the state before the request (a denied request changes nothing)
    const retries = checks.map((c, i) => (c.allowed ? 0 : ReferenceLimiter.retryAfter(models[i]!, nowMs, cost)));
    if (allowed) {
      models.forEach((m) => m.commit(nowMs, cost, lease));
      this.lastCharge = { atMs: nowMs, snapshots: models.map((m) => m.snapshot()) };
    }
    const results: PlainDecision["policies"] = models.map((m, i) => {
      const c = checks[i]!;
      const refillAt = ReferenceLimiter.refillAt(m, nowMs);
      if (!allowed && c.allowed) return { policy: m.policy.name, allowed: true, limit: m.policy.limit, ...m.now(nowMs), retryAfterMs: 0, delayMs: 0, refillAt };
      return {
        policy: m.policy.name,
        allowed: c.allowed,
        limit: m.policy.limit,
        remaining: c.remaining,
        resetAt: c.resetAt,
        retryAfterMs: retries[i]!,
        delayMs: c.delayMs,
        refillAt,
      };
    });
    if (!allowed) {
      // each denying policy with a penalty box blocks the key (a cost that can never pass does not)
      const blocks = this.#blocksOf(key);
      results.forEach((r, i) => {
        const block = models[i]!.policy.block;
        if (block === undefined || r.allowed || r.retryAfterMs === null) return;
        const b = blocks[i]!;
        b.offences = b.until > 0 && nowMs <= b.until + block.maxMs ? Math.min(64, b.offences + 1) : 1;
        const ms = blockDurationMs(block, b.offences);
        b.until = nowMs + ms;
        results[i] = blockedResult(r, nowMs, ms);
      });
    }
    return combine(results, nowMs);
  }

  peek(key: string, nowMs: number): PlainDecision {
    const blocked = this.#blockedResults(key, nowMs, 1);
    if (blocked !== undefined) return blocked;
    const models = this.#of(key);
    const results = models.map((m) => {
      const c = m.check(nowMs, 1);
      const state = m.now(nowMs);
      return {
        policy: m.policy.name,
        allowed: c.allowed,
        limit: m.policy.limit,
        remaining: state.remaining,
        resetAt: state.resetAt,
        retryAfterMs: c.allowed ? 0 : ReferenceLimiter.retryAfter(m, nowMs, 1),
        delayMs: c.delayMs,
        refillAt: ReferenceLimiter.refillAt(m, nowMs),
      };
    });
    return combine(results, nowMs);
  }

  reset(key: string): void {
    this.#models.delete(key);
    this.#blocks.delete(key);
  }

  /**
   * Gives `cost` units back to every policy for the charge `charge` (what {@link lastCharge} was
   * after its `limit`, and how many units of it were refunded before; `undefined`: the latest
   * charges); answers as `peek`.
   */
  refund(key: string, cost: number, charge: { atMs: number; snapshots: readonly number[]; refunded: number } | undefined, nowMs: number): PlainDecision {
    this.#of(key).forEach((m, i) =>
      m.refund(nowMs, cost, charge === undefined ? undefined : { atMs: charge.atMs, snapshot: charge.snapshots[i] as number, refunded: charge.refunded }),
    );
    return this.peek(key, nowMs);
  }

  /** Frees the slot `lease` holds on every concurrency policy (idempotent); answers as `peek`. */
  release(key: string, lease: number, nowMs: number): PlainDecision {
    for (const m of this.#of(key)) if (m instanceof ConcurrencyModel) m.release(nowMs, lease);
    return this.peek(key, nowMs);
  }
}

/**
 * A policy's result as a penalty-box denial for `ms` more milliseconds: retry at the later of the
 * block's end and the policy's own retry time (0 if it would have allowed; null: never).
 */
function blockedResult(r: PlainDecision["policies"][number], nowMs: number, ms: number): PlainDecision["policies"][number] {
  const own = r.allowed ? 0 : r.retryAfterMs;
  const wait = own === null ? null : Math.max(ms, own);
  const refillAt = nowMs + (wait === null ? ms : wait);
  return { ...r, allowed: false, remaining: 0, retryAfterMs: wait, delayMs: 0, refillAt, resetAt: Math.max(r.resetAt, refillAt), blocked: true, blockedUntil: nowMs + ms };
}

function combine(results: PlainDecision["policies"], nowMs: number): PlainDecision {
  const allowed = results.every((r) => r.allowed);
  const inf = (x: number | null) => (x === null ? Infinity : x);
  let binding = results[0]!;
  if (allowed) {
    for (const r of results) if (r.remaining < binding.remaining) binding = r;
  } else {
    const denying = results.filter((r) => !r.allowed);
    binding = denying[0]!;
    for (const r of denying) if (inf(r.retryAfterMs) > inf(binding.retryAfterMs)) binding = r;
  }
  return {
    allowed,
    now: nowMs,
    limit: binding.limit,
    remaining: binding.remaining,
    resetAt: binding.resetAt,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    delayMs: allowed ? Math.max(...results.map((r) => r.delayMs)) : 0,
    policy: binding.policy,
    reason: allowed ? "ok" : results.some((r) => r.blocked === true) ? "blocked" : binding.retryAfterMs === null ? "cost-exceeds-limit" : "limit",
    policies: results,
  };
}

/** A `Decision` as plain JSON-able data (Infinity → null, no `pending`), for comparisons and vectors. */
export function plain(decision: {
  allowed: boolean;
  now: number;
  limit: number;
  remaining: number;
  resetAt: number;
  retryAfterMs: number;
  delayMs: number;
  policy: string;
  reason: string;
  policies: PolicyResult[];
}): PlainDecision {
  const fin = (x: number) => (x === Infinity ? null : x);
  return {
    allowed: decision.allowed,
    now: decision.now,
    limit: decision.limit,
    remaining: decision.remaining,
    resetAt: decision.resetAt,
    retryAfterMs: fin(decision.retryAfterMs),
    delayMs: decision.delayMs,
    policy: decision.policy,
    reason: decision.reason,
    policies: decision.policies.map((p) => ({ ...p, retryAfterMs: fin(p.retryAfterMs) })),
  };
}
