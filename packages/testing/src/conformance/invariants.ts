/**
 * The guarantees a user relies on, tested directly on a store — not through the reference models,
 * which could share a mistake with the stores:
 *
 * - **Admission bounds**: for any sequence of `limit`, `refund` (with the current decision, a
 *   stale one, the same one twice, one made for another key or by another limiter), `release`,
 *   penalty boxes and clock moves, the net admissions (each request's cost less the units refunded
 *   *for it*) stay within each algorithm's bound: a fixed window (and the current window of a
 *   sliding window) at most `limit` per window; a sliding log at most `limit` in every span of
 *   `window`; a bucket at most `burst + queue` plus one unit per emission interval in any span; a
 *   concurrency cap at most `limit` leases held at once.
 * - **An obedient client**: one that, when denied, comes back exactly `retryAfterMs` later with the
 *   same request is served then — never denied twice for one wait, never escalated by a penalty box.
 * - **Headers agree with the body**: on every 429, each policy in the body's `violated-policies`
 *   appears in `RateLimit-Policy`, and in `RateLimit` with `r=0`, and `Retry-After` is at least its
 *   `t`.
 *
 * @module
 */
import { type Decision, type Override, type Policy, type RateLimiter, SluiceInputError, limitedResponse, setRateLimitHeaders } from "@sluice/core";
import { effectivePolicies } from "@sluice/core/store";
import fc from "fast-check";
import { expect, it } from "vitest";
import { type Admission, referenceOf } from "../algorithms/index.js";
import { overrideBody } from "../reference.js";
import { type PolicySpec, policyFromSpec, policySpecArbitrary } from "../vectors.js";
import type { SuiteContext } from "./context.js";
import { namedPolicies } from "./helpers.js";

/**
 * Checks every policy's bound for the spans that end at `nowMs` (the time of an admission): a
 * violating span always ends at one, so checking there after each admission is enough.
 * Returns a description of the first violation, or `undefined`.
 */
export function violatedBound(policies: readonly Policy[], admissions: readonly Admission[], key: string, nowMs: number): string | undefined {
  const mine = admissions.filter((a) => a.key === key);
  for (const policy of policies) {
    const broken = referenceOf(policy.kind).violatedBound(policy, mine, nowMs);
    if (broken !== undefined) return broken;
  }
  return undefined;
}

/**
 * On a 429: each violated policy appears in `RateLimit-Policy` and in `RateLimit` with `r=0`, and
 * `Retry-After` (when there is one) is at least its `t`. Returns a description of the first
 * disagreement, or `undefined`.
 */
export async function headersDisagree(decision: Decision, policies: readonly Policy[]): Promise<string | undefined> {
  const headers = new Headers();
  setRateLimitHeaders(headers, decision, ["ietf", "legacy"], policies);
  const response = limitedResponse(decision, headers);
  const body = (await response.json()) as { "violated-policies": string[]; retryAfter: number | null };
  const policyHeader = response.headers.get("RateLimit-Policy") ?? "";
  const rateLimit = response.headers.get("RateLimit") ?? "";
  const retryAfter = response.headers.get("Retry-After");
  if (body.retryAfter === null ? retryAfter !== null : retryAfter !== String(body.retryAfter)) {
    return `Retry-After ${retryAfter} but the body's retryAfter is ${body.retryAfter}`;
  }
  if (body["violated-policies"].length === 0) return "a 429 without a violated policy";
  for (const name of body["violated-policies"]) {
    if (!policyHeader.split(", ").some((m) => m.startsWith(`"${name}";`))) return `${name} is violated but not in RateLimit-Policy: ${policyHeader}`;
    const member = rateLimit.split(", ").find((m) => m.startsWith(`"${name}";`));
    const match = member === undefined ? null : /;r=(\d+);t=(\d+)/.exec(member);
    if (match === null) return `${name} is violated but not in RateLimit: ${rateLimit}`;
    if (match[1] !== "0") return `${name} is violated but RateLimit says r=${match[1]}: ${rateLimit}`;
    if (retryAfter !== null && Number(retryAfter) < Number(match[2])) return `Retry-After ${retryAfter} is earlier than ${name}'s t=${match[2]}`;
  }
  return undefined;
}

/** Spans (ms) on which a policy's state changes: its window and half of it, a unit's refill, a full refill, a lease. */
function timeScalesMs(policy: Policy): number[] {
  return referenceOf(policy.kind).timeScalesMs(policy);
}

/** Rate policies for the invariants (one, most of the time: a tight one binds), now and then with a concurrency cap or a penalty box. */
const policiesArbitrary = fc.oneof(
  { arbitrary: fc.array(policySpecArbitrary(), { minLength: 1, maxLength: 1 }), weight: 3 },
  { arbitrary: fc.array(policySpecArbitrary(), { minLength: 2, maxLength: 3 }), weight: 1 },
);

