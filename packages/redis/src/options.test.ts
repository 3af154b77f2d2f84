/**
 * Every option and argument of the Redis stores, refused with a `SluiceConfigError` whose `code` is
 * `"SLUICE_CONFIG"` and whose `option` names it, in the one message format
 * (`[sluice] [redis] <option> must be …`). Checked when the store is built or bound: no server
 * is asked anything.
 */
import { SluiceConfigError, fixedWindow } from "@sluice/core";
import { afterEach, describe, expect, it } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";
import { decideScript } from "./scripts.js";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

const upstash = { evalsha: async () => 0, eval: async () => 0, del: async () => 0 };
const ioredis = { ...upstash, defineCommand: () => undefined };
const window = fixedWindow({ limit: 5, window: "1m" });

function expectOption(make: () => unknown, option: string, message: string): void {
  expect(make).toThrow(SluiceConfigError);
  expect(make).toThrow(message);
  expect(make).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  let thrown: unknown;
  try {
    make();
  } catch (error) {
    thrown = error;
  }
  expect((thrown as Error).message.startsWith(`[sluice] [redis] ${option} `), (thrown as Error).message).toBe(true);
}

// [label, call, option, message (a prefix of it)]
const rows: [string, () => unknown, string, string][] = [
  ["RedisStore: client missing", () => new RedisStore(undefined as never), "client", "[sluice] [redis] client must be an ioredis or node-redis client; got undefined"],
  ["RedisStore: an ioredis client without defineCommand", () => new RedisStore(upstash as never), "client", "[sluice] [redis] client must be an ioredis or node-redis client (for @upstash/redis use UpstashStore); got a client without defineCommand()"],
  ["RedisStore: a node-redis client without del", () => new RedisStore({ evalSha: async () => 0, eval: async () => 0 } as never), "client", "[sluice] [redis] client must be a node-redis client; got a client without del()"],
  ["RedisStore: options", () => new RedisStore(ioredis as never, "client" as never), "options", '[sluice] [redis] options must be an object like { clock }; got client'],
  ["RedisStore: clock", () => new RedisStore(ioredis as never, { clock: 1 as never }), "clock", '[sluice] [redis] clock must be "server" or "client"; got 1'],
  ["UpstashStore: redis", () => new UpstashStore({} as never), "redis", "[sluice] [redis] redis must be an @upstash/redis client; got a client without evalsha()"],
  ["UpstashStore: options", () => new UpstashStore(upstash, null as never), "options", "[sluice] [redis] options must be an object like { clock }; got null"],
  ["UpstashStore: clock", () => new UpstashStore(upstash, { clock: "local" as never }), "clock", '[sluice] [redis] clock must be "server" or "client"; got "local"'],
  ["bind: namespace", () => new UpstashStore(upstash).bind(undefined as never), "namespace", "[sluice] [redis] namespace must be an object { prefix, tier?, policies }"],
  ["bind: prefix", () => new UpstashStore(upstash).bind({ prefix: "has space", policies: [window] }), "prefix", "[sluice] [redis] prefix must be 1-128 visible ASCII characters"],
  ["bind: tier", () => new RedisStore(ioredis as never).bind({ prefix: "p", tier: "", policies: [window] }), "tier", "[sluice] [redis] tier must be 1-128 visible ASCII characters"],
  ["bind: no policies", () => new UpstashStore(upstash).bind({ prefix: "p", policies: [] }), "policies", "[sluice] [redis] policies must hold at least one policy"],
  ["bind: policies[0]", () => new UpstashStore(upstash).bind({ prefix: "p", policies: [{ ...window, limit: 0 }] }), "policies[0]", "[sluice] [redis] policies[0] must be a policy from fixedWindow()"],
  ["bind: policies[1].name", () => new UpstashStore(upstash).bind({ prefix: "p", policies: [window, window] }), "policies[1].name", "[sluice] [redis] policies[1].name must differ"],
  ["createTestUpstashStore: options", () => createTestUpstashStore(upstash, undefined as never), "options", "[sluice] [redis] options must be an object like { clock }; got undefined"],
  ["createTestUpstashStore: clock", () => createTestUpstashStore(upstash, { clock: 0 as never }), "clock", "[sluice] [redis] clock must be a function returning epoch ms; got number"],
  ["createTestRedisStore: clock", () => createTestRedisStore(ioredis as never, {} as never), "clock", "[sluice] [redis] clock must be a function returning epoch ms; got undefined"],
  ["decideScript: no policies", () => decideScript([]), "policies", "[sluice] [redis] policies must hold 1 to 12 policies (the same limit on every store); got 0"],
  ["decideScript: a hand-made policy with a number that is not a safe integer", () => decideScript([{ ...window, windowMs: 1.5 }]), "policies", "[sluice] [redis] policies must hold safe integers only; got 1.5 in a script"],
];

describe("the Redis stores name each option they refuse", () => {
  it.each(rows)("%s", (_label, make, option, message) => expectOption(make, option, message));
});

describe("the test stores' production fence", () => {
  // process.env, writable (some type packages declare NODE_ENV read-only)
  const env = process.env as Record<string, string | undefined>;
  const before = env.NODE_ENV;
  afterEach(() => {
    env.NODE_ENV = before;
  });

  it.each([
    ["createTestUpstashStore", () => createTestUpstashStore(upstash, { clock: () => 0 })],
    ["createTestRedisStore", () => createTestRedisStore(ioredis as never, { clock: () => 0 })],
  ])("%s refuses NODE_ENV=production, naming NODE_ENV", (_label, make) => {
    env.NODE_ENV = "production";
    expectOption(make, "NODE_ENV", '[sluice] [redis] NODE_ENV must not be "production" for a test store with an injected clock');
  });
});
