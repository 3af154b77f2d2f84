/**
 * Writes `vectors/vectors.json`: hand-picked cases from the design plus seeded random sequences,
 * with the decisions of the reference models. Every case is replayed against `MemoryStore` first;
 * a disagreement aborts without writing. Run: `pnpm --filter @sluice/testing vectors`.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Decision, type Duration, MemoryStore, type Override, RateLimiter } from "@sluice/core";
import { T0 } from "./suite-shared.js";
import { holdsLeases, referenceOf } from "./algorithms/index.js";
import { type PlainDecision, type ReferenceCharge, ReferenceLimiter, plain } from "./reference.js";
import { type PolicySpec, type VectorCase, type VectorStep, isOverrideRead, policyFromSpec, runStep, stepMs } from "./vectors.js";

/** mulberry32: a tiny seeded PRNG, so the vectors do not depend on any library's generator. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ["alice", "user:42", "{tag}:x", "caf\u00e9 \u2603", "k"];

function randomCase(name: string, limits: PolicySpec[], seed: number, length: number, spanMs: number): Omit<VectorCase, "steps"> & { plan: Omit<VectorStep, "expect">[] } {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;
  const concurrent = holdsLeases(limits);
  // the largest cost every policy can admit (a concurrency cap: any, one slot whatever the cost)
  const fits = Math.min(...limits.map((l) => referenceOf(l.kind).maxCost(l.options)));
  const maxCost = fits === Infinity ? 3 : fits;
  let at = T0 + Math.floor(rand() * 5000);
  const plan: Omit<VectorStep, "expect">[] = [];
  for (let i = 0; i < length; i++) {
    const r = rand();
    at += r < 0.4 ? 0 : r < 0.8 ? Math.floor(rand() * (spanMs / 8)) : Math.floor(rand() * spanMs * 1.5);
    const opRoll = rand();
    // with a concurrency cap, releases too (of one of the key's last few limit steps, allowed or not)
    const op = concurrent
      ? opRoll < 0.6 ? "limit" : opRoll < 0.78 ? "release" : opRoll < 0.84 ? "refund" : opRoll < 0.97 ? "peek" : "reset"
      : opRoll < 0.74 ? "limit" : opRoll < 0.84 ? "refund" : opRoll < 0.97 ? "peek" : "reset";
    const costRoll = rand();
    const cost = costRoll < 0.6 ? 1 : costRoll < 0.95 ? 1 + Math.floor(rand() * Math.max(1, Math.ceil(maxCost / 2))) : maxCost + 1;
    const key = pick(KEYS.slice(0, 3));
    if (op === "release") {
      const earlier = plan.map((s, j) => (s.op === "limit" && s.key === key ? j : -1)).filter((j) => j >= 0).slice(-4);
      if (earlier.length === 0) plan.push({ at, op: "peek", key });
      else plan.push({ at, op, key, of: pick(earlier) });
      continue;
    }
    if (op === "refund") {
      // half of the refunds name the latest limit step of the key, the others refund the latest charges
      const earlier = plan.map((s, j) => (s.op === "limit" && s.key === key ? j : -1)).filter((j) => j >= 0);
      const of = earlier.length > 0 && rand() < 0.5 ? earlier[earlier.length - 1] : undefined;
      plan.push(of === undefined ? { at, op, key, cost: Math.min(cost, maxCost) } : { at, op, key, cost: Math.min(cost, maxCost), of });
    } else plan.push(op === "limit" ? { at, op, key, cost } : { at, op, key });
  }
  return { name, limits, plan };
}

function record(c: Omit<VectorCase, "steps"> & { plan: Omit<VectorStep, "expect">[] }): VectorCase {
  const policies = c.limits.map(policyFromSpec);
  const ref = new ReferenceLimiter(policies);
  // what each allowed limit step charged and may still give back, what it gave back so far, and
  // the reference's record of its charge
  const charged = new Map<number, number>();
  const refunded = new Map<number, number>();
  const refCharges = new Map<number, ReferenceCharge>();
  // the reference's lease of limit step i is i + 1 (the stores get the limiter's random ones)
  const allowed = new Set<number>();
  const steps: VectorStep[] = c.plan.map((s, i) => {
    if (s.op === "reset") {
      ref.reset(s.key);
      return s;
    }
    // the override and manual-block commands answer nothing (getOverride: the override)
    if (s.op === "setOverride") {
      ref.setOverride(s.key, s.override as Override, s.ttl === undefined ? 0 : stepMs(s.ttl), s.at);
      return s;
    }
    if (s.op === "clearOverride") {
      ref.clearOverride(s.key, s.at);
      return s;
    }
    if (s.op === "getOverride") return { ...s, expectOverride: ref.getOverride(s.key, s.at) ?? null };
    if (s.op === "block") {
      ref.block(s.key, stepMs(s.duration as Duration), s.at);
      return s;
    }
    if (s.op === "unblock") {
      ref.unblock(s.key, s.at);
      return s;
    }
    if (s.op === "release") {
      const of = s.of as number;
      return { ...s, expect: allowed.has(of) ? ref.release(s.key, of + 1, s.at) : ref.peek(s.key, s.at) };
    }
    if (s.op === "refund") {
      if (s.of === undefined) return { ...s, expect: ref.refund(s.key, s.cost ?? 1, undefined, s.at) };
      const left = charged.get(s.of) ?? 0;
      const units = Math.min(s.cost ?? 1, left);
      charged.set(s.of, left - units);
      const before = refunded.get(s.of) ?? 0;
      refunded.set(s.of, before + units);
      return { ...s, expect: units === 0 ? ref.peek(s.key, s.at) : ref.refund(s.key, units, { ...refCharges.get(s.of)!, refunded: before }, s.at) };
    }
    if (s.op === "peek") return { ...s, expect: ref.peek(s.key, s.at) };
    const expect = ref.limit(s.key, s.cost ?? 1, s.at, i + 1);
    if (expect.allowed) {
      charged.set(i, s.cost ?? 1);
      allowed.add(i);
      refCharges.set(i, ref.lastCharge!);
    }
    return { ...s, expect };
  });
  return { name: c.name, limits: c.limits, steps };
}

/**
 * What in a decision breaks the design's contract outright, whatever the reference says:
 * `remaining` below 0 (the decision's or a policy's).
 */
