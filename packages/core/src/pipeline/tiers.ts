/**
 * Tiers: each tier's limiter, built once from the options, and the lookup of a request's tier
 * through a bounded cache of the `tier` resolver's answers (a burst of requests for one key asks the
 * resolver once).
 *
 * @module
 */
import { type Policy, isPolicy, validateName } from "../algorithms/index.js";
import { resolveDenyCache } from "../deny-cache.js";
import { resolveReserve } from "../reservations.js";
import { SluiceConfigError, describe, tagged } from "../errors.js";
import type { HeaderWriter } from "../headers.js";
import { assertKey, validatePolicies } from "../keys.js";
import { type LimiterMode, RateLimiter } from "../limiter/index.js";
import { MemoryStore } from "../memory-store.js";
import type { MaybePromise, Store } from "../types.js";
import { requireFunction } from "./assert.js";
import type { PipelineTieredOptions, TierConfig } from "./options.js";

/** A limiter the pipeline decides with, and its compiled header writer. */
export interface Target {
  limiter: RateLimiter;
  /** The header writer for this limiter's policies, compiled at its first request. */
  write?: HeaderWriter;
}

export function targetOf(limiter: RateLimiter): Target {
  return { limiter };
}

/**
 * Builds each tier's limiter now; the returned function finds a request's tier, through the cache.
 * `tag` is the adapter's, for the error of a request whose tier is not configured.
 */
export function tieredPicker<Args extends unknown[]>(options: PipelineTieredOptions<Args>, tag?: string): (args: Args, key: string) => Promise<Target> {
  const { tiers, tier } = options;
  if (typeof tiers !== "object" || tiers === null || Array.isArray(tiers) || Object.keys(tiers).length === 0) {
    throw new SluiceConfigError(`tiers must be an object of tier name → limits with at least one tier; got ${describe(tiers)}`, { option: "tiers" });
  }
  requireFunction(tier, "tier", false);
  const ttlMs = options.tierCacheTtlMs ?? 300_000;
  if (typeof ttlMs !== "number" || !Number.isSafeInteger(ttlMs) || ttlMs < 0) {
    throw new SluiceConfigError(`tierCacheTtlMs must be a non-negative integer of milliseconds; got ${describe(ttlMs)}`, { option: "tierCacheTtlMs" });
  }
  const maxCached = options.tierCacheMaxKeys ?? 10_000;
  if (typeof maxCached !== "number" || !Number.isSafeInteger(maxCached) || maxCached <= 0) {
    throw new SluiceConfigError(`tierCacheMaxKeys must be a positive integer; got ${describe(maxCached)}`, { option: "tierCacheMaxKeys" });
  }
  const prefix = options.prefix === undefined ? "sluice" : validateName(options.prefix, "prefix");
  const store = options.store ?? new MemoryStore();
  if (typeof (store as Partial<Store>).bind !== "function") {
    throw new SluiceConfigError(`store must be a Store (an object with bind(namespace)); got ${describe(store)}`, { option: "store" });
  }
  resolveDenyCache(options.denyCache, true); // checked here, so a mistake is named as this option
  resolveReserve(options.reserve);
  const defaultMode = options.mode ?? "enforce";
  if (defaultMode !== "enforce" && defaultMode !== "dry-run") {
    throw new SluiceConfigError(`mode must be "enforce" or "dry-run"; got ${describe(defaultMode)}`, { option: "mode" });
  }
  const targets = new Map<string, Target>();
  for (const [name, entry] of Object.entries(tiers)) {
    const { limits, mode } = tierEntry(name, entry, defaultMode);
    const { onStoreError, timeoutMs, onStoreFailure, denyCache, reserve } = options;
    const limiter = new RateLimiter({ store, limits, prefix, tier: name, onStoreError, timeoutMs, onStoreFailure, denyCache, reserve, mode });
    targets.set(name, targetOf(limiter));
  }
  const known = [...targets.keys()].join(", ");
  const { resolve, forget } = cachedResolver(tier, ttlMs, maxCached);

  return async (args, key) => {
    assertKey(key); // before the lookup: the resolver never sees a key the limiter would refuse
    const name = await resolve(args, key);
    const target = targets.get(name);
    if (target === undefined) {
      forget(key);
      throw new SluiceConfigError(tagged(tag, `tier must return a configured tier (${known}); got ${describe(name)}`), { option: "tier" });
    }
    return target;
  };
}

/** One tier's limits and mode, validated: a list of policies, or the object form `{ limits, mode? }`. */
function tierEntry(name: string, entry: unknown, defaultMode: LimiterMode): { limits: readonly Policy[]; mode: LimiterMode } {
  try {
    validateName(name, "tiers");
  } catch (error) {
    // the rule is a policy name's: the cause spells it out
    throw new SluiceConfigError(`tiers must be keyed by valid tier names (the rules of a policy name); got a tier named ${describe(name)}`, {
      option: "tiers",
      cause: error,
    });
  }
  let limits: unknown = entry;
  let mode: unknown = defaultMode;
  if (typeof entry === "object" && entry !== null && !Array.isArray(entry) && !isPolicy(entry)) {
    // the object form, { limits, mode? }
    const { limits: own, mode: ownMode, ...rest } = entry as TierConfig;
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) {
      throw new SluiceConfigError(`tiers.${name}.${extra} is not an option: a tier takes limits and mode`, { option: `tiers.${name}.${extra}` });
    }
    limits = own;
    if (ownMode !== undefined) mode = ownMode;
    if (mode !== "enforce" && mode !== "dry-run") {
      throw new SluiceConfigError(`tiers.${name}.mode must be "enforce" or "dry-run"; got ${describe(ownMode)}`, { option: `tiers.${name}.mode` });
    }
  }
  // tiers.pro, or tiers.pro.limits in the object form: the policy at fault is named under it
  return { limits: validatePolicies(limits, limits === entry ? `tiers.${name}` : `tiers.${name}.limits`), mode: mode as LimiterMode };
}

/**
 * The `tier` resolver behind a bounded cache of its answers, key → tier, each for `ttlMs` (0: no
 * cache). A lookup in flight is cached too, so a burst of requests for one key asks once; a lookup
 * that fails is forgotten, so the next request asks again.
 */
function cachedResolver<Args extends unknown[]>(
  tier: (...args: [...Args, key: string]) => MaybePromise<string>,
  ttlMs: number,
  maxCached: number,
): { resolve(args: Args, key: string): MaybePromise<string>; forget(key: string): void } {
  const cache = new Map<string, { tier: MaybePromise<string>; expiresAt: number }>();
  const resolve = (args: Args, key: string): MaybePromise<string> => {
    if (ttlMs === 0) return tier(...args, key);
    const now = Date.now();
    const hit = cache.get(key);
    if (hit !== undefined && hit.expiresAt > now) return hit.tier;
    if (hit !== undefined) cache.delete(key);
    else if (cache.size >= maxCached) cache.delete(cache.keys().next().value as string);
    const answer = tier(...args, key);
    const entry = { tier: answer, expiresAt: now + ttlMs };
    cache.set(key, entry);
    if (typeof (answer as { then?: unknown } | undefined)?.then === "function") {
      (answer as Promise<string>).then(
        (name) => {
          if (cache.get(key) === entry) entry.tier = name;
        },
        () => {
          if (cache.get(key) === entry) cache.delete(key);
        },
      );
    }
    return answer;
  };
  return { resolve, forget: (key) => cache.delete(key) };
}
