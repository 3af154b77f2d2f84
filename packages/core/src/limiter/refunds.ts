/**
 * Giving units back: `refund()` checks that a decision is this limiter's and caps the refund at
 * what it charged ({@link StoreDecision} keeps that account); a decision made from a reservation
 * goes back to the reservation while it serves. Every refund of a decision runs after the previous
 * one of the same decision.
 *
 * @module
 */
import { StoreDecision, toDecision } from "../decision.js";
import { SluiceConfigError, SluiceInputError, SluiceStoreError, describe } from "../errors.js";
import { assertKey } from "../keys.js";
import type { Decision, MaybePromise, RefundCharge, StoreResult } from "../types.js";
import { forgetDenial } from "./control.js";
import { type RefundOptions, checkCost } from "./options.js";
import type { LimiterCore } from "./state.js";
import { certainlyNotApplied, isThenable, marked, withTimeout } from "./store-calls.js";

/** `refund()`: the input checked, then the units given back through the store or to a reservation. */
export async function refund(core: LimiterCore, key: string, options: RefundOptions | undefined): Promise<Decision> {
  assertKey(key);
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    throw new SluiceInputError(`options must be an object like { decision } or { cost: 1 }; got ${describe(options)}`, { option: "options" });
  }
  const decision = options?.decision;
  const cost = options?.cost === undefined ? undefined : checkCost(options.cost);
  if (decision === undefined) return storeRefund(core, key, cost ?? 1, undefined);
  if (typeof decision !== "object" || decision === null) {
    throw new SluiceInputError(`decision must be a Decision returned by limit(); got ${describe(decision)}`, { option: "decision" });
  }
  const foreign = StoreDecision.foreign(decision, core.owner, key);
  if (foreign !== undefined) throw new SluiceInputError(foreign, { option: "decision" });
  const source = StoreDecision.sourceOf(decision);
  if (source !== undefined) return refundReserved(core, key, decision, source, cost);
  return refundCharge(core, key, decision, cost ?? Number.MAX_SAFE_INTEGER);
}

/**
 * The refund of a decision made from a reservation: back to that reservation while it serves
 * (no round trip), else through the reservation's charge, at most the units the decision took.
 */
function refundReserved(core: LimiterCore, key: string, decision: Decision, source: Decision, cost: number | undefined): Promise<Decision> {
  return StoreDecision.serially(decision, async () => {
    const units = Math.min(cost ?? Number.MAX_SAFE_INTEGER, StoreDecision.refundableUnits(decision));
    if (units === 0) return core.host.peek(key);
    forgetDenial(core, key);
    const restored = core.reservations?.restore(key, source, units);
    if (restored !== undefined) {
      StoreDecision.refunded(decision, units);
      return restored;
    }
    StoreDecision.refunded(decision, units);
    return refundCharge(core, key, source, units);
  });
}

/** Gives `units` of a charge back through the store (a reservation's: its unused units, or a reserved decision's). */
export function refundCharge(core: LimiterCore, key: string, charge: Decision, units: number): Promise<Decision> {
  return StoreDecision.serially(charge, async () => {
    const { units: refundable, charge: named } = StoreDecision.refundable(charge, units, core.policies);
    if (refundable === 0) return core.host.peek(key);
    try {
      const refunded = await storeRefund(core, key, refundable, named);
      StoreDecision.refunded(charge, refundable);
      return refunded;
    } catch (error) {
      // the store may have applied it (a timeout, a malformed reply): never refunded twice
      if (!certainlyNotApplied(error)) StoreDecision.refunded(charge, refundable);
      throw error;
    }
  });
}

/** The store's refund of `units` for `charge` (`undefined`: the latest charges). */
async function storeRefund(core: LimiterCore, key: string, units: number, charge: RefundCharge | undefined): Promise<Decision> {
  forgetDenial(core, key);
  let result: MaybePromise<StoreResult>;
  try {
    result = core.bound.refund(key, units, charge);
  } catch (error) {
    // thrown before any I/O: nothing was applied
    throw error instanceof SluiceStoreError || error instanceof SluiceConfigError || error instanceof SluiceInputError
      ? error
      : new SluiceStoreError(`refund failed before reaching the store: ${String((error as Error | null)?.message ?? error)}`, { cause: error, notApplied: true });
  }
  if (isThenable(result)) result = await withTimeout(core, result);
  // a denial that arrived while the refund was on its way is older than the refund
  forgetDenial(core, key);
  return marked(core, toDecision(result), key);
}
