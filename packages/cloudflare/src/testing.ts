/**
 * Test-only entry, `@sluice/cloudflare/testing`: a `DurableObjectStore` whose "now" is a function
 * you control, so one conformance suite can stand exactly on a window edge.
 *
 * How it is fenced off from production — two locks, both needed:
 * - the caller's side: only a store made here sends a time with each call (`nowMs`); the hook is
 *   not an option of `DurableObjectStore`, and this factory refuses to run when `NODE_ENV` is
 *   `"production"`;
 * - the object's side: `SluiceLimiter` honours a sent time only when its Worker's `env` has the
 *   binding `SLUICE_ALLOW_TEST_CLOCK = "true"`. Without it, a call that carries a time is refused
 *   (the caller's limiter counts it as a store failure), so a production object always decides with
 *   its own `Date.now()`. Set the binding only in a test Worker's configuration (Miniflare
 *   `bindings`, or a wrangler `[env.test.vars]` section) — never in the production `[vars]`.
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { DurableObjectStore, type DurableObjectStoreOptions, type SluiceLimiterNamespace, TEST_CLOCK } from "./store.js";

/** Options of {@link createTestDurableObjectStore}. */
export interface TestDurableObjectStoreOptions extends DurableObjectStoreOptions {
  /** The objects' "now", in epoch milliseconds. */
  clock: () => number;
}

/**
 * A `DurableObjectStore` whose objects decide at `clock()` (epoch ms) instead of their own clock.
 * Tests only: the objects must run in a Worker whose `env` has `SLUICE_ALLOW_TEST_CLOCK = "true"`.
 *
 * @example
 * ```ts
 * import { createTestDurableObjectStore } from "@sluice/cloudflare/testing";
 *
 * let now = Date.UTC(2026, 0, 1);
 * const store = createTestDurableObjectStore(env.SLUICE, { clock: () => now });
 * ```
 */
export function createTestDurableObjectStore(
  namespace: SluiceLimiterNamespace,
  options: TestDurableObjectStoreOptions,
): DurableObjectStore {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (env?.NODE_ENV === "production") {
    throw new SluiceConfigError('[sluice] [cloudflare] NODE_ENV must not be "production" for a test store with an injected clock; got "production"', {
      option: "NODE_ENV",
    });
  }
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`[sluice] [cloudflare] options must be an object like { clock }; got ${String(options)}`, { option: "options" });
  }
  if (typeof options.clock !== "function") {
    throw new SluiceConfigError(`[sluice] [cloudflare] clock must be a function returning epoch ms; got ${typeof options.clock}`, { option: "clock" });
  }
  const { clock, ...storeOptions } = options;
  const store = new DurableObjectStore(namespace, storeOptions);
  store[TEST_CLOCK] = clock;
  return store;
}
