/**
 * One OS process of the concurrency test: an HTTP server (node:http, through core's `createGuard`)
 * whose routes share one concurrency limit per key in Redis with every other process:
 *
 * - `GET /slow`: limited to LIMIT in flight; the handler counts itself in with `INCR` on a Redis
 *   counter shared by every process (so the count is across processes), sleeps HANDLER_MS, counts
 *   itself out with `DECR`, and answers the count it saw. The lease is released once the response
 *   has been written (`createGuard`'s `release()`).
 * - `GET /stream`: limited to 1 in flight; the body is streamed in 4 chunks over about 200 ms and
 *   the lease is released when the last chunk has been written.
 *
 * Prints `READY <port>` once listening. Configuration comes from the environment.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { RateLimiter, concurrency, createGuard } from "@sluice/core";
import IORedis from "ioredis";
import { RedisStore } from "../src/index.js";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`concurrency-server: ${name} is not set`);
  return value;
};
const redisUrl = env("REDIS_URL");
const prefix = env("PREFIX");
const limit = Number(env("LIMIT"));
const handlerMs = Number(env("HANDLER_MS"));
const counterKey = `${prefix}:running`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const redis = new IORedis(redisUrl);
const counter = new IORedis(redisUrl);
const failures: unknown[] = [];
const slowGuard = createGuard({
  limiter: new RateLimiter({ store: new RedisStore(redis), limits: concurrency({ limit, name: "exports" }), prefix, onStoreFailure: (e) => failures.push(e) }),
  key: () => "one-key",
});
const streamGuard = createGuard({
  limiter: new RateLimiter({ store: new RedisStore(redis), limits: concurrency({ limit: 1, name: "stream" }), prefix, onStoreFailure: (e) => failures.push(e) }),
  key: () => "one-key",
});

const server = createServer(async (req, res) => {
  const guard = req.url === "/stream" ? streamGuard : slowGuard;
  const { response, headers, release } = await guard(new Request(`http://localhost${req.url}`));
  const head = Object.fromEntries(headers);
  if (response !== undefined) {
    res.writeHead(response.status, { ...head, "content-type": response.headers.get("content-type") ?? "" });
    res.end(await response.text());
    return;
  }
  // released once the response has been produced (for the stream: before its end is written)
  let released: Promise<void> | undefined;
  const free = () => (released ??= release());
  try {
    if (req.url === "/stream") {
      res.writeHead(200, { ...head, "content-type": "text/plain" });
      for (let i = 0; i < 4; i++) {
        await sleep(50);
        res.write(`chunk ${i}\n`);
      }
      // the slot is free before the client sees the end of the body
      await free();
      res.end();
      return;
    }
    const running = await counter.incr(counterKey);
    await sleep(handlerMs);
    await counter.decr(counterKey);
    const body = JSON.stringify({ running, pid: process.pid });
    res.writeHead(200, { ...head, "content-type": "application/json" });
    await new Promise<void>((resolve) => res.end(body, resolve));
  } finally {
    await free();
  }
});

server.listen(0, "127.0.0.1", () => {
  console.log(`READY ${(server.address() as AddressInfo).port}`);
});

process.on("SIGTERM", () => {
  if (failures.length > 0) console.error(`store failures: ${failures.map(String).join("; ")}`);
  server.close();
  server.closeAllConnections();
  redis.disconnect();
  counter.disconnect();
  process.exit(failures.length > 0 ? 2 : 0);
});
