/**
 * The limiter's side of reservations (the `reserve` option; the rules are `../reservations.ts`):
 * whether a limiter reserves at all, the hooks through which its reservations reach the store, and
 * `returnReservations()`.
 *
 * @module
 */
import { MemoryStore } from "../memory-store.js";
import { Reservations, canReserve, resolveReserve } from "../reservations.js";
import type { Store } from "../types.js";
import { refundCharge } from "./refunds.js";
import type { LimiterCore } from "./state.js";
import { isThenable, marked, withTimeout } from "./store-calls.js";

/** The reservations of the `reserve` option: off over a MemoryStore (already local), a store without `reserve`, or a policy that cannot reserve. */
export function reservationsOf(core: LimiterCore, option: unknown, store: Store): Reservations | undefined {
  const resolved = resolveReserve(option);
  const bound = core.bound;
  if (resolved === undefined || store instanceof MemoryStore || typeof bound.reserve !== "function" || !canReserve(core.policies)) return undefined;
  return new Reservations(resolved, core.policies, {
    reserve: (key, units, holdMs) => {
      const answer = bound.reserve!(key, units, holdMs);
      return isThenable(answer) ? withTimeout(core, answer) : answer;
    },
    giveBack: (key, charge, units) => refundCharge(core, key, charge, units),
    failed: (error) => core.host.reportStoreFailure(error),
    mark: (decision, key) => marked(core, decision, key),
  });
}

/** `returnReservations()`: every reservation's unused units given back, and the reservations ended. */
export async function returnReservations(core: LimiterCore): Promise<void> {
  await core.reservations?.returnAll();
}
