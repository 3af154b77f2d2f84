/**
 * The recorded vectors (`vectors/vectors.json`, generated from the reference models and checked
 * against the memory store): every store must reproduce each case's decisions step by step, so
 * that all of them agree on the same sequence of (time, key, cost).
 *
 * @module
 */
import type { Decision, Policy, RateLimiter } from "@sluice/core";
import { expect, it } from "vitest";
import recorded from "../../vectors/vectors.json" with { type: "json" };
import { holdsLeases } from "../algorithms/index.js";
import { plain } from "../reference.js";
import { type VectorCase, isOverrideRead, policyFromSpec, runStep } from "../vectors.js";
import type { SuiteContext } from "./context.js";

/** One test per recorded case, replayed on the store under test. */
export function testRecordedVectors(suite: SuiteContext): void {
  for (const vectorCase of (recorded as { cases: VectorCase[] }).cases) {
    it(vectorCase.name, async () => {
      await replayCase(vectorCase, { limiter: (policies) => suite.limiter(policies), setNow: (ms) => suite.setNow(ms) });
    });
  }
}

/** Replays a case against a limiter factory and a way to set the store's clock, asserting each decision. */
export async function replayCase(
  vectorCase: VectorCase,
  hooks: { limiter: (policies: Policy[]) => RateLimiter; setNow: (ms: number) => void },
): Promise<void> {
  const l = hooks.limiter(vectorCase.limits.map(policyFromSpec));
  const concurrent = holdsLeases(l.policies);
  const decisions: Decision[] = [];
  for (const [i, step] of vectorCase.steps.entries()) {
    hooks.setNow(step.at);
    const decision = await runStep(l, step, decisions);
    if (decision === undefined) continue;
    if (isOverrideRead(decision)) {
      expect(decision.got, `${vectorCase.name}, step ${i} (getOverride ${JSON.stringify(step.key)} at ${step.at})`).toEqual(step.expectOverride);
      continue;
    }
    decisions[i] = decision;
    // (under an unlimited override no slot is held: whether the decision still carries a lease id is the limiter's affair)
    const unlimited = decision.override !== undefined && "unlimited" in decision.override;
    if (step.op === "limit" && !unlimited) expect(decision.lease !== undefined, `${vectorCase.name}, step ${i}: a lease iff allowed with a concurrency cap`).toBe(decision.allowed && concurrent);
    expect(plain(decision), `${vectorCase.name}, step ${i} (${step.op} ${JSON.stringify(step.key)} cost ${step.cost ?? 1} at ${step.at})`).toEqual(step.expect);
  }
}
