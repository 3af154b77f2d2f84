import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "@upstash/redis";
import { createClient } from "redis";
import { afterAll, afterEach, describe, expect, test, vi } from "vitest";
import setupRedisGlobal from "./redis-global-setup.js";
import {
  REDIS_SERVER_INSTALL_HINT,
  type RedisServer,
  freePort,
  pingRedis,
  resolveRedisServerBin,
  startRedisServer,
} from "./redis-server.js";

const started: RedisServer[] = [];
async function start(...args: Parameters<typeof startRedisServer>): Promise<RedisServer> {
  const server = await startRedisServer(...args);
  started.push(server);
  return server;
}
afterAll(async () => {
  await Promise.all(started.map((server) => server.stop()));
});
afterEach(() => {
  vi.unstubAllEnvs();
});

async function withClient<T>(url: string, fn: (client: ReturnType<typeof createClient>) => Promise<T>): Promise<T> {
  const client = createClient({ url, RESP: 2 });
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

/** Whether something can bind the port right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/** The scheduler state letter of a process (Linux /proc): "T" when stopped by SIGSTOP. */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).charAt(0);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return processState(pid) !== "Z";
  } catch {
    return false;
  }
}

describe("startRedisServer", () => {
  test("starts a private, non-persistent server on a free 127.0.0.1 port that answers PING", async () => {
    const server = await start();
    expect(server.host).toBe("127.0.0.1");
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(server.running).toBe(true);
    expect(server.paused).toBe(false);
    expect(server.pid).toEqual(expect.any(Number));
    expect(isAlive(server.pid!)).toBe(true);
    expect(await pingRedis(server.port)).toBe(true);
    await withClient(server.url, async (client) => {
      expect(await client.sendCommand(["CONFIG", "GET", "save"])).toEqual(["save", ""]);
      expect(await client.sendCommand(["CONFIG", "GET", "appendonly"])).toEqual(["appendonly", "no"]);
      expect(await client.sendCommand(["CONFIG", "GET", "bind"])).toEqual(["bind", "127.0.0.1"]);
      expect(await client.sendCommand(["CONFIG", "GET", "port"])).toEqual(["port", String(server.port)]);
      expect(await client.sendCommand(["DBSIZE"])).toBe(0);
    });
  });

  test("two servers run at once, on different ports, with separate data", async () => {
    const [a, b] = await Promise.all([start(), start()]);
    expect(a!.port).not.toBe(b!.port);
    await withClient(a!.url, (client) => client.sendCommand(["SET", "only-in-a", "1"]));
    expect(await withClient(a!.url, (client) => client.sendCommand(["GET", "only-in-a"]))).toBe("1");
    expect(await withClient(b!.url, (client) => client.sendCommand(["GET", "only-in-a"]))).toBeNull();
  });

  test("extra args are passed to redis-server", async () => {
    const server = await start({ args: ["--maxmemory", "12mb"] });
    expect(await withClient(server.url, (client) => client.sendCommand(["CONFIG", "GET", "maxmemory"]))).toEqual([
      "maxmemory",
      String(12 * 1024 * 1024),
    ]);
  });

  test("stop() ends the process and frees the port; it is idempotent", async () => {
    const server = await start();
    const { port } = server;
    const pid = server.pid!;
    await server.stop();
    expect(server.running).toBe(false);
    expect(server.pid).toBeUndefined();
    expect(isAlive(pid)).toBe(false);
    expect(await pingRedis(port)).toBe(false);
    expect(await portIsFree(port)).toBe(true);
    await server.stop();
    expect(server.running).toBe(false);
  });

  test("start() after stop() comes back on the same port, empty (nothing is persisted)", async () => {
    const server = await start();
    const { port, url } = server;
    await withClient(url, (client) => client.sendCommand(["SET", "k", "v"]));
    await withClient(url, (client) => client.sendCommand(["SCRIPT", "LOAD", "return 1"]));
    await server.stop();
    await server.start();
    expect(server.port).toBe(port);
    expect(server.url).toBe(url);
    expect(await pingRedis(port)).toBe(true);
    await withClient(url, async (client) => {
      expect(await client.sendCommand(["GET", "k"])).toBeNull();
      expect(await client.sendCommand(["SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"])).toEqual([0]);
    });
    await expect(server.start()).rejects.toThrow(/already running/);
    await server.restart();
    expect(server.port).toBe(port);
    expect(await pingRedis(port)).toBe(true);
  });

  test("a fixed port is used as given", async () => {
    const port = await freePort();
    const server = await start({ port });
    expect(server.port).toBe(port);
    expect(await pingRedis(port)).toBe(true);
    // The port is taken by `server`: the new process fails to bind, and the PONG of the other
    // server is not mistaken for its own.
    await expect(startRedisServer({ port })).rejects.toThrow(/exited before answering PING on port/);
    await expect(startRedisServer({ port: 70_000 })).rejects.toThrow(/option port must be an integer in 1\.\.65535/);
  });

  test("kill() ends the process abruptly (a crash)", async () => {
    const server = await start();
    const pid = server.pid!;
    await server.kill();
    expect(server.running).toBe(false);
    expect(isAlive(pid)).toBe(false);
    await server.start();
    expect(await pingRedis(server.port)).toBe(true);
    // killed from outside: noticed, and startable again on the same port
    const port = server.port;
    const outsidePid = server.pid!;
    process.kill(outsidePid, "SIGKILL");
    for (let i = 0; i < 100 && server.running; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.running).toBe(false);
    await server.start();
    expect(server.port).toBe(port);
    expect(server.pid).not.toBe(outsidePid);
    expect(await pingRedis(port)).toBe(true);
  });

  test("pause() freezes the process (a hung server) and resume() thaws it", async () => {
    const server = await start();
    const pid = server.pid!;
    await server.pause();
    expect(server.paused).toBe(true);
    expect(processState(pid)).toBe("T");
    expect(await pingRedis(server.port, 200)).toBe(false);
    await server.resume();
    expect(server.paused).toBe(false);
    expect(processState(pid)).not.toBe("T");
    expect(await pingRedis(server.port)).toBe(true);
    await server.pause();
    await server.stop(); // a paused server still stops
    expect(isAlive(pid)).toBe(false);
    await expect(server.pause()).rejects.toThrow(/is not running/);
  });
});

