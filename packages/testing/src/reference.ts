/**
 * The naive reference limiter: one naive model per policy and key (`algorithms/<kind>.ts`, written
 * from the textbook description rather than from the engine: counters per window index, a list of
 * every admitted request, a token level that refills, a water level that drains, a list of leases
 * held), all or nothing over the policies, the penalty box, and `retryAfterMs` found by trying every
 * millisecond. Slow and obviously right; the property tests and the recorded vectors compare every
 * store with it.
 *
 * Per-key overrides and manual blocks (`limiter.setOverride`, `limiter.block`) as the contract
 * states them: the effective quota of each policy worked out here (`effectiveQuota`), each model
 * judging its state under it (`Model.retarget`, which also checks core's effective policy against
 * the contract), an unlimited override answering without counting (a manual block still denies it
 * until the block's end), a manual block denying every request with each policy's own answer and
 * the later of the two blocks' ends.
 *
 * Time is whole milliseconds (the stores' test clocks are ms).
 */
import type { Decision, Override, Policy, PolicyResult } from "@sluice/core";
import { blockDurationMs, effectivePolicies, maxQuota, overrideFromText, quotaOf } from "@sluice/core/store";
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
  /** The key's override that applied (`decision.override`), as plain data; absent when none did. */
  override?: Override;
}

/**
 * The body a store keeps for an override (the contract's stored form): `s,<scale>` (JavaScript's
 * `String(scale)`), `u`, or `q,<name>=<quota>,…` with the names in JavaScript's string order.
 */
export function overrideBody(override: Override): string {
  if (Object.hasOwn(override, "unlimited")) return "u";
  if (Object.hasOwn(override, "scale")) return `s,${String((override as { scale: number }).scale)}`;
  const quotas = (override as { quotas: Readonly<Record<string, number>> }).quotas;
  const names = Object.keys(quotas).sort();
  return `q,${names.map((n) => `${n}=${quotas[n]}`).join(",")}`;
}

/**
 * The quota an override gives `policy` (the contract): `min(max, max(1, floor(Q × scale)))` for a
 * scale, the listed quota (clamped alike) for a policy that `quotas` names, the policy's own `Q`
 * otherwise (and under `unlimited`, which counts nothing).
 */
export function effectiveQuota(policy: Policy, override: Override | undefined): number {
  const Q = quotaOf(policy);
  if (override === undefined || Object.hasOwn(override, "unlimited")) return Q;
  let quota: number;
  if (Object.hasOwn(override, "scale")) quota = Math.floor(Q * (override as { scale: number }).scale);
  else {
    // a policy is named only by an entry of its own (a policy called `toString` is not Object.prototype's)
    const quotas = (override as { quotas: Readonly<Record<string, number>> }).quotas;
    if (!Object.hasOwn(quotas, policy.name)) return Q;
    quota = quotas[policy.name] as number;
  }
  return Math.min(maxQuota(policy), Math.max(1, quota));
}

/** A key's override (its end: epoch ms, Infinity for none) and manual block (its end, 0 for none). */
interface KeyControls {
  override: Override | undefined;
  overrideUntil: number;
  blockUntil: number;
}

/** How far ahead the brute-force retry search looks before it calls a cost impossible (ms). */
const SEARCH_LIMIT_MS = 40 * 86_400_000;

/**
 * A charge as the reference limiter records it: when it was made, each model's snapshot right
 * after it, and what one unit of it weighed per model (a bucket's emission interval then; 0 for a
 * count), so that a refund gives back at the charge's price whatever override came since.
 */
export interface ReferenceCharge {
  atMs: number;
  snapshots: readonly number[];
  prices?: readonly number[];
}

/**
 * A naive limiter over several policies for many keys: all or nothing, the binding policy as the
 * design defines it, `retryAfterMs` by trying every millisecond until the request passes.
 */