function contractBreaches(d: ReturnType<typeof plain>): string[] {
  const out: string[] = [];
  if (d.remaining < 0) out.push(`remaining ${d.remaining} < 0`);
  for (const p of d.policies) if (p.remaining < 0) out.push(`${p.policy}'s remaining ${p.remaining} < 0`);
  return out;
}

/**
 * Steps where MemoryStore disagreed with the reference by breaking the contract itself (see
 * {@link contractBreaches}): written as the contract says, and listed when the generator ends. A
 * disagreement where MemoryStore keeps the contract still aborts without writing.
 */
const memoryBreaches: string[] = [];

async function verifyWithMemory(c: VectorCase): Promise<void> {
  let now = 0;
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => now }), limits: c.limits.map(policyFromSpec) });
  const decisions: Decision[] = [];
  for (const [i, s] of c.steps.entries()) {
    now = s.at;
    const decision = await runStep(limiter, s, decisions);
    if (decision === undefined) continue;
    if (isOverrideRead(decision)) {
      if (JSON.stringify(decision.got) !== JSON.stringify(s.expectOverride)) {
        throw new Error(`MemoryStore disagrees with the reference in ${c.name} step ${i} (getOverride):\n got  ${JSON.stringify(decision.got)}\n want ${JSON.stringify(s.expectOverride)}`);
      }
      continue;
    }
    decisions[i] = decision;
    const got = plain(decision);
    if (JSON.stringify(got) !== JSON.stringify(s.expect)) {
      const breaches = contractBreaches(got);
      if (breaches.length > 0 && contractBreaches(s.expect as PlainDecision).length === 0) {
        memoryBreaches.push(`${c.name} step ${i}: ${breaches.join(", ")}`);
        continue;
      }
      throw new Error(`MemoryStore disagrees with the reference in ${c.name} step ${i}:\n got  ${JSON.stringify(got)}\n want ${JSON.stringify(s.expect)}`);
    }
  }
}

