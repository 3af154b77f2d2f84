/**
 * Measures what the limiter's default `timeoutMs` must tolerate, and what it must still catch:
 *
 * - a **cold burst**: a fresh process, a fresh connection and an empty script cache (`SCRIPT
 *   FLUSH`), then 3,200 concurrent decisions on distinct keys — on a 3-master Redis Cluster
 *   (ioredis and node-redis) and on Upstash through the REST bridge with a cold HTTP connection;
 * - a **hung store**: a TCP server that accepts connections and never answers.
 *
 * Each cold burst runs in its own child process (cold JIT, cold connections, like a cold start)
 * through a limiter with default options, and reports the latency of every decision, how many took
 * longer than a hard 1 s timeout would allow, and how many went to the fallback under the default
 * rule; each scenario runs with 0 and with 2 busy-loop processes beside it. Prints a Markdown table.
 *
 * Run: `pnpm --filter @sluice/redis measure:timeouts [runs]` (default 5 runs per row).
 *
 * @module
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { DEFAULT_TIMEOUT_MS, type Decision, RateLimiter, type Store, fixedWindow } from "@sluice/core";
import { startBusyLoops } from "@sluice/testing/busy-loops";
import { startRedisCluster } from "@sluice/testing/redis-cluster";
import { startRedisServer } from "@sluice/testing/redis-server";
import { startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient, createCluster } from "redis";
import { RedisStore, UpstashStore } from "../src/index.js";

const BURST = 3200;

type Client = "ioredis-cluster" | "node-redis-cluster" | "upstash";

interface Env {
  rootNodes: { host: string; port: number }[];
  clusterUrls: string[];
  bridgeUrl: string;
  bridgeToken: string;
}

/** Child side: one cold burst; prints `{ connectMs, latencies, fallbacks }` as JSON. */
async function child(client: Client, env: Env): Promise<void> {
  const started = performance.now();
  let store: Store;
  let close: () => Promise<void> | void;
  if (client === "ioredis-cluster") {
    const c = new IORedis.Cluster(env.rootNodes, { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 0 } });
    await c.connect();
    store = new RedisStore(c);
    close = () => c.disconnect();
  } else if (client === "node-redis-cluster") {
    const c = await createCluster({ rootNodes: env.clusterUrls.map((url) => ({ url })), RESP: 2 }).connect();
    store = new RedisStore(c);
    close = () => c.destroy();
  } else {
    // nothing sent before the burst: its first requests open the HTTP connections
    store = new UpstashStore(new UpstashRedis({ url: env.bridgeUrl, token: env.bridgeToken, retry: false }));
    close = () => {};
  }
  const connectMs = performance.now() - started;
  // default options: the default timeout and its rule
  const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 1_000_000, window: "1h" }), prefix: `m${process.pid}` });
  const latencies = new Array<number>(BURST);
  let fallbacks = 0;
  const burstStart = performance.now();
  await Promise.all(
    Array.from({ length: BURST }, (_, i) =>
      limiter.limit(`k${i}`).then((d: Decision) => {
        if (d.reason !== "ok") fallbacks++;
        latencies[i] = performance.now() - burstStart;
      }),
    ),
  );
  await close();
  process.stdout.write(JSON.stringify({ connectMs, latencies, fallbacks }));
}

