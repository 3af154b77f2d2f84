/**
 * The concurrency cap, as the test kit knows it: a list of the leases held, the bound "at most
 * `limit` leases held at once", and its random options.
 *
 * @module
 */
import { type Policy, concurrency } from "@sluice/core";
import fc from "fast-check";
import { type Admission, type Model, type PolicyOf, type ReferenceAlgorithm, assertRetarget } from "./definition.js";

/** The options of a concurrency cap's spec (it takes no penalty box). */
export interface ConcurrencySpecOptions {
  limit: number;
  lease?: number | string;
  name?: string;
}

/** A denied concurrency request is told to come back when the earliest lease expires, but within a second: a release may come any time. */
const CONCURRENCY_RETRY_MS = 1000;

/**
 * Concurrency cap: a list of the leases held, each with the time it expires unless released. A
 * request takes one slot whatever its cost; an expired lease holds nothing.
 */
class ConcurrencyModel implements Model {
  leases: { expires: number; id: number }[] = [];
  readonly maxCost = Infinity;
  readonly retryCapMs = CONCURRENCY_RETRY_MS;
  policy: PolicyOf<"concurrency">;
  constructor(readonly base: PolicyOf<"concurrency">) {
    this.policy = base;
  }
  /** Another number of slots: the leases held stay held. */
  retarget(policy: Policy) {
    assertRetarget(this.base, policy, ["leaseMs"]);
    this.policy = policy as PolicyOf<"concurrency">;
  }
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
  /**
   * A slot may free when enough leases have expired for one to be under the limit (the earliest,
   * unless more are held than the limit: taken under a larger quota), or any time before through a
   * release: at most a second away.
   */
  refillAt(nowMs: number) {
    const live = this.live(nowMs);
    if (live.length === 0) return nowMs;
    const expiries = live.map((l) => l.expires).sort((a, b) => a - b);
    const frees = expiries[Math.max(0, live.length - this.policy.limit)]!;
    return nowMs + Math.min(CONCURRENCY_RETRY_MS, frees - nowMs);
  }
}

function concurrencyBound(policy: PolicyOf<"concurrency">, mine: readonly Admission[], nowMs: number): string | undefined {
  const held = mine.filter((a) => !a.released && a.decision.lease !== undefined && a.atMs + policy.leaseMs > nowMs).length;
  return held > policy.limit ? `concurrency ${policy.name}: ${held} leases held at ${nowMs} (limit ${policy.limit})` : undefined;
}

export const concurrencyReference: ReferenceAlgorithm<"concurrency", ConcurrencySpecOptions> = {
  kind: "concurrency",
  leases: true,
  create: (options) => concurrency(options as Parameters<typeof concurrency>[0]),
  model: (policy) => new ConcurrencyModel(policy),
  violatedBound: concurrencyBound,
  timeScalesMs: (policy) => [policy.leaseMs, Math.ceil(policy.leaseMs / 2)],
  arbitrary: { options: fc.record({ limit: fc.integer({ min: 1, max: 4 }), lease: fc.constantFrom(200, 1000, 2500) }), weight: 9 },
  // a lease is released when the response is done: the agreement runs send requests, not responses
  agreementArbitrary: null,
  // one slot whatever the cost
  maxCost: () => Infinity,
  vectorSpanMs: () => 4000,
};