const handPicked: (Omit<VectorCase, "steps"> & { plan: Omit<VectorStep, "expect">[] })[] = [
  {
    name: "design: leaky bucket rate 10/s burst 5 queue 3 at t=0",
    limits: [{ kind: "leakyBucket", options: { rate: 10, period: "1s", burst: 5, queue: 3 } }],
    plan: [...Array.from({ length: 9 }, () => ({ at: T0, op: "limit" as const, key: "k", cost: 1 })), { at: T0 + 100, op: "limit", key: "k", cost: 1 }],
  },
  {
    name: "design: token bucket capacity 100 refill 10/s (the seed's TokenBucket(100, 10))",
    limits: [{ kind: "tokenBucket", options: { capacity: 100, refillRate: 10 } }],
    plan: [
      ...Array.from({ length: 101 }, () => ({ at: T0, op: "limit" as const, key: "k", cost: 1 })),
      { at: T0 + 99, op: "limit", key: "k", cost: 1 },
      { at: T0 + 100, op: "limit", key: "k", cost: 1 },
      { at: T0 + 1250, op: "peek", key: "k" },
      { at: T0 + 1250, op: "limit", key: "k", cost: 5 },
      { at: T0 + 1250, op: "limit", key: "k", cost: 101 },
    ],
  },
  {
    name: "penalty box: a login limit that blocks for 15 minutes; refunds and reset",
    limits: [{ kind: "slidingLog", options: { limit: 3, window: "5m", name: "login", block: "15m" } }],
    plan: [
      ...Array.from({ length: 4 }, (_, i) => ({ at: T0 + i * 1000, op: "limit" as const, key: "k", cost: 1 })),
      { at: T0 + 5_000, op: "peek", key: "k" },
      { at: T0 + 6_000, op: "refund", key: "k", cost: 1, of: 0 },
      { at: T0 + 903_000 - 1, op: "limit", key: "k", cost: 1 },
      { at: T0 + 903_000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 904_000, op: "refund", key: "k", cost: 1, of: 7 },
      { at: T0 + 904_000, op: "limit", key: "k", cost: 3 },
      { at: T0 + 905_000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 905_000, op: "reset", key: "k" },
      { at: T0 + 905_000, op: "limit", key: "k", cost: 1 },
    ],
  },
  {
    name: "penalty box: escalating blocks (10 s, 30 s, 90 s, at most 2 min), forgotten after a quiet spell",
    limits: [{ kind: "tokenBucket", options: { capacity: 2, refillRate: 1, interval: "1h", name: "burst", block: { base: "10s", factor: 3, max: "2m" } } }],
    plan: [
      { at: T0, op: "limit", key: "b", cost: 2 },
      { at: T0, op: "limit", key: "b", cost: 1 },
      { at: T0 + 10_000, op: "limit", key: "b", cost: 1 },
      { at: T0 + 40_000, op: "limit", key: "b", cost: 1 },
      { at: T0 + 130_000, op: "limit", key: "b", cost: 1 },
      { at: T0 + 250_000, op: "limit", key: "b", cost: 1 },
      { at: T0 + 370_000 + 120_001, op: "limit", key: "b", cost: 1 },
      { at: T0 + 370_000 + 120_001, op: "limit", key: "b", cost: 3 },
    ],
  },
  {
    name: "window edges: fixed, sliding and log at 1 ms before and on the edge",
    limits: [
      { kind: "fixedWindow", options: { limit: 3, window: "1m", name: "fixed" } },
      { kind: "slidingWindow", options: { limit: 4, window: "1m", name: "sliding" } },
      { kind: "slidingLog", options: { limit: 5, window: "1m", name: "log" } },
    ],
    plan: [
      { at: T0 + 59_000, op: "limit", key: "k", cost: 3 },
      { at: T0 + 59_999, op: "limit", key: "k", cost: 1 },
      { at: T0 + 60_000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 60_000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 90_000, op: "peek", key: "k" },
      { at: T0 + 118_999, op: "limit", key: "k", cost: 2 },
      { at: T0 + 119_000, op: "limit", key: "k", cost: 2 },
      { at: T0 + 120_000, op: "limit", key: "k", cost: 3 },
    ],
  },
];

handPicked.push(
  {
    name: "concurrency: 2 in flight with 5 s leases; one slot whatever the cost; release (idempotent), expiry on the clock, reset",
    limits: [{ kind: "concurrency", options: { limit: 2, lease: "5s", name: "exports" } }],
    plan: [
      { at: T0, op: "limit", key: "k", cost: 1 },
      { at: T0 + 1000, op: "limit", key: "k", cost: 4 },
      { at: T0 + 1000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 1500, op: "peek", key: "k" },
      { at: T0 + 2000, op: "release", key: "k", of: 0 },
      { at: T0 + 2000, op: "release", key: "k", of: 0 },
      { at: T0 + 2000, op: "release", key: "k", of: 2 },
      { at: T0 + 2500, op: "limit", key: "k", cost: 1 },
      { at: T0 + 3000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 5999, op: "limit", key: "k", cost: 1 },
      { at: T0 + 6000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 6000, op: "limit", key: "k", cost: 1 },
      { at: T0 + 7400, op: "limit", key: "k", cost: 1 },
      { at: T0 + 7400, op: "release", key: "k", of: 1 },
      { at: T0 + 7500, op: "limit", key: "k", cost: 1 },
      { at: T0 + 7500, op: "release", key: "other", of: 14 },
      { at: T0 + 7500, op: "reset", key: "k" },
      { at: T0 + 7500, op: "peek", key: "k" },
      { at: T0 + 7600, op: "release", key: "k", of: 14 },
      { at: T0 + 20_000, op: "peek", key: "k" },
    ],
  },
  {
    name: "concurrency with rate limits: all or nothing (a rate denial acquires no lease, a concurrency denial consumes no units)",
    limits: [
      { kind: "fixedWindow", options: { limit: 3, window: "1m", name: "per-minute" } },
      { kind: "concurrency", options: { limit: 1, lease: "30s", name: "one" } },
      { kind: "tokenBucket", options: { capacity: 2, refillRate: 1, interval: "10s", name: "burst" } },
    ],
    plan: [
      { at: T0, op: "limit", key: "k", cost: 1 },
      { at: T0 + 10, op: "limit", key: "k", cost: 1 },
      { at: T0 + 20, op: "release", key: "k", of: 0 },
      { at: T0 + 30, op: "limit", key: "k", cost: 1 },
      { at: T0 + 40, op: "release", key: "k", of: 3 },
      { at: T0 + 50, op: "limit", key: "k", cost: 1 },
      { at: T0 + 60, op: "peek", key: "k" },
      { at: T0 + 30_100, op: "limit", key: "k", cost: 1 },
      { at: T0 + 30_100, op: "refund", key: "k", cost: 1, of: 7 },
      { at: T0 + 30_100, op: "limit", key: "k", cost: 1 },
    ],
  },
);