/** Registers the invariant tests (call inside a store's `describe`). */
export function testInvariants(suite: SuiteContext): void {
  it("admission bounds hold for any sequence of limits, refunds (current, stale, duplicate, foreign), releases, blocks and clock moves; every 429's headers agree with its body", async () => {
    // episodes rather than single calls, so that the interleavings that matter come up: a burst,
    // a wait on one of the policies' own time scales (a unit's refill, half a window, a window, a
    // full refill), a burst that drains a policy at one instant, refunds of earlier admissions (the
    // current one, a stale one, one refunded already) and of decisions made for another key or by
    // another limiter, releases, then another burst at the same instant
    const scenario = policiesArbitrary.chain((specs) => {
      const scales = specs.flatMap((spec) => timeScalesMs(policyFromSpec(spec)));
      const dt = fc.oneof(fc.constant(0), fc.constantFrom(...scales), fc.integer({ min: 1, max: 60 }), fc.integer({ min: 0, max: 6000 }));
      const burst = fc.record({ n: fc.integer({ min: 0, max: 7 }), cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })) });
      const aside = fc.record({
        kind: fc.constantFrom("refund" as const, "refund" as const, "refund" as const, "foreign-key" as const, "foreign-limiter" as const, "release" as const),
        pick: fc.nat(),
        partial: fc.boolean(),
      });
      const episode = fc.record({
        key: fc.constantFrom("a", "a", "a", "b"),
        first: burst,
        wait: dt,
        drain: burst,
        asides: fc.array(aside, { maxLength: 3 }),
        last: burst,
      });
      return fc.tuple(fc.constant(specs), fc.array(episode, { minLength: 1, maxLength: 5 }));
    });
    await fc.assert(
      fc.asyncProperty(scenario, async ([specs, episodes]) => {
        const policies = namedPolicies(specs);
        const l = suite.limiter(policies);
        // a limiter of another namespace (another prefix, and a tokenBucket of its own) on the same store
        const other = suite.limiter([policyFromSpec({ kind: "tokenBucket", options: { capacity: 3, refillRate: 1, name: "p0" } })]);
        const admissions: Admission[] = [];
        const foreignDecisions: Decision[] = [];
        let t = suite.t0 + 17;
        suite.setNow(t);
        const limit = async (key: string, n: number, cost: number) => {
          for (let i = 0; i < n; i++) {
            const decision = await l.limit(key, { cost });
            if (decision.allowed) {
              admissions.push({ key, atMs: decision.now, cost, refunded: 0, decision, released: false });
              const broken = violatedBound(policies, admissions, key, decision.now);
              if (broken !== undefined) throw new Error(`over-admission: ${broken}`);
            } else {
              const disagreement = await headersDisagree(decision, policies);
              if (disagreement !== undefined) throw new Error(`a 429 whose headers disagree with its body: ${disagreement}`);
            }
          }
        };
        for (const e of episodes) {
          await limit(e.key, e.first.n, e.first.cost);
          t += e.wait;
          suite.setNow(t);
          await limit(e.key, e.drain.n, e.drain.cost);
          for (const aside of e.asides) {
            const mine = admissions.filter((a) => a.key === e.key);
            if (aside.kind === "refund") {
              const a = mine[aside.pick % Math.max(1, mine.length)];
              if (a === undefined) continue;
              const asked = aside.partial ? 1 : undefined;
              await l.refund(e.key, asked === undefined ? { decision: a.decision } : { decision: a.decision, cost: asked });
              // the rules: never more than it charged, over every refund of it
              a.refunded += Math.min(asked ?? a.cost, a.cost - a.refunded);
            } else if (aside.kind === "foreign-key") {
              const a = admissions.find((x) => x.key !== e.key);
              if (a === undefined) continue;
              const error = await l.refund(e.key, { decision: a.decision }).catch((x: unknown) => x);
              expect(error).toBeInstanceOf(SluiceInputError);
            } else if (aside.kind === "foreign-limiter") {
              foreignDecisions.push(await other.limit(e.key, { cost: 1 }));
              const error = await l.refund(e.key, { decision: foreignDecisions[aside.pick % foreignDecisions.length]! }).catch((x: unknown) => x);
              expect(error).toBeInstanceOf(SluiceInputError);
            } else {
              // release: a lease of the key, held or not
              const a = mine[aside.pick % Math.max(1, mine.length)];
              if (a === undefined) continue;
              await l.release(e.key, a.decision);
              a.released = true;
            }
          }
          await limit(e.key, e.last.n, e.last.cost);
        }
      }),
      { numRuns: suite.runs.invariants },
    );
  });

  it("an obedient client (it comes back exactly retryAfterMs after a denial, with the same request) is served then: never denied twice for one wait, never escalated", async () => {
    // rate policies only, none that holds leases (a concurrency cap's retryAfterMs is a hint: a slot
    // frees on a release), the first one always with a penalty box
    const blocked = fc.tuple(policySpecArbitrary({ leases: false }), fc.constantFrom(300, 1000, 2500, { base: 200, factor: 3, max: 4000 }));
    await fc.assert(
      fc.asyncProperty(
        blocked,
        fc.array(policySpecArbitrary({ leases: false }), { maxLength: 2 }),
        fc.array(fc.record({ dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 400 })), cost: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 30 }),
        async ([first, block], rest, requests) => {
          const specs = [{ ...first, options: { ...first.options, block } } as PolicySpec, ...rest];
          const policies = namedPolicies(specs);
          const l = suite.limiter(policies);
          let t = suite.t0 + 29;
          for (const request of requests) {
            t += request.dt;
            suite.setNow(t);
            const d = await l.limit("k", { cost: request.cost });
            if (d.allowed || d.retryAfterMs === Infinity) continue;
            const disagreement = await headersDisagree(d, policies);
            if (disagreement !== undefined) throw new Error(`a 429 whose headers disagree with its body: ${disagreement}`);
            t += d.retryAfterMs;
            suite.setNow(t);
            const retried = await l.limit("k", { cost: request.cost });
            if (!retried.allowed) {
              throw new Error(
                `denied again at now + retryAfterMs (${d.retryAfterMs} ms after a "${d.reason}" denial by ${d.policy}): ${retried.reason} by ${retried.policy}, retryAfterMs ${retried.retryAfterMs}`,
              );
            }
          }
        },
      ),
      { numRuns: suite.runs.invariants },
    );
  });
}

