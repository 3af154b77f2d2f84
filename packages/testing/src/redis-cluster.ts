/**
 * A private Redis Cluster for tests: N masters (3 by default), each a `redis-server
 * --cluster-enabled yes` started by {@link startRedisServer} (a free port of 127.0.0.1, no
 * persistence, its own working directory for `nodes.conf`), the 16384 slots split evenly between
 * them, and every node agreeing on the layout before it resolves. No replicas. `stop()` stops every
 * node. Like the single-server helper, it never talks to a Redis it did not start.
 *
 * @module
 */
import { createClient } from "redis";
import { type RedisServer, type RedisServerOptions, startRedisServer } from "./redis-server.js";

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /**
   * How many masters, each owning an equal share of the 16384 slots.
   * @default 3
   */
  masters?: number;
  /** The `redis-server` binary (see {@link RedisServerOptions.bin}). */
  bin?: string;
  /**
   * How long to wait until every node agrees on the layout (`cluster_state:ok`, every slot known).
   * @default 20_000
   */
  readyTimeoutMs?: number;
}

/** A running private Redis Cluster. */
export interface RedisCluster {
  /** The masters, in slot order (the first owns slot 0). */
  readonly nodes: readonly RedisServer[];
  /** `{ host, port }` of each master: the seed list for ioredis `new Cluster(...)`. */
  readonly rootNodes: readonly { host: string; port: number }[];
  /** `redis://127.0.0.1:<port>` of each master: the seed list for node-redis `createCluster({ rootNodes })`. */
  readonly urls: readonly string[];
  /** Sends a command to every master and resolves to their replies, in node order. */
  each(command: readonly string[]): Promise<unknown[]>;
  /** Stops every node; idempotent. */
  stop(): Promise<void>;
}

/** The number of hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** A plain connection to one node (RESP2), for the setup commands. */
function adminOf(url: string) {
  const admin = createClient({ url, RESP: 2 });
  admin.on("error", () => {}); // surfaced by the command that fails
  return admin;
}
type Admin = ReturnType<typeof adminOf>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Parses `CLUSTER INFO` into its fields. */
function clusterInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split("\r\n")) {
    const at = line.indexOf(":");
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

/**
 * Starts a Redis Cluster of `masters` private redis-servers and resolves once every node reports
 * `cluster_state:ok` and knows every other node. A missing `redis-server` fails like
 * {@link startRedisServer} (with the command that installs it).
 *
 * @example
 * ```ts
 * let cluster: RedisCluster;
 * beforeAll(async () => { cluster = await startRedisCluster(); });
 * afterAll(() => cluster.stop());
 * test("…", async () => {
 *   const client = new IORedis.Cluster([...cluster.rootNodes]);
 *   // …
 * });
 * ```
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const count = options.masters ?? 3;
  if (!Number.isInteger(count) || count < 1 || count > 16) {
    throw new Error(`[sluice] [testing] option masters must be an integer in 1..16, got ${String(options.masters)}`);
  }
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000;
  const nodes: RedisServer[] = [];
  const admins: Admin[] = [];
  const stop = async () => {
    await Promise.all(admins.splice(0).map((admin) => admin.destroy()));
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    const serverOptions: RedisServerOptions = {
      ...(options.bin === undefined ? {} : { bin: options.bin }),
      args: ["--cluster-enabled", "yes", "--cluster-node-timeout", "5000", "--cluster-config-file", "nodes.conf"],
    };
    nodes.push(...(await Promise.all(Array.from({ length: count }, () => startRedisServer(serverOptions)))));
    for (const node of nodes) {
      const admin = adminOf(node.url);
      await admin.connect();
      admins.push(admin);
    }
    const send = (admin: Admin, command: readonly string[]) => admin.sendCommand([...command]);
    // distinct config epochs up front (what redis-cli --cluster create does), then the slots, then MEET
    await Promise.all(admins.map((admin, i) => send(admin, ["CLUSTER", "SET-CONFIG-EPOCH", String(i + 1)])));
    await Promise.all(
      admins.map((admin, i) => {
        const first = Math.floor((i * CLUSTER_SLOTS) / count);
        const last = Math.floor(((i + 1) * CLUSTER_SLOTS) / count) - 1;
        return send(admin, ["CLUSTER", "ADDSLOTSRANGE", String(first), String(last)]);
      }),
    );
    const seed = admins[0] as Admin;
    for (const node of nodes.slice(1)) await send(seed, ["CLUSTER", "MEET", node.host, String(node.port)]);
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      const infos = await Promise.all(admins.map(async (admin) => clusterInfo(String(await send(admin, ["CLUSTER", "INFO"])))));
      const ready = infos.every(
        (info) =>
          info.cluster_state === "ok" &&
          info.cluster_known_nodes === String(count) &&
          info.cluster_slots_ok === String(CLUSTER_SLOTS),
      );
      if (ready) break;
      if (Date.now() > deadline) {
        throw new Error(
          `[sluice] [testing] the Redis Cluster on ports ${nodes.map((n) => n.port).join(", ")} did not become ready within ` +
            `${readyTimeoutMs} ms: ${JSON.stringify(infos.map((i) => [i.cluster_state, i.cluster_known_nodes, i.cluster_slots_ok]))}`,
        );
      }
      await sleep(50);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    nodes,
    rootNodes: nodes.map((node) => ({ host: node.host, port: node.port })),
    urls: nodes.map((node) => node.url),
    each: (command) => Promise.all(admins.map((admin) => admin.sendCommand([...command]))),
    stop: () => (stopped ??= stop()),
  };
}