const random: (Omit<VectorCase, "steps"> & { plan: Omit<VectorStep, "expect">[] })[] = [];
let seed = 20_260_101;
const single: PolicySpec[] = [
  { kind: "fixedWindow", options: { limit: 5, window: "10s" } },
  { kind: "fixedWindow", options: { limit: 1000, window: "1d" } },
  { kind: "slidingWindow", options: { limit: 6, window: "10s" } },
  { kind: "slidingWindow", options: { limit: 30, window: "1m" } },
  { kind: "slidingLog", options: { limit: 5, window: "10s" } },
  { kind: "slidingLog", options: { limit: 7, window: 1500 } },
  { kind: "tokenBucket", options: { capacity: 5, refillRate: 2 } },
  { kind: "tokenBucket", options: { capacity: 10, refillRate: 30, interval: "1m" } },
  { kind: "tokenBucket", options: { capacity: 3, refillRate: 7, interval: 1000 } },
  { kind: "leakyBucket", options: { rate: 5, period: "1s", burst: 3 } },
  { kind: "leakyBucket", options: { rate: 3, period: "1s", burst: 2, queue: 4 } },
];
for (const spec of single) {
  random.push(randomCase(`random ${spec.kind} ${JSON.stringify(spec.options)}`, [spec], seed++, 80, referenceOf(spec.kind).vectorSpanMs(spec.options)));
}
const tiers: PolicySpec[][] = [
  [
    { kind: "slidingWindow", options: { limit: 30, window: "1m", name: "per-minute" } },
    { kind: "fixedWindow", options: { limit: 1000, window: "1d", name: "per-day" } },
    { kind: "tokenBucket", options: { capacity: 10, refillRate: 30, interval: "1m", name: "burst" } },
  ],
  [
    { kind: "tokenBucket", options: { capacity: 4, refillRate: 2, name: "burst" } },
    { kind: "slidingLog", options: { limit: 6, window: "5s", name: "log" } },
  ],
  [
    { kind: "leakyBucket", options: { rate: 4, period: "1s", burst: 3, queue: 2, name: "shaper" } },
    { kind: "fixedWindow", options: { limit: 9, window: "3s", name: "fixed" } },
    { kind: "slidingWindow", options: { limit: 7, window: "2s", name: "sliding" } },
  ],
];
for (const [i, limits] of tiers.entries()) random.push(randomCase(`random several limits #${i + 1}`, limits, seed++, 120, 4000));
const blocking: PolicySpec[][] = [
  [{ kind: "fixedWindow", options: { limit: 3, window: "2s", block: "5s" } }],
  [{ kind: "slidingLog", options: { limit: 4, window: "3s", block: { base: "1s", factor: 2, max: "8s" } } }],
  [
    { kind: "tokenBucket", options: { capacity: 3, refillRate: 2, name: "burst", block: { base: 500, factor: 3, max: "5s" } } },
    { kind: "slidingWindow", options: { limit: 8, window: "4s", name: "sliding" } },
  ],
];
for (const [i, limits] of blocking.entries()) random.push(randomCase(`random with a penalty box #${i + 1}`, limits, seed++, 120, 4000));
const inFlight: PolicySpec[][] = [
  [{ kind: "concurrency", options: { limit: 3, lease: "2s" } }],
  [
    { kind: "concurrency", options: { limit: 2, lease: 1500, name: "in-flight" } },
    { kind: "slidingWindow", options: { limit: 6, window: "3s", name: "sliding" } },
  ],
  [
    { kind: "tokenBucket", options: { capacity: 4, refillRate: 2, name: "burst", block: { base: 500, factor: 2, max: "4s" } } },
    { kind: "concurrency", options: { limit: 2, lease: "3s", name: "exports" } },
    { kind: "slidingLog", options: { limit: 5, window: "2s", name: "log" } },
  ],
];
for (const [i, limits] of inFlight.entries()) random.push(randomCase(`random with a concurrency cap #${i + 1}`, limits, seed++, 120, 4000));

