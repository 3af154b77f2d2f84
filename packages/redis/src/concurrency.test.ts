/**
 * Concurrency limits with real concurrency: two OS processes, each an HTTP server
 * (`test/concurrency-server.ts`: node:http through core's `createGuard`), share one concurrency
 * limit per key in a redis-server this test starts itself. Handlers count themselves in and out on
 * a Redis counter shared by both processes, so the count of handlers running at once is across
 * processes.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const LIMIT = 3;
const HANDLER_MS = 150;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Server {
  child: ChildProcess;
  base: string;
  exited: Promise<number | null>;
  stderr: () => string;
}

function startServer(env: Record<string, string>): Promise<Server> {
  const entry = fileURLToPath(new URL("../test/concurrency-server.ts", import.meta.url));
  const child = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", entry], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr!.on("data", (chunk) => (err += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      const ready = /READY (\d+)/.exec(out);
      if (ready) resolve({ child, base: `http://127.0.0.1:${ready[1]}`, exited, stderr: () => err });
    });
    child.on("error", reject);
    void exited.then((code) => reject(new Error(`concurrency server exited with ${code} before it was ready:\n${err}`)));
  });
}

describe(`a concurrency limit of ${LIMIT} in Redis, shared by 2 server processes`, () => {
  let redis: RedisServer;
  let servers: Server[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const env = { REDIS_URL: redis.url, PREFIX: `in-flight-${Date.now()}`, LIMIT: String(LIMIT), HANDLER_MS: String(HANDLER_MS) };
    servers = await Promise.all([startServer(env), startServer(env)]);
  }, 60_000);

  afterAll(async () => {
    const codes = await Promise.all(
      servers.map((s) => {
        s.child.kill("SIGTERM");
        return s.exited;
      }),
    );
    await redis?.stop();
    // a server exits 2 if any store call failed (a release included)
    expect(codes, servers.map((s) => s.stderr()).join("\n")).toEqual(servers.map(() => 0));
  });

  /** One request to `/slow` on server `i % 2`. */
  async function slow(i: number): Promise<{ status: number; retryAfter: string | null; running?: number; pid?: number }> {
    const response = await fetch(`${servers[i % 2]!.base}/slow`);
    const retryAfter = response.headers.get("Retry-After");
    if (response.status !== 200) {
      await response.arrayBuffer();
      return { status: response.status, retryAfter };
    }
    const { running, pid } = (await response.json()) as { running: number; pid: number };
    return { status: 200, retryAfter, running, pid };
  }

  it("50 simultaneous slow requests over both processes: never more than 3 handlers running at once", async () => {
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => slow(i)));
    const served = results.filter((r) => r.status === 200);
    const denied = results.filter((r) => r.status === 429);
    const most = Math.max(...served.map((r) => r.running as number));
    console.log(
      `concurrency over HTTP (Redis, 2 processes): limit ${LIMIT}, 50 simultaneous requests → ${served.length} served, ${denied.length} denied (429), at most ${most} handlers running at once, ${Math.round(performance.now() - started)} ms`,
    );
    expect(most).toBeLessThanOrEqual(LIMIT);
    expect(served.length).toBeGreaterThanOrEqual(LIMIT); // the first 3 to reach Redis, at least
    expect(served.length + denied.length).toBe(50);
    expect(denied.every((r) => r.retryAfter !== null && Number(r.retryAfter) >= 0 && Number(r.retryAfter) <= 1)).toBe(true);
  }, 30_000);

  it("50 clients that retry until served (sustained load): all served, never more than 3 running at once, in both processes", async () => {
    const started = performance.now();
    let attempts = 0;
    const results = await Promise.all(
      Array.from({ length: 50 }, async (_, client) => {
        for (let attempt = 0; ; attempt++) {
          attempts++;
          const result = await slow(client + attempt);
          if (result.status === 200) return result;
          expect(result.status).toBe(429);
          if (performance.now() - started > 40_000) throw new Error("not served within 40 s");
          await sleep(20 + ((client * 7 + attempt * 13) % 40));
        }
      }),
    );
    const most = Math.max(...results.map((r) => r.running as number));
    const pids = new Set(results.map((r) => r.pid));
    console.log(
      `concurrency over HTTP (Redis, 2 processes), sustained: limit ${LIMIT}, 50 clients retrying until served → 50 served in ${attempts} attempts, at most ${most} handlers running at once, ${Math.round(performance.now() - started)} ms`,
    );
    expect(results).toHaveLength(50);
    expect(most).toBeLessThanOrEqual(LIMIT);
    expect(most).toBe(LIMIT); // under this load the limit is reached
    expect(pids.size).toBe(2);
  }, 60_000);

  it("a streamed response holds its slot until the stream ends: a request meanwhile (on the other process) is a 429, one after (there too) passes", async () => {
    const [a, b] = servers as [Server, Server];
    const first = await fetch(`${a.base}/stream`);
    expect(first.status).toBe(200);
    const reader = first.body!.getReader();
    await reader.read();
    const during = await fetch(`${b.base}/stream`);
    expect([during.status, during.headers.get("Retry-After")]).toEqual([429, "1"]);
    await during.arrayBuffer();
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/chunk 3\n$/);
    // process a freed the slot before the end of the body was written, and process b did not
    // cache its denial (a slot may free at any moment, in any process): it passes at once
    const after = await fetch(`${b.base}/stream`);
    expect(after.status).toBe(200);
    await after.arrayBuffer();
  }, 30_000);
});
