import { connect } from "node:net";
import { RateLimiter, fixedWindow, slidingLog, tokenBucket, type Store } from "@sluice/core";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import IORedis from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";

// These tests stop, flush and count a redis-server of their own.
let server: RedisServer;
let bridge: UpstashBridge;
let admin: IORedis;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url });
  admin = new IORedis(server.url, { maxRetriesPerRequest: 1 });
  admin.on("error", () => {}); // the server is stopped on purpose below
});
afterAll(async () => {
  admin.disconnect();
  await bridge.close();
  await server.stop();
});

/**
 * Records the commands clients send while `fn` runs, through MONITOR (which tells a client's
 * commands from those a script runs: the latter come from "lua"). Returns command name → count.
 *
 * MONITOR is read from a plain socket, not an ioredis connection: ioredis's monitor mode can lose
 * track of its command queue when MONITOR lines race its own reply ("Command queue state error"),
 * which made this file fail now and then.
 */
async function clientCommands(fn: () => Promise<void>, from: "client" | "lua" = "client"): Promise<Record<string, number>> {
  const { port, hostname } = new URL(server.url);
  const socket = connect(Number(port), hostname);
  socket.setEncoding("utf8");
  const seen: string[] = [];
  const token = `marker-${Math.random()}`;
  let buffered = "";
  let marker: (() => void) | undefined;
  const markerSeen = new Promise<void>((resolve) => (marker = resolve));
  let started: (() => void) | undefined;
  const monitoring = new Promise<void>((resolve) => (started = resolve));
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf("\r\n")) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === "+OK") started?.();
      // +1733222222.123456 [0 127.0.0.1:54321] "ECHO" "marker-…"   or   [0 lua] "hmget" …
      const entry = /^\+\S+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (entry === null) continue;
      const args = [...(entry[2] as string).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1] as string);
      if (args[0]?.toLowerCase() === "echo" && args[1] === token) marker?.();
      else if ((entry[1] === "lua") === (from === "lua")) seen.push(String(args[0]).toLowerCase());
    }
  });
  socket.write("MONITOR\r\n");
  await monitoring;
  try {
    await fn();
    await admin.echo(token); // every command sent before the marker has been seen once it arrives
    await markerSeen;
  } finally {
    socket.destroy();
  }
  const counts: Record<string, number> = {};
  for (const name of seen) counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

const tier = () => [
  tokenBucket({ capacity: 10, refillRate: 1, name: "burst" }),
  fixedWindow({ limit: 30, window: "1m", name: "per-minute" }),
  slidingLog({ limit: 1000, window: "1d", name: "per-day" }),
];

type Client = { name: string; make: () => Promise<{ store: Store; close: () => Promise<void> }> };
const clients: Client[] = [
  {
    name: "ioredis",
    make: async () => {
      const client = new IORedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
      client.on("error", () => {}); // failures surface through the limiter
      await new Promise((resolve) => client.once("ready", resolve));
      return { store: new RedisStore(client), close: async () => client.disconnect() };
    },
  },
  {
    name: "node-redis",
    make: async () => {
      const client = createClient({ url: server.url, RESP: 2, disableOfflineQueue: true });
      client.on("error", () => {});
      await client.connect();
      return { store: new RedisStore(client), close: async () => client.destroy() };
    },
  },
  {
    name: "upstash",
    make: async () => ({
      store: new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false })),
      close: async () => {},
    }),
  },
];

