import { type Decision, RateLimiter, type Store, fixedWindow, slidingWindow } from "@sluice/core";
import { type RedisCluster, startRedisCluster } from "@sluice/testing/redis-cluster";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient, createCluster } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore } from "./redis-store.js";
import { UpstashStore } from "./upstash-store.js";

// After SCRIPT FLUSH (a restart, a failover, a fresh server) a burst of concurrent decisions must
// not send the script once per call: one load per script per node is in flight, the other calls
// wait for it and send EVALSHA again. Counted on the servers with INFO commandstats.

/** Concurrent decisions per burst, split between two limiters (two scripts). */
const BURST = 3200;

let server: RedisServer;
let cluster: RedisCluster;
let bridge: UpstashBridge;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
  bridge = await startUpstashBridge({ redisUrl: server.url });
}, 60_000);
afterAll(async () => {
  await bridge?.close();
  await Promise.all([server?.stop(), cluster?.stop()]);
});

/** Script calls one node served: EVALSHA, EVAL and SCRIPT LOAD (calls that failed included). */
interface ScriptCalls {
  evalsha: number;
  eval: number;
  load: number;
}

/** Parses `INFO commandstats` into calls per command (`rejected_calls` included: a NOSCRIPT is a call). */
function scriptCalls(info: string): ScriptCalls {
  const calls = (name: string) => {
    const line = new RegExp(`^cmdstat_${name.replace("|", "\\|")}:(.*)$`, "m").exec(info);
    if (line === null) return 0;
    const field = (key: string) => Number(new RegExp(`(?:^|,)${key}=(\\d+)`).exec(line[1] as string)?.[1] ?? 0);
    return field("calls") + field("rejected_calls");
  };
  return { evalsha: calls("evalsha"), eval: calls("eval"), load: calls("script|load") };
}

/** One admin connection per node (the single server, or each master of the cluster). */
type Admins = { send(command: string[]): Promise<unknown[]>; close(): Promise<void> };

async function adminsOf(urls: readonly string[]): Promise<Admins> {
  const clients = await Promise.all(urls.map((url) => createClient({ url, RESP: 2 }).connect()));
  return {
    send: (command) => Promise.all(clients.map((c) => c.sendCommand(command))),
    close: async () => {
      await Promise.all(clients.map((c) => c.destroy()));
    },
  };
}

interface Target {
  name: string;
  /** Whether `store` runs on the three-master cluster (else the single server). */
  cluster: boolean;
  make(): Promise<{ store: Store; close(): Promise<void> }>;
}

const targets: Target[] = [
  {
    name: "ioredis",
    cluster: false,
    make: async () => {
      const client = new IORedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
      await client.connect();
      return { store: new RedisStore(client), close: async () => client.disconnect() };
    },
  },
  {
    name: "node-redis",
    cluster: false,
    make: async () => {
      const client = await createClient({ url: server.url, RESP: 2, disableOfflineQueue: true }).connect();
      return { store: new RedisStore(client), close: async () => void client.destroy() };
    },
  },
  {
    name: "ioredis Cluster",
    cluster: true,
    make: async () => {
      const client = new IORedis.Cluster([...cluster.rootNodes], { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 0 } });
      await client.connect();
      return { store: new RedisStore(client), close: async () => client.disconnect() };
    },
  },
  {
    name: "node-redis cluster",
    cluster: true,
    make: async () => {
      const client = await createCluster({ rootNodes: cluster.urls.map((url) => ({ url })), RESP: 2 }).connect();
      return { store: new RedisStore(client), close: async () => void client.destroy() };
    },
  },
  {
    name: "upstash (HTTP bridge)",
    cluster: false,
    make: async () => ({
      store: new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false })),
      close: async () => {},
    }),
  },
];

/** `BURST` concurrent decisions on distinct keys, half on each limiter; resolves to them and the time taken. */
async function burst(limiters: RateLimiter[], round: string): Promise<{ decisions: Decision[]; ms: number }> {
  const started = performance.now();
  const decisions = await Promise.all(
    Array.from({ length: BURST }, (_, i) => (limiters[i % limiters.length] as RateLimiter).limit(`${round}:${i}`)),
  );
  return { decisions, ms: performance.now() - started };
}

const sum = (calls: ScriptCalls[], key: keyof ScriptCalls) => calls.reduce((total, c) => total + c[key], 0);

describe.each(targets)("a cold burst of $name", (target) => {
  it(`sends one load per script per node and at most twice the warm burst's script calls (${BURST} decisions, 2 scripts)`, async () => {
    const admins = await adminsOf(target.cluster ? cluster.urls : [server.url]);
    const { store, close } = await target.make();
    try {
      const prefix = `cold-${target.name.replace(/\W+/g, "-")}`;
      // two configurations: two scripts, each loaded once per node
      const limiters = [
        new RateLimiter({ store, limits: fixedWindow({ limit: 1_000_000, window: "1h" }), prefix, timeoutMs: false }),
        new RateLimiter({ store, limits: slidingWindow({ limit: 1_000_000, window: "1h" }), prefix, timeoutMs: false }),
      ];
      const stats = async () => (await admins.send(["INFO", "commandstats"])).map((info) => scriptCalls(String(info)));

      await admins.send(["SCRIPT", "FLUSH"]);
      for (const limiter of limiters) expect((await limiter.limit("first")).reason).toBe("ok"); // loads both scripts

      await admins.send(["CONFIG", "RESETSTAT"]);
      const warm = await burst(limiters, "warm");
      const warmCalls = await stats();

      await admins.send(["SCRIPT", "FLUSH"]);
      await admins.send(["CONFIG", "RESETSTAT"]);
      const cold = await burst(limiters, "cold");
      const coldCalls = await stats();

      for (const { decisions } of [warm, cold]) {
        expect(decisions.filter((d) => d.reason !== "ok")).toEqual([]);
      }
      // warm: one EVALSHA per decision, nothing else
      expect(sum(warmCalls, "evalsha")).toBe(BURST);
      expect(sum(warmCalls, "eval") + sum(warmCalls, "load")).toBe(0);
      // cold: one load per script per node, by EVAL on a single node, by SCRIPT LOAD on a cluster
      for (const node of coldCalls) {
        if (target.cluster) expect(node).toMatchObject({ eval: 0, load: 2 });
        else expect(node).toMatchObject({ eval: 2, load: 0 });
      }
      // every decision: its EVALSHA (NOSCRIPT), then one more EVALSHA after the load (the loading
      // EVAL answers its own decision): at most twice the warm burst's round trips
      const coldTotal = sum(coldCalls, "evalsha") + sum(coldCalls, "eval") + sum(coldCalls, "load");
      expect(coldTotal).toBeLessThanOrEqual(2 * BURST + 2 * coldCalls.length);
      console.log(`${target.name}: warm ${warm.ms.toFixed(0)} ms, cold ${cold.ms.toFixed(0)} ms (${(cold.ms / warm.ms).toFixed(2)}x); cold script calls ${coldTotal}`);
    } finally {
      await close();
      await admins.close();
    }
  });
});
