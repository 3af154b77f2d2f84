/**
 * What every concern does around a store call: the timeout, the decision when the store failed
 * (the fallback store, or `onStoreError`'s allow or deny), the report to `onStoreFailure`, and the
 * stamp every decision gets on its way out.
 *
 * @module
 */
import { StoreDecision, storeFailureDecision, toDecision } from "../decision.js";
import { SluiceConfigError, SluiceInputError, SluiceStoreError, SluiceTimeoutError } from "../errors.js";
import { MemoryStore } from "../memory-store.js";
import type { BoundStore, Decision, DecisionReason, MaybePromise, Store, StoreNamespace, StoreResult } from "../types.js";
import type { LimiterCore } from "./state.js";

export function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return value != null && typeof (value as { then?: unknown }).then === "function";
}

/**
 * One token per namespace a store holds state in: the store, the prefix, the tier and the exact
 * policies. Limiters over the same store and namespace share it, so a decision of one refunds
 * through another; any other limiter refuses it.
 */
const namespaceTokens = new WeakMap<Store, Map<string, object>>();

export function namespaceToken(store: Store, namespace: StoreNamespace): object {
  let tokens = namespaceTokens.get(store);
  if (tokens === undefined) {
    tokens = new Map();
    namespaceTokens.set(store, tokens);
  }
  const id = JSON.stringify([namespace.prefix, namespace.tier ?? null, namespace.policies]);
  let token = tokens.get(id);
  if (token === undefined) {
    token = Object.freeze({});
    tokens.set(id, token);
  }
  return token;
}

/**
 * Whether a failed store call certainly changed nothing (the call never reached the store: the
 * connection was refused, the client was closed, or the store threw before any I/O), so that a
 * refund may be tried again. A timeout or a malformed reply may have been applied.
 */
export function certainlyNotApplied(error: unknown): boolean {
  return error instanceof SluiceStoreError && error.notApplied;
}

/**
 * Hands a store failure that happened outside a decision (a refund after the response, say) to
 * `onStoreFailure`; nothing it throws escapes.
 */
export function reportStoreFailure(core: LimiterCore, error: unknown): void {
  try {
    core.onStoreFailure?.(error);
  } catch {
    // a failing logger must not turn a response into an exception
  }
}

/**
 * Every decision on its way out: stamped with this limiter's namespace and the key (what a
 * refund checks), and marked `dryRun: true` by a dry-run limiter.
 */
export function marked(core: LimiterCore, decision: Decision, key: string): Decision {
  StoreDecision.stamp(decision, core.owner, key);
  if (core.mode === "dry-run") decision.dryRun = true;
  return decision;
}

/** `promise`, rejected with {@link SluiceTimeoutError} when the store takes longer than `timeoutMs`. */
export function withTimeout<T>(core: LimiterCore, promise: Promise<T>): Promise<T> {
  const timeoutMs = core.timeoutMs;
  if (timeoutMs === false) return promise;
  const bound = core.bound;
  const extend = core.patient ? bound.extendTimeout : undefined;
  return new Promise<T>((resolve, reject) => {
    let waitedMs = timeoutMs;
    const expire = () => {
      // the default timeout: a store whose server is busy rather than hung may ask for more time
      const moreMs = extend === undefined ? 0 : extend.call(bound, waitedMs, timeoutMs);
      if (moreMs > 0) {
        waitedMs += moreMs;
        timer = setTimeout(expire, moreMs);
        return;
      }
      const extended = waitedMs === timeoutMs ? "" : `; waited ${waitedMs} ms while the store answered other calls`;
      reject(new SluiceTimeoutError(`store did not answer within timeoutMs (${timeoutMs} ms${extended})`));
    };
    let timer = setTimeout(expire, timeoutMs);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * The decision when a store call failed: the fallback store's answer (`viaFallback`), or
 * `onStoreError`'s allow or deny. Throws what must not be turned into a decision (config and input
 * errors).
 */
export function failed(core: LimiterCore, error: unknown, viaFallback: (fallback: BoundStore) => StoreResult): Decision {
  if (error instanceof SluiceConfigError || error instanceof SluiceInputError) throw error;
  const reason: DecisionReason = error instanceof SluiceTimeoutError ? "timeout" : "store-error";
  try {
    core.onStoreFailure?.(error);
  } catch {
    // a failing logger must not turn a decision into an exception
  }
  if (core.onStoreError === "fallback") {
    core.fallback ??= new MemoryStore().bind(core.namespace);
    return toDecision(viaFallback(core.fallback), reason);
  }
  return storeFailureDecision(core.policies, Date.now(), core.onStoreError === "allow", reason);
}