/** A random override of a property run: a scale, one policy's quota, or unlimited; a ttl now and then. */
const overrideArbitrary = fc.record({
  kind: fc.constantFrom("scale" as const, "scale" as const, "quotas" as const, "quotas" as const, "unlimited" as const),
  scale: fc.constantFrom(0.5, 1.5, 2, 3),
  pick: fc.nat(),
  quota: fc.integer({ min: 1, max: 16 }),
  ttl: fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 4000 })),
});

/** The override `o` stands for, over policies named `p0`, `p1`, … */
function overrideOf(o: { kind: "scale" | "quotas" | "unlimited"; scale: number; pick: number; quota: number }, count: number): Override {
  if (o.kind === "unlimited") return { unlimited: true };
  if (o.kind === "scale") return { scale: o.scale };
  return { quotas: { [`p${o.pick % count}`]: o.quota } };
}

/**
 * Sets an override, as an operator would: one the limiter refuses (a scale that leaves a quota 0)
 * is skipped (the suite checks elsewhere that nothing changes then). Answers whether it was set.
 */
async function trySetOverride(l: RateLimiter, key: string, override: Override, ttl: number | undefined): Promise<boolean> {
  try {
    await l.setOverride(key, override, ttl === undefined ? undefined : { ttl });
    return true;
  } catch (error) {
    if (error instanceof SluiceInputError) return false;
    throw error;
  }
}

/**
 * The invariants with per-key overrides and manual blocks (call inside a store's `describe`): the
 * admission bounds with the largest of the quotas a run has set, and an obedient client under
 * manual blocks.
 */
