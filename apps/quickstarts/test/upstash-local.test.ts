/**
 * `pnpm upstash:local`, started as a reader starts it (in a terminal of its own, from the
 * repository root), with the real `@upstash/redis` client: `Redis.fromEnv()` from the variables it
 * prints, an `UpstashStore` deciding through it, and Ctrl-C (SIGINT to its process group) or
 * SIGTERM ending it — stopping the redis-server it started, leaving one it was given.
 */
import { RateLimiter, fixedWindow } from "@sluice/core";
import { UpstashStore } from "@sluice/redis";
import { type RedisServer, pingRedis, startRedisServer } from "@sluice/testing/redis-server";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startUpstashLocalCommand } from "../src/harness.js";

/** `Redis.fromEnv()` with `vars` as the environment (restored afterwards). */
function fromEnv(vars: Readonly<Record<string, string>>): Redis {
  const saved = { url: process.env.UPSTASH_REDIS_REST_URL, token: process.env.UPSTASH_REDIS_REST_TOKEN };
  process.env.UPSTASH_REDIS_REST_URL = vars.UPSTASH_REDIS_REST_URL;
  process.env.UPSTASH_REDIS_REST_TOKEN = vars.UPSTASH_REDIS_REST_TOKEN;
  try {
    return Redis.fromEnv({ retry: false });
  } finally {
    for (const [name, value] of [["UPSTASH_REDIS_REST_URL", saved.url], ["UPSTASH_REDIS_REST_TOKEN", saved.token]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

const portOf = (url: string) => Number(new URL(url).port);

describe("pnpm upstash:local", () => {
  it("prints a .env for Redis.fromEnv(); UpstashStore decides through it; Ctrl-C stops it and its redis-server", async () => {
    const local = await startUpstashLocalCommand();
    let stopped = false;
    try {
      expect(local.envLines).toEqual([
        expect.stringMatching(/^# Upstash REST endpoint for Redis\.fromEnv\(\) \(@upstash\/redis\), in front of redis:\/\/127\.0\.0\.1:\d+$/),
        expect.stringMatching(/^UPSTASH_REDIS_REST_URL=http:\/\/127\.0\.0\.1:\d+$/),
        expect.stringMatching(/^UPSTASH_REDIS_REST_TOKEN=[\w-]{20,}$/),
        expect.stringMatching(/^REDIS_URL=redis:\/\/127\.0\.0\.1:\d+$/),
        "# Ctrl-C stops it (and the redis-server it started)",
      ]);
      const redis = fromEnv(local.vars);
      expect(await redis.set("greeting", "hello")).toBe("OK");
      expect(await redis.get("greeting")).toBe("hello");

      const limiter = new RateLimiter({ store: new UpstashStore(redis), limits: fixedWindow({ limit: 3, window: "1h", name: "per-hour" }) });
      const decisions = [];
      for (let i = 0; i < 4; i++) decisions.push(await limiter.limit("user:42"));
      expect(decisions.map((d) => [d.allowed, d.remaining, d.reason])).toEqual([
        [true, 2, "ok"],
        [true, 1, "ok"],
        [true, 0, "ok"],
        [false, 0, "limit"],
      ]);
      expect(await pingRedis(portOf(local.vars.REDIS_URL as string))).toBe(true);

      const finished = await local.stop("SIGINT");
      stopped = true;
      // (pnpm itself reports the interrupted script with an ELIFECYCLE line, as after any Ctrl-C)
      expect(finished.output).not.toMatch(/\[sluice\]/);
      expect(await pingRedis(portOf(local.vars.REDIS_URL as string))).toBe(false);
      await expect(fetch(local.vars.UPSTASH_REDIS_REST_URL as string, { method: "POST", body: '["PING"]' })).rejects.toThrow();
    } finally {
      if (!stopped) await local.stop("SIGKILL");
    }
  });

  describe("--redis <url> --token <token>", () => {
    let server: RedisServer;
    beforeAll(async () => {
      server = await startRedisServer();
    });
    afterAll(() => server?.stop());

    it("fronts the given Redis with the given token; SIGTERM ends it and leaves that Redis running", async () => {
      const local = await startUpstashLocalCommand(["--redis", server.url, "--token", "local-dev-token"]);
      try {
        expect(local.vars).toEqual({ UPSTASH_REDIS_REST_URL: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), UPSTASH_REDIS_REST_TOKEN: "local-dev-token", REDIS_URL: server.url });
        expect(local.envLines.at(-1)).toBe("# Ctrl-C stops it");
        expect(await fromEnv(local.vars).incr("visits")).toBe(1);
      } finally {
        await local.stop("SIGTERM");
      }
      expect(await pingRedis(server.port)).toBe(true);
    });
  });

  it("an unknown option ends it at once with the usage", async () => {
    await expect(startUpstashLocalCommand(["--bogus", "1"])).rejects.toThrow(/unknown option "--bogus"\nusage: pnpm upstash:local \[--redis <redis:\/\/host:port>\] \[--port <port>\] \[--token <token>\]/);
  });
});