describe.each(clients)("$name", ({ name, make }) => {
  it("sends exactly one script call per decision, three limits included", async () => {
    const { store, close } = await make();
    const limiter = new RateLimiter({ store, limits: tier(), prefix: `count-${name}` });
    await limiter.limit("warm"); // loads the script once if needed
    bridge.resetCounts();
    const sent = await clientCommands(async () => {
      for (let i = 0; i < 25; i++) expect((await limiter.limit(`user:${i % 3}`)).reason).toBe("ok");
    });
    // a client's own connection checks are not the store's calls (node-redis may send INFO when it
    // checks a connection again on a loaded machine)
    delete sent.info;
    expect(sent).toEqual({ evalsha: 25 });
    if (name === "upstash") expect(bridge.counts.total).toBe(25);
    await close();
  });

  it("recovers from SCRIPT FLUSH with one EVAL, then goes back to EVALSHA", async () => {
    const { store, close } = await make();
    const limiter = new RateLimiter({ store, limits: tier(), prefix: `flush-${name}` });
    expect((await limiter.limit("k")).remaining).toBe(9);
    await admin.script("FLUSH");
    const sent = await clientCommands(async () => {
      expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "ok", remaining: 8 });
      expect((await limiter.limit("k")).remaining).toBe(7);
    });
    expect(sent).toEqual({ evalsha: 2, eval: 1 });
    await close();
  });

  it("falls back to memory while redis-server is down, and uses Redis again once it is back", async () => {
    const { store, close } = await make();
    const limiter = new RateLimiter({ store, limits: fixedWindow({ limit: 2, window: "1h" }), prefix: `down-${name}` });
    expect((await limiter.limit("k")).reason).toBe("ok");
    await server.stop();
    try {
      const down = [await limiter.limit("k"), await limiter.limit("k"), await limiter.limit("k")];
      // the per-instance fallback applies the same limits (from empty state): looser, but limiting goes on
      expect(down.map((d) => [d.allowed, d.reason])).toEqual([
        [true, "store-error"],
        [true, "store-error"],
        [false, "store-error"],
      ]);
    } finally {
      await server.start();
    }
    // the restarted server is empty: a decision from Redis again
    let back = await limiter.limit("k");
    for (let i = 0; i < 50 && back.reason !== "ok"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      back = await limiter.limit("k");
    }
    expect(back).toMatchObject({ allowed: true, reason: "ok", remaining: 1 });
    await close();
  });
});

describe("keys and TTLs", () => {
  it("gives every key a TTL, renews it about once a second on a hot key, and lets idle keys vanish", async () => {
    const client = new IORedis(server.url);
    client.on("error", () => {});
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      limits: [fixedWindow({ limit: 100, window: 200, name: "fixed" }), slidingLog({ limit: 100, window: 200, name: "log" })],
      prefix: "ttl",
    });
    const scriptCalls = await clientCommands(async () => {
      for (let i = 0; i < 20; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    }, "lua");
    // one key per identifier, the log included; its TTL is set once (it reaches past the window by a second)
    expect(scriptCalls.pexpire).toBeGreaterThanOrEqual(1);
    expect(scriptCalls.pexpire).toBeLessThanOrEqual(2);
    expect(await admin.keys("*ttl:*")).toEqual(["{ttl::k}"]);
    const hashTtl = await admin.pttl("{ttl::k}");
    expect(hashTtl).toBeGreaterThan(0);
    expect(hashTtl).toBeLessThanOrEqual(200 + 1000);
    expect((await admin.hkeys("{ttl::k}")).sort()).toEqual(["@expires", "fixed|fw", "log|sl"]);
    await new Promise((resolve) => setTimeout(resolve, 1400));
    expect(await admin.exists("{ttl::k}")).toBe(0);
    client.disconnect();
  });
});

describe("UpstashStore under concurrency", () => {
  it("batches 100 concurrent decisions into fewer HTTP requests (auto-pipelining), each still one script call", async () => {
    const limiter = new RateLimiter({
      store: new UpstashStore(new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false })),
      limits: fixedWindow({ limit: 50, window: "1h" }),
      prefix: "concurrent",
    });
    await limiter.limit("warm");
    bridge.resetCounts();
    const sent = await clientCommands(async () => {
      const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.limit("k")));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(50);
      expect(decisions.every((d) => d.reason === "ok" || d.reason === "limit")).toBe(true);
    });
    expect(sent).toEqual({ evalsha: 100 });
    expect(bridge.counts.total).toBeLessThan(100);
    expect(bridge.counts.byPath["/pipeline"]).toBe(bridge.counts.total);
  });
});

describe("a hung server", () => {
  it("times out through the limiter's timeoutMs (reason timeout) with a default ioredis client", async () => {
    const client = new IORedis(server.url);
    client.on("error", () => {});
    await new Promise((resolve) => client.once("ready", resolve));
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      limits: fixedWindow({ limit: 5, window: "1h" }),
      prefix: "hung",
      timeoutMs: 150,
    });
    expect((await limiter.limit("k")).reason).toBe("ok");
    await server.pause();
    try {
      const d = await limiter.limit("k");
      expect(d).toMatchObject({ allowed: true, reason: "timeout", remaining: 4 });
    } finally {
      await server.resume();
    }
    client.disconnect();
  });
});
