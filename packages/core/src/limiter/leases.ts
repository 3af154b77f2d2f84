/**
 * Freeing a concurrency slot: `release()`. A lease the fallback store acquired while the store was
 * down lives only there (`LimiterCore.fallbackLeases`), so its release succeeds even while the
 * store is still down. Drawing a lease id and reading one back are `../leases.ts`.
 *
 * @module
 */
import { toDecision } from "../decision.js";
import { SluiceTimeoutError } from "../errors.js";
import { assertKey } from "../keys.js";
import { leaseIdOf } from "../leases.js";
import type { Decision, MaybePromise, StoreResult } from "../types.js";
import { forgetDenial } from "./control.js";
import type { LimiterCore } from "./state.js";
import { isThenable, marked, withTimeout } from "./store-calls.js";

/** `release()`: the lease freed in the store, and in the fallback store that may hold it. */
export async function release(core: LimiterCore, key: string, lease: string | Decision): Promise<Decision> {
  assertKey(key);
  const id = leaseIdOf(lease);
  if (id === undefined || !core.concurrent) return core.host.peek(key);
  forgetDenial(core, key);
  // a lease the fallback store acquired while the store was down lives there: freed there
  const inFallback = core.fallbackLeases.delete(id);
  const freed = inFallback ? core.fallback?.release(key, id) : (core.fallback?.release(key, id), undefined);
  let result: MaybePromise<StoreResult>;
  try {
    result = core.bound.release(key, id);
    if (isThenable(result)) result = await withTimeout(core, result);
  } catch (error) {
    if (freed === undefined || isThenable(freed)) throw error;
    // the store is still down, and the lease was never in it: the fallback freed it
    core.host.reportStoreFailure(error);
    return marked(core, toDecision(freed, error instanceof SluiceTimeoutError ? "timeout" : "store-error"), key);
  }
  // a denial that arrived while the release was on its way is older than the release
  forgetDenial(core, key);
  return marked(core, toDecision(result), key);
}