describe("a missing redis-server binary fails loudly, saying how to install it", () => {
  test("a bogus path in the bin option", async () => {
    await expect(startRedisServer({ bin: "/nonexistent/redis-server" })).rejects.toThrow(REDIS_SERVER_INSTALL_HINT);
    await expect(startRedisServer({ bin: "/nonexistent/redis-server" })).rejects.toThrow(
      /option bin is "\/nonexistent\/redis-server", which is not an executable file/,
    );
  });

  test("a name that is not on PATH", async () => {
    await expect(startRedisServer({ bin: "no-such-redis-server-binary" })).rejects.toThrow(REDIS_SERVER_INSTALL_HINT);
  });

  test("a bogus REDIS_SERVER_BIN", () => {
    vi.stubEnv("REDIS_SERVER_BIN", "/nonexistent/bin/redis-server");
    expect(() => resolveRedisServerBin()).toThrow(/REDIS_SERVER_BIN is "\/nonexistent\/bin\/redis-server"/);
    expect(() => resolveRedisServerBin()).toThrow(REDIS_SERVER_INSTALL_HINT);
  });

  test("no redis-server on PATH and REDIS_SERVER_BIN unset", () => {
    vi.stubEnv("REDIS_SERVER_BIN", "");
    vi.stubEnv("PATH", "/nonexistent-dir");
    expect(() => resolveRedisServerBin()).toThrow(/no "redis-server" on PATH and REDIS_SERVER_BIN is unset/);
    expect(() => resolveRedisServerBin()).toThrow(REDIS_SERVER_INSTALL_HINT);
  });

  test("REDIS_SERVER_BIN, when set, is the binary used", () => {
    const real = resolveRedisServerBin();
    vi.stubEnv("REDIS_SERVER_BIN", real);
    expect(resolveRedisServerBin()).toBe(real);
  });

  test("a binary that is not a working redis-server is reported with its exit", async () => {
    await expect(startRedisServer({ bin: "/bin/false" })).rejects.toThrow(/redis-server exited before answering PING/);
  });
});

describe("cleanup", () => {
  test("a server the test process forgot to stop is killed when that process exits", async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const moduleUrl = new URL("./redis-server.ts", import.meta.url).href;
    const script = [
      `const { startRedisServer } = await import(${JSON.stringify(moduleUrl)});`,
      "const server = await startRedisServer();",
      "console.log(JSON.stringify({ pid: server.pid, port: server.port }));",
      "process.exit(0);",
    ].join("\n");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "--eval", script],
      { cwd: join(here, ".."), timeout: 30_000 },
    );
    const { pid, port } = JSON.parse(stdout.trim()) as { pid: number; port: number };
    expect(pid).toEqual(expect.any(Number));
    // The child sent SIGKILL from its exit hook; wait (bounded) for the kernel to reap the orphan.
    for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(isAlive(pid)).toBe(false);
    expect(await pingRedis(port)).toBe(false);
  });

  test("the globalSetup module provides a server and a bridge, and its teardown stops both", async () => {
    const provided = new Map<string, string>();
    const teardown = await setupRedisGlobal({ provide: (key, value) => provided.set(key, value) });
    const redisUrl = provided.get("sluiceRedisUrl")!;
    expect(redisUrl).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    const redis = new Redis({
      url: provided.get("sluiceUpstashUrl")!,
      token: provided.get("sluiceUpstashToken")!,
      retry: false,
      enableTelemetry: false,
    });
    expect(await redis.set("global", "yes")).toBe("OK");
    expect(await withClient(redisUrl, (client) => client.sendCommand(["GET", "global"]))).toBe("yes");
    await teardown();
    expect(await pingRedis(Number(new URL(redisUrl).port))).toBe(false);
    await expect(redis.get("global")).rejects.toThrow();
  });
});
