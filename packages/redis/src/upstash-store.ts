import { ScriptStore, type ScriptStoreOptions, type Transport, clientClockOption, requireMethods } from "./script-store.js";

/**
 * The narrowest slice of an `@upstash/redis` client the store calls, so any version of the client
 * fits without a type clash.
 */
export interface UpstashRedisLike {
  evalsha(sha1: string, keys: string[], args: unknown[]): Promise<unknown>;
  eval(script: string, keys: string[], args: unknown[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
}

/**
 * A store in Redis over HTTP through `@upstash/redis`: one HTTP request per decision (fewer under
 * concurrency, with the client's auto-pipelining). Runs in edge runtimes: no Node APIs. The clock
 * is Redis's `TIME`, so instances with skewed clocks agree. After a `SCRIPT FLUSH`, one `EVAL` per
 * script is in flight at a time; the other calls wait for it and send `EVALSHA` again.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { UpstashStore } from "@sluice/redis";
 *
 * const limiter = new RateLimiter({
 *   store: new UpstashStore(Redis.fromEnv()),
 *   limits: slidingWindow({ limit: 100, window: "1m" }),
 * });
 * ```
 */
export class UpstashStore extends ScriptStore {
  protected readonly transport: Transport;
  protected readonly storeName = "UpstashStore";
  protected readonly clientClock: boolean;

  /**
   * @param redis an `@upstash/redis` client
   * @param [options.clock="server"] `"client"` sends this process's time with each call, for
   *   Redis-compatible services that refuse `TIME` inside scripts (see {@link ScriptStoreOptions})
   */
  constructor(redis: UpstashRedisLike, options?: ScriptStoreOptions) {
    super();
    this.clientClock = clientClockOption(options);
    requireMethods(redis, ["evalsha", "eval", "del"], "redis", "an @upstash/redis client");
    this.transport = {
      client: redis,
      evalsha: (sha, keys, args) => redis.evalsha(sha, keys, args),
      eval: (script, keys, args) => redis.eval(script, keys, args),
      del: (keys) => redis.del(...keys),
    };
  }
}
