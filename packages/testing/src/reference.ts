/**
 * The naive reference limiter: one naive model per policy and key (`algorithms/<kind>.ts`, written
 * from the textbook description rather than from the engine: counters per window index, a list of
 * every admitted request, a token level that refills, a water level that drains, a list of leases
 * held), all or nothing over the policies, the penalty box, and `retryAfterMs` found by trying every
 * millisecond. Slow and obviously right; the property tests and the recorded vectors compare every
 * store with it.
 *
 * Time is whole milliseconds (the stores' test clocks are ms).
 */
import type { Decision, Policy, PolicyResult } from "@sluice/core";
import { blockDurationMs } from "@sluice/core/store";
import { type Model, type ModelCharge, modelOf } from "./algorithms/index.js";

export type { ModelCharge } from "./algorithms/index.js";

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
    // a model that knows it (a fixed window: the window's end; a concurrency cap: the next slot) says so
    if (model.refillAt !== undefined) return model.refillAt(nowMs);
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
    // a hint rather than an exact time (a concurrency cap: its earliest lease expiry, but at most a
    // second, as a release may come any time)
    return model.retryCapMs === undefined ? d : Math.min(model.retryCapMs, d);
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

  /** Frees the slot `lease` holds on every policy that holds leases (idempotent); answers as `peek`. */
  release(key: string, lease: number, nowMs: number): PlainDecision {
    for (const m of this.#of(key)) m.release?.(nowMs, lease);
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
export function plain(
  decision: Pick<Decision, "allowed" | "now" | "limit" | "remaining" | "resetAt" | "retryAfterMs" | "delayMs" | "policy" | "policies"> & { reason: string },
): PlainDecision {
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