export class ReferenceLimiter {
  readonly #models = new Map<string, Model[]>();
  /** Per key, per policy: the penalty box (blocked until, epoch ms; offences so far). */
  readonly #blocks = new Map<string, { until: number; offences: number }[]>();
  /** Per key: its override and manual block. */
  readonly #controls = new Map<string, KeyControls>();
  /** Per key: the quota each model judges by now (see `#sync`). */
  readonly #quotas = new Map<string, number[]>();
  /**
   * The charge the last `limit` made (`undefined` if it was denied): its time and each model's
   * snapshot right after it, for a refund of it later.
   */
  lastCharge: ReferenceCharge | undefined = undefined;
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
   * While a penalty box or a manual block runs, every request is denied: a blocked policy until
   * the later of the block's end (the manual block's, its own penalty box's) and its own retry time
   * for `cost`; the others as they would decide the request (their state when they would allow it,
   * their own denial when not). Nothing is consumed and no offence counted.
   */
  #blockedResults(key: string, nowMs: number, cost: number): PlainDecision | undefined {
    const blocks = this.#blocksOf(key);
    const manual = this.#liveControls(key, nowMs)?.blockUntil ?? 0;
    if (manual <= nowMs && !blocks.some((b) => b.until > nowMs)) return undefined;
    const results = this.#of(key).map((m, i) => {
      const until = Math.max(blocks[i]!.until, manual);
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
    return this.#withOverride(combine(results, nowMs), key, nowMs);
  }

  /** The key's override and manual block at `nowMs` (the parts that ended dropped), or `undefined`. */
  #liveControls(key: string, nowMs: number): KeyControls | undefined {
    const c = this.#controls.get(key);
    if (c === undefined) return undefined;
    if (c.override !== undefined && c.overrideUntil <= nowMs) c.override = undefined;
    if (c.blockUntil <= nowMs) c.blockUntil = 0;
    if (c.override === undefined && c.blockUntil === 0) {
      this.#controls.delete(key);
      return undefined;
    }
    return c;
  }

  /** The override that applies to `key` at `nowMs`, or `undefined`. */
  overrideAt(key: string, nowMs: number): Override | undefined {
    return this.#liveControls(key, nowMs)?.override;
  }

  /**
   * Points the key's models at the quotas its override gives at `nowMs` (its own when it has none,
   * or it ended): a model whose quota changes judges its state under the new one from now on. The
   * effective policies are core's (`effectivePolicies`), checked against {@link effectiveQuota}
   * here and against the contract's scaling by each model.
   */
  #sync(key: string, nowMs: number): void {
    const override = this.overrideAt(key, nowMs);
    const want = this.policies.map((p) => effectiveQuota(p, override));
    const have = this.#quotas.get(key) ?? this.policies.map(quotaOf);
    if (want.every((q, i) => q === have[i])) return;
    const models = this.#of(key);
    const effective = override === undefined || Object.hasOwn(override, "unlimited") ? this.policies : effectivePolicies(this.policies, overrideBody(override));
    want.forEach((quota, i) => {
      if (quota === have[i]) return;
      const policy = quota === quotaOf(this.policies[i]!) ? this.policies[i]! : effective[i]!;
      if (policy.limit !== quota) {
        throw new Error(`reference: core's effective policy ${JSON.stringify(policy.name)} under ${overrideBody(override!)} has quota ${policy.limit}; the contract says ${quota}`);
      }
      models[i]!.retarget(policy);
    });
    this.#quotas.set(key, want);
  }

  /** Whether an unlimited override applies to `key` at `nowMs` (a manual block still wins). */
  #unlimited(key: string, nowMs: number): boolean {
    const o = this.overrideAt(key, nowMs);
    return o !== undefined && Object.hasOwn(o, "unlimited");
  }

  /**
   * Every policy's answer under an unlimited override: allowed, nothing counted, its own whole
   * quota. A manual block still denies, until its end only (the policies' penalty boxes do not
   * apply, and once it ends everything passes).
   */
  #unlimitedResults(key: string, nowMs: number): PlainDecision {
    const manual = this.#liveControls(key, nowMs)?.blockUntil ?? 0;
    const results = this.policies.map((p) => {
      const r = { policy: p.name, allowed: true, limit: quotaOf(p), remaining: quotaOf(p), resetAt: nowMs, retryAfterMs: 0 as number | null, delayMs: 0, refillAt: nowMs };
      return manual > nowMs ? blockedResult(r, nowMs, manual - nowMs) : r;
    });
    return this.#withOverride(combine(results, nowMs), key, nowMs);
  }

  /** `decision` with the key's live override on it (plain data), when one applies. */
  #withOverride(decision: PlainDecision, key: string, nowMs: number): PlainDecision {
    const o = this.overrideAt(key, nowMs);
    if (o !== undefined) decision.override = JSON.parse(JSON.stringify(o)) as Override;
    return decision;
  }

  /** `limiter.setOverride(key, override, { ttl })` at `nowMs` (`ttlMs` 0: until cleared). */
  setOverride(key: string, override: Override, ttlMs: number, nowMs: number): void {
    const c = this.#liveControls(key, nowMs) ?? { override: undefined, overrideUntil: Infinity, blockUntil: 0 };
    // the override as a store keeps it, and reads it back
    const stored = overrideFromText(overrideBody(override));
    if (stored === undefined) throw new Error(`reference: ${JSON.stringify(override)} is no override`);
    c.override = JSON.parse(JSON.stringify(stored)) as Override;
    c.overrideUntil = ttlMs === 0 ? Infinity : nowMs + ttlMs;
    this.#controls.set(key, c);
  }

  /** `limiter.getOverride(key)` at `nowMs`. */
  getOverride(key: string, nowMs: number): Override | undefined {
    return this.overrideAt(key, nowMs);
  }

  /** `limiter.clearOverride(key)` at `nowMs`. */
  clearOverride(key: string, nowMs: number): void {
    const c = this.#liveControls(key, nowMs);
    if (c === undefined) return;
    c.override = undefined;
    this.#liveControls(key, nowMs);
  }

  /** `limiter.block(key, duration)` at `nowMs`: a manual block until `nowMs + durationMs`, replacing the key's. */
  block(key: string, durationMs: number, nowMs: number): void {
    const c = this.#liveControls(key, nowMs) ?? { override: undefined, overrideUntil: Infinity, blockUntil: 0 };
    c.blockUntil = nowMs + durationMs;
    this.#controls.set(key, c);
  }

  /** `limiter.unblock(key)` at `nowMs`: no manual block, and every policy's penalty box forgotten (its offences too). */
  unblock(key: string, nowMs: number): void {
    const c = this.#liveControls(key, nowMs);
    if (c !== undefined) {
      c.blockUntil = 0;
      this.#liveControls(key, nowMs);
    }
    this.#blocks.delete(key);
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
    this.#sync(key, nowMs);
    // an unlimited override lets everything through uncounted (but a manual block)
    if (this.#unlimited(key, nowMs)) return this.#unlimitedResults(key, nowMs);
    const blocked = this.#blockedResults(key, nowMs, cost);
    if (blocked !== undefined) return blocked;
    const models = this.#of(key);
    const checks = models.map((m) => m.check(nowMs, cost));
    const allowed = checks.every((c) => c.allowed);
    // retry times are searched on the state before the request (a denied request changes nothing)
    const retries = checks.map((c, i) => (c.allowed ? 0 : ReferenceLimiter.retryAfter(models[i]!, nowMs, cost)));
    if (allowed) {
      models.forEach((m) => m.commit(nowMs, cost, lease));
      this.lastCharge = { atMs: nowMs, snapshots: models.map((m) => m.snapshot()), prices: models.map((m) => m.price?.() ?? 0) };
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
    return this.#withOverride(combine(results, nowMs), key, nowMs);
  }

  peek(key: string, nowMs: number): PlainDecision {
    this.#sync(key, nowMs);
    if (this.#unlimited(key, nowMs)) return this.#unlimitedResults(key, nowMs);
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
    return this.#withOverride(combine(results, nowMs), key, nowMs);
  }

  /** Forgets everything of the key: its state, its penalty boxes, its override and its manual block. */
  reset(key: string): void {
    this.#models.delete(key);
    this.#blocks.delete(key);
    this.#controls.delete(key);
    this.#quotas.delete(key);
  }

  /**
   * Gives `cost` units back to every policy for the charge `charge` (what {@link lastCharge} was
   * after its `limit`, and how many units of it were refunded before; `undefined`: the latest
   * charges); answers as `peek`.
   */
  refund(key: string, cost: number, charge: (ReferenceCharge & { refunded: number }) | undefined, nowMs: number): PlainDecision {
    this.#sync(key, nowMs);
    // under an unlimited override nothing is counted, and nothing is given back
    if (this.#unlimited(key, nowMs)) return this.peek(key, nowMs);
    this.#of(key).forEach((m, i) =>
      m.refund(nowMs, cost, charge === undefined ? undefined : { atMs: charge.atMs, snapshot: charge.snapshots[i] as number, refunded: charge.refunded, price: charge.prices?.[i] }),
    );
    return this.peek(key, nowMs);
  }

  /** Frees the slot `lease` holds on every policy that holds leases (idempotent); answers as `peek`. */
  release(key: string, lease: number, nowMs: number): PlainDecision {
    // a lease is freed whatever the override
    this.#sync(key, nowMs);
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
  decision: Pick<Decision, "allowed" | "now" | "limit" | "remaining" | "resetAt" | "retryAfterMs" | "delayMs" | "policy" | "policies" | "override"> & { reason: string },
): PlainDecision {
  const fin = (x: number) => (x === Infinity ? null : x);
  const out: PlainDecision = {
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
  if (decision.override !== undefined) out.override = JSON.parse(JSON.stringify(decision.override)) as Override;
  return out;
}