// per-key overrides and manual blocks (limiter.setOverride, limiter.block): hand-picked cases with
// the contract's numbers, then seeded random sequences that set, change, clear and outlive
// overrides and blocks between requests. Appended, so the cases above stay as they were.
type Plan = Omit<VectorCase, "steps"> & { plan: Omit<VectorStep, "expect">[] };
const lim = (ms: number, key = "k", cost = 1) => ({ at: T0 + ms, op: "limit" as const, key, cost });
const times = (n: number, ms: number, key = "k", cost = 1) => Array.from({ length: n }, () => lim(ms, key, cost));
const overrideCases: Plan[] = [
  {
    name: "overrides: { scale: 2.5 } on a token bucket (capacity 4, 2 per second): 10 tokens, one every 200 ms (T' = ceil(500000 × 4 / 10) µs)",
    limits: [{ kind: "tokenBucket", options: { capacity: 4, refillRate: 2, name: "burst" } }],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 2.5 } },
      { at: T0, op: "getOverride", key: "k" },
      ...times(11, 0),
      lim(199),
      lim(200),
      { at: T0 + 1000, op: "peek", key: "k" },
      lim(1000, "k", 11),
      lim(1000, "other"),
    ],
  },
  {
    name: "overrides: { quotas } on a token bucket whose new rate rounds up: capacity 3, 1 per second, quota 7 (T' = ceil(3e6 / 7) = 428572 µs)",
    limits: [{ kind: "tokenBucket", options: { capacity: 3, refillRate: 1, name: "burst" } }],
    plan: [{ at: T0, op: "setOverride", key: "k", override: { quotas: { burst: 7 } } }, ...times(8, 0), lim(428), lim(429), lim(429), { at: T0 + 3000, op: "peek", key: "k" }],
  },
  {
    name: "overrides: { scale: 2 } on a leaky bucket (10 per second, burst 5, queue 3): burst 10, queue 6, a drop every 50 ms",
    limits: [{ kind: "leakyBucket", options: { rate: 10, period: "1s", burst: 5, queue: 3, name: "shaper" } }],
    plan: [{ at: T0, op: "setOverride", key: "k", override: { scale: 2 } }, ...times(17, 0), lim(49), lim(50), lim(50, "k", 17)],
  },
  {
    name: "overrides: { scale: 1.5 } on a fixed window, a sliding window and a sliding log: each limit times 1.5, rounded down; the windows keep their length",
    limits: [
      { kind: "fixedWindow", options: { limit: 3, window: "1m", name: "fixed" } },
      { kind: "slidingWindow", options: { limit: 5, window: "1m", name: "sliding" } },
      { kind: "slidingLog", options: { limit: 7, window: "1m", name: "log" } },
    ],
    plan: [
      { at: T0 + 59_000, op: "setOverride", key: "k", override: { scale: 1.5 } },
      lim(59_000, "k", 4),
      lim(59_000),
      lim(59_999),
      lim(60_000, "k", 3),
      lim(60_000),
      { at: T0 + 90_000, op: "peek", key: "k" },
      lim(119_000, "k", 2),
      lim(120_000, "k", 4),
    ],
  },
  {
    name: "overrides: { quotas } names some policies of a tier; the others keep theirs; a second key keeps the base quotas",
    limits: [
      { kind: "tokenBucket", options: { capacity: 3, refillRate: 1, interval: "2s", name: "burst" } },
      { kind: "slidingWindow", options: { limit: 5, window: "1m", name: "per-minute" } },
      { kind: "fixedWindow", options: { limit: 100, window: "1d", name: "per-day" } },
    ],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { quotas: { "per-minute": 12, burst: 6 } } },
      { at: T0, op: "getOverride", key: "k" },
      ...times(7, 30_000),
      lim(30_999),
      lim(31_000),
      ...times(4, 30_000, "other"),
      { at: T0 + 40_000, op: "peek", key: "k" },
      { at: T0 + 40_000, op: "peek", key: "other" },
    ],
  },
  {
    name: "overrides: { scale } on a concurrency cap: twice the slots; a release frees one whatever the override",
    limits: [{ kind: "concurrency", options: { limit: 2, lease: "5s", name: "exports" } }],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 2 } },
      ...times(5, 0),
      { at: T0 + 100, op: "release", key: "k", of: 1 },
      lim(100),
      { at: T0 + 200, op: "clearOverride", key: "k" },
      lim(200),
      { at: T0 + 200, op: "peek", key: "k" },
    ],
  },
  {
    name: "overrides: { unlimited: true } admits without counting (no lease, no penalty box, refunds give nothing); cleared, the quota is whole",
    limits: [
      { kind: "fixedWindow", options: { limit: 2, window: "1m", name: "per-minute", block: "10m" } },
      { kind: "tokenBucket", options: { capacity: 3, refillRate: 1, interval: "10s", name: "burst" } },
      { kind: "concurrency", options: { limit: 1, lease: "30s", name: "one" } },
    ],
    plan: [
      lim(0),
      lim(0),
      lim(0),
      { at: T0 + 1000, op: "setOverride", key: "k", override: { unlimited: true } },
      ...times(5, 1000, "k", 2),
      { at: T0 + 1000, op: "refund", key: "k", cost: 1 },
      { at: T0 + 1000, op: "peek", key: "k" },
      { at: T0 + 2000, op: "clearOverride", key: "k" },
      { at: T0 + 2000, op: "getOverride", key: "k" },
      lim(2000),
      { at: T0 + 2000, op: "release", key: "k", of: 0 },
      { at: T0 + 2000, op: "unblock", key: "k" },
      { at: T0 + 60_000, op: "peek", key: "k" },
      lim(60_000, "k", 2),
    ],
  },
  {
    name: "overrides: a ttl ends at the exact millisecond (applied at its end − 1, not at its end); the counts left behind are judged by the base quota",
    limits: [
      { kind: "fixedWindow", options: { limit: 3, window: "1m", name: "fixed" } },
      { kind: "slidingLog", options: { limit: 4, window: "1m", name: "log" } },
    ],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 2 }, ttl: "30s" },
      ...times(7, 0),
      { at: T0 + 29_999, op: "getOverride", key: "k" },
      lim(29_999),
      { at: T0 + 30_000, op: "getOverride", key: "k" },
      lim(30_000),
      { at: T0 + 30_000, op: "peek", key: "k" },
      lim(60_000),
      lim(60_000),
      { at: T0 + 60_000, op: "setOverride", key: "k", override: { scale: 2 }, ttl: 1000 },
      lim(60_000, "k", 3),
      lim(60_999),
      lim(61_000),
    ],
  },
  {
    name: "overrides: a bucket left deeper than its own quota when the override ends: tokenBucket capacity 2, 1 per second, { scale: 3 } for 1 s",
    limits: [{ kind: "tokenBucket", options: { capacity: 2, refillRate: 1, name: "burst" } }],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 3 }, ttl: "1s" },
      ...times(7, 0),
      lim(999),
      lim(1000),
      lim(1001),
      lim(1001),
      { at: T0 + 2001, op: "peek", key: "k" },
      { at: T0 + 2001, op: "setOverride", key: "k", override: { scale: 3 } },
      { at: T0 + 2001, op: "peek", key: "k" },
      ...times(4, 2001),
    ],
  },
  {
    name: "overrides: clear, and a new override replaces the old; getOverride reads each",
    limits: [{ kind: "slidingWindow", options: { limit: 4, window: "10s", name: "sliding" } }],
    plan: [
      { at: T0, op: "getOverride", key: "k" },
      { at: T0, op: "setOverride", key: "k", override: { scale: 2 } },
      ...times(5, 0),
      { at: T0 + 10, op: "setOverride", key: "k", override: { quotas: { sliding: 6 } }, ttl: "1h" },
      { at: T0 + 10, op: "getOverride", key: "k" },
      ...times(2, 10),
      { at: T0 + 20, op: "clearOverride", key: "k" },
      { at: T0 + 20, op: "getOverride", key: "k" },
      lim(20),
      { at: T0 + 20, op: "clearOverride", key: "k" },
      lim(10_000),
      lim(17_500),
      lim(20_000, "k", 4),
    ],
  },
  {
    name: "manual block: every request denied (blocked) with retryAfterMs to its end, nothing counted; at its end served; a later own retry wins",
    limits: [
      { kind: "fixedWindow", options: { limit: 3, window: "1m", name: "fixed" } },
      { kind: "tokenBucket", options: { capacity: 2, refillRate: 1, interval: "1h", name: "hourly" } },
    ],
    plan: [
      lim(0),
      { at: T0 + 1000, op: "block", key: "k", duration: "5s" },
      lim(1000),
      lim(1000, "k", 3),
      { at: T0 + 2000, op: "peek", key: "k" },
      lim(5999),
      lim(6000),
      { at: T0 + 6000, op: "block", key: "k", duration: 2000 },
      lim(6000),
      { at: T0 + 6500, op: "block", key: "k", duration: 500 },
      lim(6500),
      lim(7000),
      { at: T0 + 7000, op: "unblock", key: "k" },
      lim(7000),
    ],
  },
  {
    name: "manual block: unblock lifts it and the penalty boxes too; a block beats an unlimited override; reset forgets both",
    limits: [{ kind: "fixedWindow", options: { limit: 2, window: "1s", name: "login", block: "1m" } }],
    plan: [
      ...times(3, 0),
      lim(1000),
      { at: T0 + 1000, op: "unblock", key: "k" },
      lim(1000),
      { at: T0 + 1000, op: "setOverride", key: "k", override: { unlimited: true } },
      { at: T0 + 1000, op: "block", key: "k", duration: "2s" },
      lim(1000),
      { at: T0 + 1000, op: "peek", key: "k" },
      lim(3000),
      { at: T0 + 3000, op: "block", key: "k", duration: "1h" },
      { at: T0 + 3000, op: "reset", key: "k" },
      { at: T0 + 3000, op: "getOverride", key: "k" },
      ...times(3, 3000),
    ],
  },
  {
    name: "manual block on a key whose override scales it: each policy's own answer under the effective quota, marked blocked",
    limits: [
      { kind: "slidingLog", options: { limit: 2, window: "10s", name: "log" } },
      { kind: "leakyBucket", options: { rate: 1, period: "1s", burst: 2, name: "drip" } },
    ],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 2 } },
      ...times(4, 0),
      { at: T0 + 100, op: "block", key: "k", duration: "1s" },
      lim(100),
      lim(100, "k", 5),
      { at: T0 + 100, op: "refund", key: "k", cost: 1, of: 1 },
      lim(1100),
      lim(1100),
    ],
  },
];

