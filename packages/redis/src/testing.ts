/**
 * Test-only entry, `@sluice/redis/testing`: stores whose clock is a function you control, so one
 * conformance suite can stand exactly on a window edge.
 *
 * How it is fenced off from production:
 * - the production classes never send a time: the script then reads Redis `TIME`. Only a store
 *   made here passes a fixed "now" to the script (its third argument);
 * - the hook is not an option of `UpstashStore`/`RedisStore`: it exists only in this entry point;
 * - these factories refuse to run when `NODE_ENV` is `"production"`.
 * A caller with a skewed clock therefore cannot move Redis's time; only code that imports this
 * module on purpose can.
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { type RedisClientLike, RedisStore } from "./redis-store.js";
import { ScriptStore, TEST_CLOCK } from "./script-store.js";
import { type UpstashRedisLike, UpstashStore } from "./upstash-store.js";

function fence<S extends ScriptStore>(store: S, options: { clock: () => number }): S {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (env?.NODE_ENV === "production") {
    throw new SluiceConfigError('[sluice] [redis] NODE_ENV must not be "production" for a test store with an injected clock; got "production"', {
      option: "NODE_ENV",
    });
  }
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`[sluice] [redis] options must be an object like { clock }; got ${String(options)}`, { option: "options" });
  }
  const { clock } = options;
  if (typeof clock !== "function") {
    throw new SluiceConfigError(`[sluice] [redis] clock must be a function returning epoch ms; got ${typeof clock}`, { option: "clock" });
  }
  store[TEST_CLOCK] = clock;
  return store;
}

/**
 * An `UpstashStore` whose "now" is `clock()` (epoch ms) instead of Redis `TIME`. Tests only.
 *
 * @example
 * ```ts
 * let now = Date.UTC(2026, 0, 1);
 * const store = createTestUpstashStore(redis, { clock: () => now });
 * ```
 */
export function createTestUpstashStore(redis: UpstashRedisLike, options: { clock: () => number }): UpstashStore {
  return fence(new UpstashStore(redis), options);
}

/**
 * A `RedisStore` whose "now" is `clock()` (epoch ms) instead of Redis `TIME`. Tests only.
 *
 * @example
 * ```ts
 * const store = createTestRedisStore(ioredis, { clock: () => now });
 * ```
 */
export function createTestRedisStore(client: RedisClientLike, options: { clock: () => number }): RedisStore {
  return fence(new RedisStore(client), options);
}
