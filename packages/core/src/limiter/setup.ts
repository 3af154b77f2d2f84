/**
 * A limiter's construction: every option checked (a wrong one is a {@link SluiceConfigError} now,
 * not a failure at the first request), the store bound to the limiter's namespace and checked
 * against the whole `BoundStore` contract, and the {@link LimiterCore} the concerns share.
 *
 * @module
 */
import { holdsLeases, validateName } from "../algorithms/index.js";
import { toDecision } from "../decision.js";
import { DenyCache, resolveDenyCache } from "../deny-cache.js";
import { MAX_DURATION_MS } from "../duration.js";
import { SluiceConfigError, describe } from "../errors.js";
import { validatePolicies, validateTier } from "../keys.js";
import { FallbackLeases } from "../leases.js";
import { MemoryBinding, MemoryStore } from "../memory-store.js";
import type { BoundStore, Store } from "../types.js";
import { DEFAULT_TIMEOUT_MS, type LimiterMode, type RateLimiterOptions } from "./options.js";
import { reservationsOf } from "./reservations.js";
import type { LimiterCore, LimiterHost } from "./state.js";
import { namespaceToken } from "./store-calls.js";

/** What a bound namespace must answer (`BoundStore`, without the optional `extendTimeout`). */
const BOUND_STORE_METHODS = ["consume", "peek", "reset", "refund", "release"] as const;

/** The private state of `host`, a limiter being constructed with `options`; throws {@link SluiceConfigError} for a wrong option. */
export function setUp(host: LimiterHost, options: RateLimiterOptions): LimiterCore {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`options must be an object with limits; got ${describe(options)}`, { option: "options" });
  }
  // 1 to MAX_POLICIES policies, the same limit on every store
  const limits = validatePolicies(options.limits, "limits");
  const prefix = options.prefix === undefined ? "sluice" : validateName(options.prefix, "prefix");
  // an option set to null is refused like any other wrong value (only undefined means the default)
  const onStoreError = options.onStoreError === undefined ? "fallback" : options.onStoreError;
  if (onStoreError !== "fallback" && onStoreError !== "allow" && onStoreError !== "deny") {
    throw new SluiceConfigError(`onStoreError must be "fallback", "allow" or "deny"; got ${describe(onStoreError)}`, { option: "onStoreError" });
  }
  const timeoutMs = timeoutOf(options);
  const store = options.store ?? new MemoryStore();
  if (typeof (store as Partial<Store>).bind !== "function") {
    throw new SluiceConfigError(`store must be a Store (an object with bind(namespace)); got ${describe(store)}`, { option: "store" });
  }
  if (options.onStoreFailure !== undefined && typeof options.onStoreFailure !== "function") {
    throw new SluiceConfigError(`onStoreFailure must be a function; got ${describe(options.onStoreFailure)}`, { option: "onStoreFailure" });
  }
  const policies = Object.freeze([...limits]);
  const tier = options.tier === undefined ? undefined : validateTier(options.tier, "tier");
  const mode: LimiterMode = options.mode === undefined ? "enforce" : options.mode;
  if (mode !== "enforce" && mode !== "dry-run") {
    throw new SluiceConfigError(`mode must be "enforce" or "dry-run"; got ${describe(mode)}`, { option: "mode" });
  }
  // on by default for stores that answer over the network; MemoryStore answers in place
  const denyCache = resolveDenyCache(options.denyCache, !(store instanceof MemoryStore));
  const denials = denyCache === undefined ? undefined : new DenyCache(denyCache, toDecision);
  const namespace = Object.freeze({ prefix, tier, policies });
  const owner = namespaceToken(store, namespace);
  const bound = store.bind(namespace);
  const core: LimiterCore = {
    host,
    store,
    policies,
    onStoreError,
    timeoutMs,
    patient: options.timeoutMs === undefined,
    mode,
    denials,
    namespace,
    owner,
    bound,
    memory: bound instanceof MemoryBinding ? bound : undefined,
    onStoreFailure: options.onStoreFailure,
    concurrent: policies.some(holdsLeases),
    concurrencyNames: new Set(policies.filter(holdsLeases).map((p) => p.name)),
    fallback: undefined,
    fallbackLeases: new FallbackLeases(10_000),
    reservations: undefined,
  };
  // the hooks of the reservations call back into the core: made once the rest of it is there
  core.reservations = reservationsOf(core, options.reserve, store);
  checkBound(bound);
  return core;
}

/** The `timeoutMs` option, checked: the default when omitted. */
function timeoutOf(options: RateLimiterOptions): number | false {
  const timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
  if (
    timeoutMs !== false &&
    (typeof timeoutMs !== "number" || !Number.isSafeInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_DURATION_MS)
  ) {
    // above 2^31-1 ms, setTimeout fires at once: every store call would time out
    throw new SluiceConfigError(
      `timeoutMs must be a positive integer of milliseconds, at most ${MAX_DURATION_MS}, or false; got ${describe(timeoutMs)}`,
      { option: "timeoutMs" },
    );
  }
  return timeoutMs;
}

/**
 * The whole contract, refund and release included, is checked at construction rather than at the
 * first refund or lease (a store written before they were required fails now, not in production).
 */
function checkBound(bound: BoundStore): void {
  for (const method of BOUND_STORE_METHODS) {
    if (typeof bound[method] !== "function") {
      throw new SluiceConfigError(
        `store must be a Store whose bind(namespace) returns the methods ${BOUND_STORE_METHODS.join(", ")}; got a bound namespace without ${method}()`,
        { option: "store" },
      );
    }
  }
}
