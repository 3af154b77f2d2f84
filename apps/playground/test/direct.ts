/**
 * The reference the playground is checked against: the core's RateLimiter run directly over a
 * trace, written here independently of the playground's simulation module.
 */
import { MemoryStore, type Policy, RateLimiter, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";

/** Epoch ms of trace time 0 (a midnight UTC, so minute windows start at trace times 0, 60000, …). */
export const EPOCH_MS = Date.UTC(2026, 0, 1);

/** The seed article's case: 100 requests in the second before the minute boundary, 100 in the second after. */
export function windowEdgeTrace(): { timeMs: number; cost: number }[] {
  const trace: { timeMs: number; cost: number }[] = [];
  for (let i = 0; i < 100; i++) trace.push({ timeMs: 59_000 + 10 * i, cost: 1 });
  for (let i = 0; i < 100; i++) trace.push({ timeMs: 60_000 + 10 * i, cost: 1 });
  return trace;
}

/** The window-edge preset's policies, as a user would write them: "100 per minute" for each algorithm. */
export function windowEdgePolicies(overrides: { fixedWindowLimit?: number; slidingWindowLimit?: number } = {}): Record<string, Policy> {
  return {
    fixedWindow: fixedWindow({ limit: overrides.fixedWindowLimit ?? 100, window: "1m" }),
    slidingWindow: slidingWindow({ limit: overrides.slidingWindowLimit ?? 100, window: "1m" }),
    slidingLog: slidingLog({ limit: 100, window: "1m" }),
    tokenBucket: tokenBucket({ capacity: 100, refillRate: 100, interval: "1m" }),
    leakyBucket: leakyBucket({ rate: 100, period: "1m", burst: 10, queue: 10 }),
  };
}

/** One direct decision, reduced to what the playground shows. */
export interface DirectOutcome {
  allowed: boolean;
  delayMs: number;
  remaining: number;
  retryAfterMs: number;
}

/** Runs `limits` over `trace` with a fresh MemoryStore on a simulated clock; returns every decision and the totals. */
export async function directRun(limits: Policy | Policy[], trace: readonly { timeMs: number; cost: number }[]) {
  let now = EPOCH_MS;
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => now }), limits });
  const outcomes: DirectOutcome[] = [];
  for (const { timeMs, cost } of trace) {
    now = EPOCH_MS + timeMs;
    const d = await limiter.limit("user", { cost });
    outcomes.push({ allowed: d.allowed, delayMs: d.delayMs, remaining: d.remaining, retryAfterMs: d.retryAfterMs });
  }
  const allowed = outcomes.filter((o) => o.allowed).length;
  return { outcomes, allowed, denied: outcomes.length - allowed, delayed: outcomes.filter((o) => o.delayMs > 0).length };
}
