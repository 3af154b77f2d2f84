import { createServer as createHttpServer } from "node:http";
import { type Server, type Socket, createServer } from "node:net";
import { type Decision, DEFAULT_TIMEOUT_MS, RateLimiter, type Store, fixedWindow } from "@sluice/core";
import { startBusyLoops } from "@sluice/testing/busy-loops";
import { type RedisCluster, startRedisCluster } from "@sluice/testing/redis-cluster";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient, createCluster } from "redis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GRACE_MS } from "./liveness.js";
import { RedisStore } from "./redis-store.js";
import { UpstashStore } from "./upstash-store.js";

// The limiter's default timeout over the Redis stores: a cold burst on a loaded machine is
// answered, a store that never answers falls back after timeoutMs (see README "Timeouts").

describe("a cold burst on a 3-master cluster with two busy-loop processes beside it, default options", () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(() => cluster?.stop());

  const clients: { name: string; make(): Promise<{ store: Store; close(): void }> }[] = [
    {
      name: "ioredis Cluster",
      make: async () => {
        const client = new IORedis.Cluster([...cluster.rootNodes], { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 0 } });
        await client.connect();
        return { store: new RedisStore(client), close: () => client.disconnect() };
      },
    },
    {
      name: "node-redis cluster",
      make: async () => {
        const client = await createCluster({ rootNodes: cluster.urls.map((url) => ({ url })), RESP: 2 }).connect();
        return { store: new RedisStore(client), close: () => void client.destroy() };
      },
    },
  ];

  it.each(clients)("$name: 3,200 concurrent decisions after SCRIPT FLUSH, none from the fallback", async ({ make }) => {
    const { store, close } = await make(); // a fresh connection
    await cluster.each(["SCRIPT", "FLUSH"]);
    await cluster.each(["CONFIG", "RESETSTAT"]);
    // what the store failures said, by message (a timeout's says whether the server was heard at
    // all: "waited N ms while the store answered other calls"), and when, for a failure's report
    const failures = new Map<string, number>();
    const startedAt = performance.now();
    let firstFailureMs: number | undefined;
    const onStoreFailure = (error: unknown) => {
      firstFailureMs ??= Math.round(performance.now() - startedAt);
      const message = String((error as Error | null)?.message ?? error);
      failures.set(message, (failures.get(message) ?? 0) + 1);
    };
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1_000_000, window: "1h" }), prefix: `loaded-${Math.random()}`, onStoreFailure });
    const loops = await startBusyLoops(2);
    let decisions: Decision[];
    try {
      decisions = await Promise.all(Array.from({ length: 3200 }, (_, i) => limiter.limit(`k${i}`)));
    } finally {
      await loops.stop();
      close();
    }
    const reasons: Record<string, number> = {};
    for (const d of decisions) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
    const report = `store failures (first after ${firstFailureMs} ms): ${JSON.stringify([...failures])}`;
    expect(reasons, report).toEqual({ ok: 3200 });
    // and the script was loaded once per node
    const loads = (await cluster.each(["INFO", "commandstats"])).map((info) => /cmdstat_script\|load:calls=(\d+)/.exec(String(info))?.[1]);
    expect(loads).toEqual(["1", "1", "1"]);
  });
});

describe("a store that never answers falls back within the default timeout (and one turn of the event loop)", () => {
  // a TCP server that accepts connections and never answers, and an HTTP server that never responds
  const sockets = new Set<Socket>();
  let silent: Server;
  let silentHttp: ReturnType<typeof createHttpServer>;
  let port: number;
  let httpPort: number;
  beforeAll(async () => {
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => {});
    });
    silentHttp = createHttpServer(() => {});
    await Promise.all([
      new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve)),
      new Promise<void>((resolve) => silentHttp.listen(0, "127.0.0.1", resolve)),
    ]);
    port = (silent.address() as { port: number }).port;
    httpPort = (silentHttp.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    silentHttp.closeAllConnections();
    await Promise.all([new Promise((resolve) => silent.close(resolve)), new Promise((resolve) => silentHttp.close(resolve))]);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const stores: { name: string; make(): { store: Store; close(): void } }[] = [
    {
      name: "ioredis",
      make: () => {
        const client = new IORedis({ host: "127.0.0.1", port, maxRetriesPerRequest: 0 });
        client.on("error", () => {});
        return { store: new RedisStore(client), close: () => client.disconnect() };
      },
    },
    {
      name: "node-redis",
      make: () => {
        const client = createClient({ url: `redis://127.0.0.1:${port}`, RESP: 2 });
        client.on("error", () => {});
        void client.connect().catch(() => {});
        return { store: new RedisStore(client), close: () => void client.destroy() };
      },
    },
    {
      name: "@upstash/redis",
      make: () => ({
        store: new UpstashStore(new UpstashRedis({ url: `http://127.0.0.1:${httpPort}`, token: "t", retry: false })),
        close: () => {},
      }),
    },
  ];

  it.each(stores)("$name", async ({ make }) => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const { store, close } = make();
    try {
      const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 5, window: "1h" }) });
      const decision = limiter.limit("k");
      let settled = false;
      void decision.then(() => (settled = true));
      await vi.advanceTimersByTimeAsync(DEFAULT_TIMEOUT_MS);
      expect(settled).toBe(false); // at 1000 ms: the turn that reads any reply left unread
      await vi.advanceTimersByTimeAsync(GRACE_MS);
      expect(settled).toBe(true);
      expect(await decision).toMatchObject({ allowed: true, reason: "timeout", remaining: 4 });
    } finally {
      close();
    }
  });
});
