import { SluiceConfigError } from "@sluice/core";
import { ScriptStore, type ScriptStoreOptions, type Transport, clientClockOption, requireMethods } from "./script-store.js";

/** The slice of an ioredis client (`Redis` or `Cluster`) the store calls. */
export interface IORedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
  defineCommand(...args: never[]): unknown;
  /** `true` on a `Cluster`: after `NOSCRIPT` the script is loaded on each master (`nodes("master")`). */
  isCluster?: boolean;
  /** A `Cluster`'s connections to its nodes. */
  nodes?(role: "master"): ReadonlyArray<{ script(subcommand: "LOAD", script: string): Promise<unknown> }>;
}

/** ioredis's `pipeline()` (every version the store supports has it): commands sent in one write. */
interface Pipelining {
  pipeline?(commands: (string | number)[][]): { exec(): Promise<[Error | null, unknown][] | null> };
}

/** The slice of a node-redis client (`createClient()` or `createCluster()`, v4/v5) the store calls. */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  del(keys: string[]): Promise<number>;
  /** A cluster's masters (v5; `getMasters()` in v4): after `NOSCRIPT` the script is loaded on each. */
  readonly masters?: readonly unknown[];
  getMasters?(): readonly unknown[];
  /** A cluster's connection to one of its nodes. */
  nodeClient?(node: never): unknown;
}

/** A client of a node-redis cluster's node: the one method the store calls on it. */
interface NodeRedisNodeClient {
  scriptLoad(script: string): Promise<unknown>;
}

/** Loads a script on every master of an ioredis `Cluster`; `undefined` for a single node. */
function ioredisLoader(client: IORedisLike): ((script: string) => Promise<unknown>) | undefined {
  const nodes = client.nodes;
  if (client.isCluster !== true || typeof nodes !== "function") return undefined;
  return (script) => Promise.all(nodes.call(client, "master").map((node) => node.script("LOAD", script)));
}

/** One `EVALSHA` waiting for its turn's pipeline. */
interface Resend {
  readonly command: (string | number)[];
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/** Runs `flush` once the current turn's callbacks (and the promise reactions they start) are done. */
const afterThisTurn: (flush: () => void) => void =
  typeof globalThis.process?.nextTick === "function" ? (flush) => globalThis.process.nextTick(flush) : (flush) => queueMicrotask(flush);

/**
 * `EVALSHA` again after `NOSCRIPT`, on a single ioredis node: those of one turn go out in one
 * pipeline. A cold burst's `NOSCRIPT` replies arrive together, and a socket write per command is
 * the largest part of what a call costs this process (the CPU profile of a cold burst), so the
 * second round costs much less than the first. `undefined` without `pipeline()`: one write each.
 * Exported for its test only (not from the package's entry).
 * @internal
 */
export function ioredisResend(io: IORedisLike): ((sha: string, keys: string[], args: string[]) => Promise<unknown>) | undefined {
  const client = io as IORedisLike & Pipelining;
  const pipeline = client.pipeline;
  if (typeof pipeline !== "function") return undefined;
  let batch: Resend[] | undefined;
  const answer = (calls: readonly Resend[], replies: [Error | null, unknown][] | null) => {
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i] as Resend;
      const [error, reply] = replies?.[i] ?? [new Error("[sluice] [redis] the pipeline answered no reply"), undefined];
      if (error !== null) call.reject(error);
      else call.resolve(reply);
    }
  };
  const flush = () => {
    const calls = batch as Resend[];
    batch = undefined;
    pipeline
      .call(client, calls.map((c) => c.command))
      .exec()
      .then(
        (replies) => answer(calls, replies),
        (error: unknown) => {
          for (const call of calls) call.reject(error);
        },
      );
  };
  return (sha, keys, args) =>
    new Promise((resolve, reject) => {
      if (batch === undefined) {
        batch = [];
        afterThisTurn(flush);
      }
      batch.push({ command: ["evalsha", sha, keys.length, ...keys, ...args], resolve, reject });
    });
}

/** Loads a script on every master of a node-redis cluster; `undefined` for a single node. */
function nodeRedisLoader(client: NodeRedisLike): ((script: string) => Promise<unknown>) | undefined {
  const nodeClient = client.nodeClient;
  if (typeof nodeClient !== "function") return undefined;
  return async (script) => {
    const masters = client.masters ?? client.getMasters?.() ?? [];
    await Promise.all(
      masters.map(async (master) => {
        const node = (await nodeClient.call(client, master as never)) as NodeRedisNodeClient;
        return node.scriptLoad(script);
      }),
    );
  };
}

/** A connected ioredis or node-redis client. */
export type RedisClientLike = IORedisLike | NodeRedisLike;

function isNodeRedis(client: unknown): client is NodeRedisLike {
  return typeof (client as { evalSha?: unknown }).evalSha === "function";
}

/**
 * A store in Redis over TCP with an ioredis or node-redis client: one `EVALSHA` per decision, with
 * Redis's `TIME` as the clock. The client must be connected (node-redis: `await client.connect()`).
 * After a `SCRIPT FLUSH` (a restart, a failover) one load of the script per node is in flight at a
 * time (`EVAL` on a single node, `SCRIPT LOAD` on each master of a Cluster); the other calls wait
 * for it and send `EVALSHA` again.
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
    this.clientClock = clientClockOption(options);
    if (typeof client !== "object" || client === null) {
      throw new SluiceConfigError(`[sluice] [redis] client must be an ioredis or node-redis client; got ${String(client)}`, { option: "client" });
    }
    if (isNodeRedis(client)) {
      requireMethods(client, ["evalSha", "eval", "del"], "client", "a node-redis client");
      const loadScript = nodeRedisLoader(client);
      this.transport = {
        client,
        evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
        eval: (script, keys, args) => client.eval(script, { keys, arguments: args }),
        loadScript,
        // one connection to one node: commands run in the order they were sent
        inOrder: loadScript === undefined,
        del: (keys) => client.del(keys),
      };
    } else {
      requireMethods(client, ["evalsha", "eval", "del", "defineCommand"], "client", "an ioredis or node-redis client (for @upstash/redis use UpstashStore)");
      const io = client as IORedisLike;
      const loadScript = ioredisLoader(io);
      this.transport = {
        client: io,
        evalsha: (sha, keys, args) => io.evalsha(sha, keys.length, ...keys, ...args),
        eval: (script, keys, args) => io.eval(script, keys.length, ...keys, ...args),
        loadScript,
        inOrder: loadScript === undefined,
        resend: loadScript === undefined ? ioredisResend(io) : undefined,
        del: (keys) => io.del(...keys),
      };
    }
  }
}