export function testOverrideInvariants(suite: SuiteContext): void {
  it("overrides set, changed, cleared and ending at random times never let more through than the largest of the quotas allows (fixed window per window, sliding log per span, buckets burst + rate × span, leases at once)", async () => {
    const scenario = policiesArbitrary.chain((specs) => {
      const scales = specs.flatMap((spec) => timeScalesMs(policyFromSpec(spec)));
      const dt = fc.oneof(fc.constant(0), fc.constantFrom(...scales), fc.integer({ min: 1, max: 60 }), fc.integer({ min: 0, max: 4000 }));
      const key = fc.constantFrom("a", "a", "b");
      const step = fc.oneof(
        { weight: 5, arbitrary: fc.record({ op: fc.constant("limit" as const), key, n: fc.integer({ min: 1, max: 6 }), cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3 })) }) },
        { weight: 3, arbitrary: fc.record({ op: fc.constant("wait" as const), dt }) },
        { weight: 2, arbitrary: fc.record({ op: fc.constant("set" as const), key, override: overrideArbitrary }) },
        { weight: 1, arbitrary: fc.record({ op: fc.constant("clear" as const), key }) },
        { weight: 1, arbitrary: fc.record({ op: fc.constant("release" as const), key, pick: fc.nat() }) },
      );
      return fc.tuple(fc.constant(specs), fc.array(step, { minLength: 1, maxLength: 24 }));
    });
    await fc.assert(
      fc.asyncProperty(scenario, async ([specs, steps]) => {
        const policies = namedPolicies(specs);
        const l = suite.limiter(policies);
        // per policy, the effective policy with the largest quota the run has set so far (its own to begin with)
        const largest = [...policies];
        const admissions: Admission[] = [];
        let t = suite.t0 + 23;
        suite.setNow(t);
        for (const step of steps) {
          if (step.op === "wait") {
            t += step.dt;
            suite.setNow(t);
          } else if (step.op === "set") {
            const override = overrideOf(step.override, policies.length);
            if (!(await trySetOverride(l, step.key, override, step.override.ttl)) || "unlimited" in override) continue;
            effectivePolicies(policies, overrideBody(override)).forEach((p, i) => {
              if (p.limit > largest[i]!.limit) largest[i] = p;
            });
          } else if (step.op === "clear") {
            await l.clearOverride(step.key);
          } else if (step.op === "release") {
            const mine = admissions.filter((a) => a.key === step.key);
            const a = mine[step.pick % Math.max(1, mine.length)];
            if (a === undefined) continue;
            await l.release(step.key, a.decision);
            a.released = true;
          } else {
            for (let i = 0; i < step.n; i++) {
              const decision = await l.limit(step.key, { cost: step.cost });
              // whole units left, never below 0: also when more was counted than a lowered quota allows
              const negative = [decision, ...decision.policies].find((p) => p.remaining < 0);
              if (negative !== undefined) throw new Error(`remaining ${negative.remaining} < 0 (${decision.policy}, override ${JSON.stringify(decision.override)})`);
              // under an unlimited override nothing is counted: such an admission is in no bound
              if (!decision.allowed || (decision.override !== undefined && "unlimited" in decision.override)) continue;
              admissions.push({ key: step.key, atMs: decision.now, cost: step.cost, refunded: 0, decision, released: false });
              const broken = violatedBound(largest, admissions, step.key, decision.now);
              if (broken !== undefined) throw new Error(`over-admission with overrides: ${broken}`);
            }
          }
        }
      }),
      { numRuns: suite.runs.invariants },
    );
  });

  it("an obedient client under manual blocks (and overrides) is served when it comes back after retryAfterMs; while only the block denies, that is the block's end", async () => {
    const request = fc.record({
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 3000 })),
      cost: fc.integer({ min: 1, max: 3 }),
      block: fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: fc.integer({ min: 1, max: 5000 }), weight: 1 }),
      unblock: fc.oneof({ arbitrary: fc.constant(false), weight: 6 }, { arbitrary: fc.constant(true), weight: 1 }),
      // no ttl here: an override that ends during the wait may rightly change the answer
      override: fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: fc.constant("clear" as const), weight: 1 }, { arbitrary: overrideArbitrary, weight: 1 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(policySpecArbitrary({ leases: false }), { minLength: 1, maxLength: 2 }),
        fc.array(request, { minLength: 1, maxLength: 20 }),
        async (specs, requests) => {
          const policies = namedPolicies(specs);
          const l = suite.limiter(policies);
          let t = suite.t0 + 31;
          let blockEnd = 0;
          for (const r of requests) {
            t += r.dt;
            suite.setNow(t);
            if (r.override === "clear") await l.clearOverride("k");
            else if (r.override !== undefined) await trySetOverride(l, "k", overrideOf(r.override, policies.length), undefined);
            if (r.unblock) {
              await l.unblock("k");
              blockEnd = 0;
            }
            if (r.block !== undefined) {
              await l.block("k", r.block);
              blockEnd = t + r.block;
            }
            const d = await l.limit("k", { cost: r.cost });
            if (blockEnd > t) {
              expect([d.allowed, d.reason]).toEqual([false, "blocked"]);
              expect(d.retryAfterMs).toBeGreaterThanOrEqual(blockEnd - t);
            }
            if (d.allowed || d.retryAfterMs === Infinity) continue;
            if (blockEnd > t && d.retryAfterMs === blockEnd - t) {
              // told to come back when the block ends: 1 ms earlier it still runs (and counts nothing)
              suite.setNow(blockEnd - 1);
              expect((await l.limit("k", { cost: r.cost })).reason).toBe("blocked");
            }
            t += d.retryAfterMs;
            suite.setNow(t);
            const retried = await l.limit("k", { cost: r.cost });
            if (!retried.allowed) {
              throw new Error(
                `denied again at now + retryAfterMs (${d.retryAfterMs} ms after a "${d.reason}" denial by ${d.policy}, manual block until ${blockEnd - suite.t0}): ${retried.reason} by ${retried.policy}, retryAfterMs ${retried.retryAfterMs}`,
              );
            }
          }
        },
      ),
      { numRuns: suite.runs.invariants },
    );
  });
}
