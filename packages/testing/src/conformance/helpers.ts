/**
 * Small helpers the conformance modules share: a burst of requests, the fields of a decision that
 * the exact sequences compare, generated policies named for overrides, the error a call fails with,
 * and a store that records the calls made to it.
 *
 * @module
 */
import type { Decision, Policy, RateLimiter, Store } from "@sluice/core";
import type { BoundStore, StoreNamespace } from "@sluice/core/store";
import { T0 } from "../suite-shared.js";
import { type PolicySpec, policyFromSpec } from "../vectors.js";

/** `n` requests of `cost` in a row for `key`, one after the other; returns the decisions. */
export async function burst(l: RateLimiter, key: string, n: number, cost = 1): Promise<Decision[]> {
  const out: Decision[] = [];
  for (let i = 0; i < n; i++) out.push(await l.limit(key, { cost }));
  return out;
}

/** The fields of a decision the exact sequences compare, `resetAt` relative to the suite's `T0`. */
export interface Brief {
  allowed: boolean;
  remaining: number;
  resetAt: number;
  retryAfterMs: number;
  delayMs: number;
  reason: string;
}

/** {@link Brief} of `d`. */
export function brief(d: Decision): Brief {
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    resetAt: d.resetAt - T0,
    retryAfterMs: d.retryAfterMs,
    delayMs: d.delayMs,
    reason: d.reason,
  };
}

/** {@link Brief} with the decision's `limit`: the quota an override makes effective. */
export interface LimitBrief extends Brief {
  limit: number;
}

/** {@link LimitBrief} of `d`. */
export function limitBrief(d: Decision): LimitBrief {
  return { ...brief(d), limit: d.limit };
}

/** The `remaining` of every policy of `d`, in order. */
export function remainingOf(d: Decision): number[] {
  return d.policies.map((p) => p.remaining);
}

/** The policies of `specs`, named `p0`, `p1`, … in order (so that an override's quotas can name them). */
export function namedPolicies(specs: readonly PolicySpec[]): Policy[] {
  return specs.map((s, i) => policyFromSpec({ ...s, options: { ...s.options, name: `p${i}` } } as PolicySpec));
}

/** The error a call rejects with (or throws), or `undefined` when it succeeds. */
export async function failure(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  return undefined;
}

/**
 * A store whose bound namespaces are Proxies over the store's own, recording the name of every
 * method called on them (`consume`, `peek`, `control`, … — `consumePolicies` for a `MemoryStore`,
 * which the limiter calls directly): one call is one round trip of a store that crosses a network.
 */
export function recordingStore(inner: Store): { store: Store; calls: string[] } {
  const calls: string[] = [];
  const store: Store = {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = inner.bind(namespace);
      return new Proxy(bound, {
        get(target, property) {
          const value: unknown = Reflect.get(target, property, target);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            calls.push(String(property));
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
    },
  };
  return { store, calls };
}