/** The largest cost any of `limits` admits (a concurrency cap: any), for the random plans. */
function fitsOf(limits: PolicySpec[]): number {
  const fits = Math.min(...limits.map((l) => referenceOf(l.kind).maxCost(l.options)));
  return fits === Infinity ? 3 : fits;
}

/**
 * A seeded random plan with override and manual-block commands between the requests: overrides
 * (a scale, one policy's quota, unlimited; with a ttl or without) set, replaced, cleared and
 * outlived; blocks set and lifted; reads of the override. Refunds give back the latest charges
 * (a refund of one decision across a change of quota is left to the property tests).
 */
function randomOverrideCase(name: string, limits: PolicySpec[], seed: number, length: number, spanMs: number): Plan {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;
  const policies = limits.map(policyFromSpec);
  const concurrent = holdsLeases(limits);
  const maxCost = fitsOf(limits);
  // never fewer slots than a concurrency cap's own: with more leases held than a lowered quota
  // allows, core's retry hint is the earliest lease expiry, before a slot is free, where the
  // reference says when one is (a hint either way: the conformance suite tests it apart)
  const lowers = !concurrent;
  const scales = [0.5, 1.5, 2, 3, 10].filter((scale) => (lowers || scale >= 1) && policies.every((p) => Math.floor(p.limit * scale) >= 1));
  const anOverride = (): Override => {
    const roll = rand();
    if (roll < 0.45) return { scale: pick(scales) };
    if (roll < 0.85) {
      const p = pick(policies);
      const least = lowers || !referenceOf(p.kind).leases ? 1 : p.limit;
      return { quotas: { [p.name]: least + Math.floor(rand() * (2 * p.limit + 3 - least)) } };
    }
    return { unlimited: true };
  };
  const span = (k: number) => Math.max(1, Math.floor((spanMs * k) / 4));
  let at = T0 + Math.floor(rand() * 5000);
  const plan: Omit<VectorStep, "expect">[] = [];
  for (let i = 0; i < length; i++) {
    const r = rand();
    at += r < 0.4 ? 0 : r < 0.8 ? Math.floor(rand() * (spanMs / 8)) : Math.floor(rand() * spanMs * 1.5);
    const key = pick(KEYS.slice(0, 2));
    const roll = rand();
    if (roll < 0.1) {
      const ttl = rand() < 0.5 ? undefined : pick([span(1), span(4), 1000]);
      plan.push(ttl === undefined ? { at, op: "setOverride", key, override: anOverride() } : { at, op: "setOverride", key, override: anOverride(), ttl });
    } else if (roll < 0.14) plan.push({ at, op: "clearOverride", key });
    else if (roll < 0.19) plan.push({ at, op: "getOverride", key });
    else if (roll < 0.23) plan.push({ at, op: "block", key, duration: pick([200, 1000, span(2)]) });
    else if (roll < 0.27) plan.push({ at, op: "unblock", key });
    else if (roll < 0.29) plan.push({ at, op: "reset", key });
    else if (roll < 0.39) plan.push({ at, op: "peek", key });
    else if (roll < 0.44) plan.push({ at, op: "refund", key, cost: 1 + Math.floor(rand() * maxCost) });
    else if (concurrent && roll < 0.56) {
      const earlier = plan.map((s, j) => (s.op === "limit" && s.key === key ? j : -1)).filter((j) => j >= 0).slice(-4);
      plan.push(earlier.length === 0 ? { at, op: "peek", key } : { at, op: "release", key, of: pick(earlier) });
    } else {
      const costRoll = rand();
      plan.push({ at, op: "limit", key, cost: costRoll < 0.6 ? 1 : costRoll < 0.95 ? 1 + Math.floor(rand() * Math.max(1, Math.ceil(maxCost / 2))) : maxCost + 1 });
    }
  }
  return { name, limits, plan };
}

