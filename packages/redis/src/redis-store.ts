import { SluiceConfigError } from "@sluice/core";
import { ScriptStore, type ScriptStoreOptions, type Transport, clientClockOption, requireMethods } from "./script-store.js";

/** The slice of an ioredis client (`Redis` or `Cluster`) the store calls. */
export interface IORedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
  defineCommand(...args: never[]): unknown;
}

/** The slice of a node-redis client (`createClient()` or `createCluster()`, v4/v5) the store calls. */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  del(keys: string[]): Promise<number>;
}

/** A connected ioredis or node-redis client. */
export type RedisClientLike = IORedisLike | NodeRedisLike;

function isNodeRedis(client: unknown): client is NodeRedisLike {
  return typeof (client as { evalSha?: unknown }).evalSha === "function";
}

/**
 * A store in Redis over TCP with an ioredis or node-redis client: one `EVALSHA` per decision, with
 * Redis's `TIME` as the clock. The client must be connected (node-redis: `await client.connect()`).
 *
 * @example
 * ```ts
 * import Redis from "ioredis";
 * import { RateLimiter, tokenBucket } from "@sluice/core";
 * import { RedisStore } from "@sluice/redis";
 *
 * const limiter = new RateLimiter({
 *   store: new RedisStore(new Redis(process.env.REDIS_URL!)),
 *   limits: tokenBucket({ capacity: 10, refillRate: 1 }),
 * });
 * ```
 */
export class RedisStore extends ScriptStore {
  protected readonly transport: Transport;
  protected readonly storeName = "RedisStore";
  protected readonly clientClock: boolean;

  /**
   * @param client a connected ioredis or node-redis client
   * @param [options.clock="server"] `"client"` sends this process's time with each call, for
   *   Redis-compatible services that refuse `TIME` inside scripts (see {@link ScriptStoreOptions})
   */
  constructor(client: RedisClientLike, options?: ScriptStoreOptions) {
    super();
    this.clientClock = clientClockOption(options, "RedisStore");
    if (typeof client !== "object" || client === null) {
      throw new SluiceConfigError("[sluice] [redis] RedisStore needs an ioredis or node-redis client");
    }
    if (isNodeRedis(client)) {
      requireMethods(client, ["evalSha", "eval", "del"], "RedisStore", "a node-redis client");
      this.transport = {
        evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
        eval: (script, keys, args) => client.eval(script, { keys, arguments: args }),
        del: (keys) => client.del(keys),
      };
    } else {
      requireMethods(
        client,
        ["evalsha", "eval", "del", "defineCommand"],
        "RedisStore",
        "an ioredis or node-redis client (for @upstash/redis use UpstashStore)",
      );
      const io = client as IORedisLike;
      this.transport = {
        evalsha: (sha, keys, args) => io.evalsha(sha, keys.length, ...keys, ...args),
        eval: (script, keys, args) => io.eval(script, keys.length, ...keys, ...args),
        del: (keys) => io.del(...keys),
      };
    }
  }
}
