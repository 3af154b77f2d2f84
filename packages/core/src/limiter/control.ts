/**
 * Changing a key's state by hand: overrides, manual blocks and `reset`, each one store call that
 * ends the key's reservations and forgets its cached denial, before and after (a denial that
 * arrived meanwhile is older than the change).
 *
 * @module
 */
import type { Duration } from "../duration.js";
import { SluiceConfigError, SluiceInputError, describe } from "../errors.js";
import { assertKey } from "../keys.js";
import { type ControlResult, type Override, type OverrideOptions, type StoreCommand, durationArg, overrideFromText, overrideText } from "../overrides.js";
import type { LimiterCore } from "./state.js";
import { isThenable, withTimeout } from "./store-calls.js";

/**
 * Drops `key`'s entry from the deny cache, so that its next call asks the store. Whatever gives
 * quota back to a key must call it: `reset`, `refund` and `release` (a key may pass before its
 * cached denial would expire).
 */
export function forgetDenial(core: LimiterCore, key: string): void {
  core.denials?.forget(key);
}

/** `reset()`: the key's state forgotten in the store, the fallback store, its reservations and the deny cache. */
export async function reset(core: LimiterCore, key: string): Promise<void> {
  assertKey(key);
  forgetDenial(core, key);
  // the reset forgets the reserved units with the rest: nothing to give back first
  core.reservations?.end(key, false);
  await core.fallback?.reset(key);
  const done = core.bound.reset(key);
  if (isThenable(done)) await withTimeout(core, done);
  // a denial that arrived while the reset was on its way is older than the reset
  forgetDenial(core, key);
}

/** `setOverride()`: the override and its options checked against the policies, then stored. */
export async function setOverride(core: LimiterCore, key: string, override: Override, options: OverrideOptions | undefined): Promise<void> {
  assertKey(key);
  const body = overrideText(override, core.policies);
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    throw new SluiceInputError(`options must be an object like { ttl }; got ${describe(options)}`, { option: "options" });
  }
  for (const k of Object.keys(options ?? {})) {
    if (k !== "ttl") throw new SluiceInputError(`options.${k} is not an option of setOverride: it takes ttl`, { option: `options.${k}` });
  }
  const ttlMs = options?.ttl === undefined ? 0 : durationArg(options.ttl, "ttl");
  await control(core, key, { op: "setOverride", override: body, ttlMs });
}

/** `getOverride()`: the key's live override, read back from its stored text. */
export async function getOverride(core: LimiterCore, key: string): Promise<Override | undefined> {
  assertKey(key);
  const body = (await control(core, key, { op: "getOverride" })).override;
  return body === undefined ? undefined : overrideFromText(body);
}

/** `clearOverride()`. */
export async function clearOverride(core: LimiterCore, key: string): Promise<void> {
  assertKey(key);
  await control(core, key, { op: "clearOverride" });
}

/** `block()`: a manual block for `duration` from now. */
export async function block(core: LimiterCore, key: string, duration: Duration): Promise<void> {
  assertKey(key);
  const durationMs = durationArg(duration, "duration");
  await control(core, key, { op: "block", durationMs });
}

/** `unblock()`: the manual block and the penalty boxes lifted. */
export async function unblock(core: LimiterCore, key: string): Promise<void> {
  assertKey(key);
  await control(core, key, { op: "unblock" });
}

/** Runs a `BoundStore.control` command (one round trip) and forgets the key's cached denial. */
async function control(core: LimiterCore, key: string, command: StoreCommand): Promise<ControlResult> {
  const bound = core.bound;
  if (typeof bound.control !== "function") {
    throw new SluiceConfigError("store cannot hold overrides or manual blocks: its bound namespace has no control() method (every Sluice store has one)", { option: "store" });
  }
  forgetDenial(core, key);
  // what this limiter changes binds here at once: the key's reservations end (their units go back)
  await core.reservations?.end(key);
  let result = bound.control(key, command);
  if (isThenable(result)) result = await withTimeout(core, result);
  // a denial that arrived while the command was on its way is older than it
  forgetDenial(core, key);
  return result;
}
