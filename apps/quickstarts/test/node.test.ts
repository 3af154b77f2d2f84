/**
 * The Node.js quick starts, each from the packed tarballs in a new project outside the repository:
 * Hono on Node.js (a named file run with tsx that prints its URL), Redis through ioredis and
 * through node-redis (scripts that exit by themselves: they close their connection), and Upstash
 * against `pnpm upstash:local`.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectScriptOutput, runHonoQuickStart } from "../src/expectations.js";
import { createProject, keysOf, runCommand, startUpstashLocalCommand, useWorkspace } from "../src/harness.js";

const workspace = useWorkspace();

describe("hono-node: Hono on Node.js, memory store", () => {
  it("runs server.ts with tsx, prints its URL, and answers ten times before the 429", async () => {
    let url = "";
    const output = await runHonoQuickStart(workspace(), "hono-node", (port) => (url = `Listening on http://localhost:${port}/api/hello`));
    expect(output.trim()).toBe(url);
  });
});

describe.each(["ioredis", "node-redis"] as const)("%s: Node.js and Redis", (id) => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(() => redis?.stop());

  it("limit.ts prints five allowed calls and a denied one from Redis, then exits by itself", async () => {
    const project = await createProject(workspace(), id, [id]);
    const run = await runCommand(project, id, { ...workspace().env, REDIS_URL: redis.url }, 60_000);
    expect(run.code, run.output).toBe(0);
    expectScriptOutput(run.output);
    // the counts are in Redis: one key for the identifier (with its hash tag)
    expect(await keysOf(redis.url)).toEqual([expect.stringMatching(/^\{.*user%3A42\}$/)]);
  });
});

describe("upstash: UpstashStore against pnpm upstash:local", () => {
  it("limit.ts reads the printed variables from .env and counts in the endpoint's Redis", async () => {
    const project = await createProject(workspace(), "upstash", ["upstash"]);
    const local = await startUpstashLocalCommand();
    try {
      // the reader pastes the printed lines into .env
      writeFileSync(join(project, ".env"), `${local.envLines.join("\n")}\n`);
      const run = await runCommand(project, "upstash", workspace().env, 60_000);
      expect(run.code, run.output).toBe(0);
      expectScriptOutput(run.output);
      expect(await keysOf(local.vars.REDIS_URL as string)).toEqual([expect.stringMatching(/^\{.*user%3A42\}$/)]);
    } finally {
      await local.stop("SIGINT");
    }
  });
});