const overrideSets: PolicySpec[][] = [
  [{ kind: "fixedWindow", options: { limit: 5, window: "10s" } }],
  [{ kind: "slidingWindow", options: { limit: 6, window: "10s" } }],
  [{ kind: "slidingLog", options: { limit: 5, window: "10s" } }],
  [{ kind: "tokenBucket", options: { capacity: 5, refillRate: 2 } }],
  [{ kind: "tokenBucket", options: { capacity: 3, refillRate: 7, interval: 1000 } }],
  [{ kind: "leakyBucket", options: { rate: 3, period: "1s", burst: 2, queue: 4 } }],
  [{ kind: "concurrency", options: { limit: 3, lease: "2s" } }],
  [
    { kind: "slidingWindow", options: { limit: 30, window: "1m", name: "per-minute" } },
    { kind: "fixedWindow", options: { limit: 1000, window: "1d", name: "per-day" } },
    { kind: "tokenBucket", options: { capacity: 10, refillRate: 30, interval: "1m", name: "burst" } },
  ],
  [
    { kind: "fixedWindow", options: { limit: 3, window: "2s", name: "fixed", block: "5s" } },
    { kind: "leakyBucket", options: { rate: 4, period: "1s", burst: 3, queue: 2, name: "shaper" } },
  ],
  [
    { kind: "tokenBucket", options: { capacity: 4, refillRate: 2, name: "burst", block: { base: 500, factor: 2, max: "4s" } } },
    { kind: "concurrency", options: { limit: 2, lease: "3s", name: "exports" } },
    { kind: "slidingLog", options: { limit: 5, window: "2s", name: "log" } },
  ],
];
for (const [i, limits] of overrideSets.entries()) {
  const spanMs = limits.length === 1 ? referenceOf(limits[0]!.kind).vectorSpanMs(limits[0]!.options) : 4000;
  overrideCases.push(randomOverrideCase(`random with overrides and manual blocks #${i + 1}: ${limits.map((l) => l.kind).join(", ")}`, limits, seed++, 100, spanMs));
}