function runChild(client: Client, env: Env): Promise<{ connectMs: number; latencies: number[]; fallbacks: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "child", client, JSON.stringify(env)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    p.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited with ${code}`))));
  });
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
const fmt = (ms: number) => `${Math.round(ms)}`;

/** Fallback time of a store that never answers, through a limiter with default options. */
async function hung(client: "ioredis" | "node-redis" | "upstash", port: number): Promise<number> {
  let store: Store;
  let close: () => void = () => {};
  if (client === "ioredis") {
    const c = new IORedis({ port, host: "127.0.0.1", maxRetriesPerRequest: 0 });
    c.on("error", () => {});
    store = new RedisStore(c);
    close = () => c.disconnect();
  } else if (client === "node-redis") {
    const c = createClient({ url: `redis://127.0.0.1:${port}`, RESP: 2 });
    c.on("error", () => {});
    void c.connect().catch(() => {});
    store = new RedisStore(c);
    close = () => void c.destroy();
  } else {
    store = new UpstashStore(new UpstashRedis({ url: `http://127.0.0.1:${port}`, token: "t", retry: false }));
  }
  const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 10, window: "1h" }) });
  const started = performance.now();
  const d = await limiter.limit("k");
  const ms = performance.now() - started;
  if (d.reason !== "timeout") throw new Error(`hung ${client}: ${d.reason}`);
  close();
  return ms;
}

async function main(runs: number): Promise<void> {
  const cluster = await startRedisCluster();
  const server = await startRedisServer();
  const bridge = await startUpstashBridge({ redisUrl: server.url });
  const admin = await createClient({ url: server.url, RESP: 2 }).connect();
  const env: Env = { rootNodes: [...cluster.rootNodes], clusterUrls: [...cluster.urls], bridgeUrl: bridge.url, bridgeToken: bridge.token };
  const silent = createServer(() => {}); // accepts, never answers
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const silentPort = (silent.address() as { port: number }).port;
  const rows: string[] = [];
  try {
    for (const loops of [0, 2]) {
      const busy = await startBusyLoops(loops);
      try {
        for (const client of ["ioredis-cluster", "node-redis-cluster", "upstash"] as const) {
          const maxes: number[] = [];
          const p50s: number[] = [];
          const p99s: number[] = [];
          const connects: number[] = [];
          const overOneSecond: number[] = [];
          const fallbacks: number[] = [];
          for (let run = 0; run < runs; run++) {
            await (client === "upstash" ? admin.scriptFlush() : cluster.each(["SCRIPT", "FLUSH"]));
            const result = await runChild(client, env);
            const { connectMs, latencies } = result;
            overOneSecond.push(latencies.filter((ms) => ms > DEFAULT_TIMEOUT_MS).length);
            fallbacks.push(result.fallbacks);
            const sorted = [...latencies].sort((a, b) => a - b);
            maxes.push(sorted[sorted.length - 1] as number);
            p50s.push(pct(sorted, 50));
            p99s.push(pct(sorted, 99));
            connects.push(connectMs);
          }
          const range = (xs: number[]) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`;
          rows.push(
            `| ${client} | ${loops} | ${range(connects)} | ${range(p50s)} | ${range(p99s)} | ${range(maxes)} | ${overOneSecond.join(", ")} | ${fallbacks.join(", ")} |`,
          );
          console.error(rows[rows.length - 1]);
        }
        for (const client of ["ioredis", "node-redis", "upstash"] as const) {
          const times: number[] = [];
          for (let run = 0; run < runs; run++) times.push(await hung(client, silentPort));
          rows.push(`| hung ${client} | ${loops} | | | | ${fmt(Math.min(...times))}–${fmt(Math.max(...times))} | | all (\`reason: "timeout"\`) |`);
          console.error(rows[rows.length - 1]);
        }
      } finally {
        await busy.stop();
      }
    }
  } finally {
    silent.close();
    admin.destroy();
    await bridge.close();
    await server.stop();
    await cluster.stop();
  }
  console.log(`${runs} runs per row, ${BURST} concurrent decisions per burst, default limiter options; ms from the burst's start (min–max over the runs)\n`);
  console.log(
    "| scenario | busy loops | connect | p50 | p99 | last decision | decisions > 1 s, per run | fallbacks, per run |\n|---|---|---|---|---|---|---|---|",
  );
  console.log(rows.join("\n"));
}

if (process.argv[2] === "child") {
  await child(process.argv[3] as Client, JSON.parse(process.argv[4] as string) as Env);
  process.exit(0);
} else {
  await main(Number(process.argv[2] ?? 5));
  process.exit(0);
}