// edges found later, appended so that every case above stays as it was
const edgeCases: Plan[] = [
  {
    name: "penalty box: a denial exactly max after the block ended is still a repeat (the box is kept until then); 1 ms later it is a first offence",
    limits: [{ kind: "fixedWindow", options: { limit: 1, window: "1h", name: "login", block: { base: 500, factor: 2, max: 1000 } } }],
    plan: [
      lim(0),
      // blocked until T0 + 500
      lim(0),
      // 1000 ms after that block ended: escalated, blocked 1000 ms, until T0 + 2500
      lim(1500),
      // 1001 ms after: a first offence, 500 ms
      lim(3501),
      lim(0, "j"),
      lim(0, "j"),
      lim(1501, "j"),
    ],
  },
  {
    name: "refunds at the charge's price: 100 requests under scale 10, the override cleared, the last 10 refunded with their decisions: 1 more passes (as had they never been made), not 10",
    limits: [{ kind: "tokenBucket", options: { capacity: 10, refillRate: 1, name: "burst" } }],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 10 } },
      ...times(100, 0),
      { at: T0, op: "clearOverride", key: "k" },
      ...Array.from({ length: 10 }, (_, i) => ({ at: T0, op: "refund" as const, key: "k", cost: 1, of: 91 + i })),
      lim(0),
      lim(0),
      lim(1000),
      lim(1000),
    ],
  },
  {
    name: "refunds at the charge's price: a leaky bucket charged under scale 10 and refunded after clearOverride gives back each unit's own drip",
    limits: [{ kind: "leakyBucket", options: { rate: 1, period: "1s", burst: 10, name: "drip" } }],
    plan: [
      { at: T0, op: "setOverride", key: "k", override: { scale: 10 } },
      ...times(100, 0),
      { at: T0, op: "clearOverride", key: "k" },
      ...Array.from({ length: 10 }, (_, i) => ({ at: T0, op: "refund" as const, key: "k", cost: 1, of: 91 + i })),
      lim(0),
      lim(0),
    ],
  },
  {
    name: "refunds at the charge's price: charged at the bucket's own rate, refunded under scale 10, a unit gives back its own emission interval (ten of the scaled ones)",
    limits: [{ kind: "tokenBucket", options: { capacity: 10, refillRate: 1, name: "burst" } }],
    plan: [
      ...times(10, 0),
      { at: T0, op: "setOverride", key: "k", override: { scale: 10 } },
      lim(0),
      { at: T0, op: "refund", key: "k", cost: 1, of: 9 },
      ...times(11, 0),
    ],
  },
];

const cases = [...handPicked, ...random, ...overrideCases, ...edgeCases].map(record);
for (const c of cases) await verifyWithMemory(c);
const out = fileURLToPath(new URL("../vectors/vectors.json", import.meta.url));
// one line per step keeps the file readable in diffs and small
const body = cases
  .map((c) => `  {"name": ${JSON.stringify(c.name)}, "limits": ${JSON.stringify(c.limits)}, "steps": [\n${c.steps.map((s) => `    ${JSON.stringify(s)}`).join(",\n")}\n  ]}`)
  .join(",\n");
const note = "Generated by packages/testing/src/generate-vectors.ts from the reference models (cross-checked with MemoryStore); retryAfterMs null means Infinity.";
writeFileSync(out, `{"version": 1, "note": ${JSON.stringify(note)}, "cases": [\n${body}\n]}\n`);
console.log(`wrote ${cases.length} cases, ${cases.reduce((n, c) => n + c.steps.length, 0)} steps to ${out}`);
if (memoryBreaches.length > 0) {
  console.warn(`MemoryStore breaks the contract in ${memoryBreaches.length} steps (written as the contract says; its conformance run fails there):\n  ${memoryBreaches.join("\n  ")}`);
}
