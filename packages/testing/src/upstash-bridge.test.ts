import { createHash } from "node:crypto";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type RedisServer, startRedisServer } from "./redis-server.js";
import { type UpstashBridge, startUpstashBridge } from "./upstash-bridge.js";

let server: RedisServer;
let bridge: UpstashBridge;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url });
});

afterAll(async () => {
  await bridge?.close();
  await server?.stop();
});

let keyCounter = 0;
/** A key no other test uses (the server is private, so nothing is ever flushed). */
const key = (name: string) => `bridge-test:${++keyCounter}:${name}`;
const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");
const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
const UNICODE = "héllo wörld — 日本語 🚦 ∑ \u00e9\u0301 \"quoted\" \\ back";

/** A raw HTTP call to the bridge, to pin the wire format the client parses. */
async function raw(
  path: string,
  body: unknown,
  { base64 = false, token = bridge.token as string | null, method = "POST" } = {},
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (base64) headers["upstash-encoding"] = "base64";
  const res = await fetch(`${bridge.url}${path}`, {
    method,
    headers,
    body: method === "GET" ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: JSON.parse(await res.text()) as unknown };
}

const modes = [
  { name: "auto-pipelining, base64 responses (the defaults)", enableAutoPipelining: true, base64: true },
  { name: "auto-pipelining, plain JSON responses", enableAutoPipelining: true, base64: false },
  { name: "one request per command, base64 responses", enableAutoPipelining: false, base64: true },
  { name: "one request per command, plain JSON responses", enableAutoPipelining: false, base64: false },
] as const;

describe.each(modes)("@upstash/redis 1.39.0 through the bridge: $name", (mode) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis({
      url: bridge.url,
      token: bridge.token,
      retry: false,
      enableTelemetry: false,
      enableAutoPipelining: mode.enableAutoPipelining,
      ...(mode.base64 ? {} : { responseEncoding: false as const }),
    });
  });

  /** Runs `fn` and checks every request it made used (or did not use) base64 and the expected path. */
  async function traced<T>(fn: () => Promise<T>): Promise<T> {
    const before = bridge.counts;
    const result = await fn();
    const after = bridge.counts;
    const requests = after.total - before.total;
    expect(requests).toBeGreaterThan(0);
    expect(after.base64 - before.base64).toBe(mode.base64 ? requests : 0);
    return result;
  }

  test("strings: set / get / incr / incrby / del", async () => {
    const k = key("str");
    const n = key("num");
    await traced(async () => {
      expect(await redis.set(k, "value-1")).toBe("OK");
      expect(await redis.get(k)).toBe("value-1");
      expect(await redis.incr(n)).toBe(1);
      expect(await redis.incrby(n, 41)).toBe(42);
      expect(await redis.get(n)).toBe(42); // the client JSON-parses "42"
      expect(await redis.get(key("missing"))).toBeNull();
      expect(await redis.set(k, "v2", { px: 60_000 })).toBe("OK");
      expect(await redis.pttl(k)).toBeGreaterThan(0);
      expect(await redis.del(k, n)).toBe(2);
      expect(await redis.exists(k, n)).toBe(0);
    });
  });

  test("hashes: hset / hget / hincrby / hgetall / hmget", async () => {
    const h = key("hash");
    await traced(async () => {
      expect(await redis.hset(h, { name: "ada", "fïeld ✓": UNICODE, count: 1 })).toBe(3);
      expect(await redis.hget(h, "name")).toBe("ada");
      expect(await redis.hget(h, "fïeld ✓")).toBe(UNICODE);
      expect(await redis.hincrby(h, "count", 9)).toBe(10);
      expect(await redis.hgetall(h)).toEqual({ name: "ada", "fïeld ✓": UNICODE, count: 10 });
      expect(await redis.hmget(h, "name", "nope")).toEqual({ name: "ada", nope: null });
      expect(await redis.hget(h, "nope")).toBeNull();
    });
  });

  test("sorted sets: zadd / zscore / zincrby / zrange with scores / zcard / zrem", async () => {
    const z = key("zset");
    await traced(async () => {
      expect(await redis.zadd(z, { score: 3, member: "c" }, { score: 1, member: "a" }, { score: 2, member: "b" })).toBe(3);
      expect(await redis.zscore(z, "b")).toBe(2);
      expect(await redis.zincrby(z, 10, "a")).toBe(11);
      expect(await redis.zrange(z, 0, -1)).toEqual(["b", "c", "a"]);
      expect(await redis.zrange(z, 0, -1, { withScores: true })).toEqual(["b", 2, "c", 3, "a", 11]);
      expect(await redis.zcard(z)).toBe(3);
      expect(await redis.zrem(z, "c", "zz")).toBe(1);
      expect(await redis.zrange(z, 0, -1)).toEqual(["b", "a"]);
    });
  });

  test("eval returns strings, numbers, nested arrays and nil", async () => {
    const script = `-- ${mode.name}
      if ARGV[1] == "nil" then return nil end
      return { ARGV[1], tonumber(ARGV[2]) * 2, { ARGV[3], false, { 7, "deep" } }, redis.call("INCR", KEYS[1]) }`;
    const counter = key("evalcounter");
    await traced(async () => {
      expect(await redis.eval(script, [counter], ["hello", 21, UNICODE])).toEqual([
        "hello",
        42,
        [UNICODE, null, [7, "deep"]],
        1,
      ]);
      expect(await redis.eval(script, [counter], ["nil", 0, ""])).toBeNull();
      expect(await redis.eval("return 'plain text'", [], [])).toBe("plain text");
      expect(await redis.eval("return tonumber(ARGV[1]) - 1", [], [1_000_000])).toBe(999_999);
    });
  });

  test("scriptLoad returns the SHA-1, evalsha runs it, an unknown SHA fails with NOSCRIPT", async () => {
    const script = `return { "${mode.name}", tonumber(ARGV[1]) + 1 }`;
    const sha = sha1(script);
    await traced(async () => {
      await expect(redis.evalsha(sha, [], [1])).rejects.toThrow(/NOSCRIPT/);
      expect(await redis.scriptLoad(script)).toBe(sha);
      expect(await redis.evalsha(sha, [], [1])).toEqual([mode.name, 2]);
      expect(await redis.scriptExists(sha, sha1("never loaded"))).toEqual([1, 0]);
    });
  });

  test("multi(): one transaction at /multi-exec; a run-time error fails only its own item", async () => {
    const k = key("tx");
    const c = key("txcount");
    const before = bridge.counts;
    const ok = redis.multi();
    ok.set(k, "a");
    ok.incr(c);
    ok.get(k);
    expect(await ok.exec()).toEqual(["OK", 1, "a"]);
    const after = bridge.counts;
    expect(after.total - before.total).toBe(1);
    expect((after.byPath["/multi-exec"] ?? 0) - (before.byPath["/multi-exec"] ?? 0)).toBe(1);

    const failing = () => {
      const tx = redis.multi();
      tx.set(k, "b");
      tx.hget(k, "field"); // WRONGTYPE at run time
      tx.incr(c);
      return tx;
    };
    await expect(failing().exec()).rejects.toThrow(/^Command 2 \[ hget \] failed: WRONGTYPE Operation against a key holding the wrong kind of value$/);
    // Redis semantics: the other commands of the transaction ran.
    expect(await redis.get(c)).toBe(2);
    const items = await failing().exec({ keepErrors: true });
    expect(items.map((item) => item.error)).toEqual([
      undefined,
      "WRONGTYPE Operation against a key holding the wrong kind of value",
      undefined,
    ]);
    expect(items[0]!.result).toBe("OK");
    expect(items[2]!.result).toBe(3);
  });

  test("pipeline() with a failing item: the others succeed", async () => {
    const k = key("pipe");
    const p = () => redis.pipeline().set(k, "x").hget(k, "f").incr(key("pipecount")).get(k);
    await expect(p().exec()).rejects.toThrow(/^Command 2 \[ hget \] failed: WRONGTYPE/);
    const items = await p().exec({ keepErrors: true });
    expect(items.map((item) => item.error)).toEqual([
      undefined,
      "WRONGTYPE Operation against a key holding the wrong kind of value",
      undefined,
      undefined,
    ]);
    expect(items.map((item) => item.result)).toEqual(["OK", undefined, 1, "x"]);
    expect(await redis.pipeline().set(k, UNICODE).get(k).exec()).toEqual(["OK", UNICODE]);
  });

  test("unicode strings round-trip in keys, values, hash fields and script results", async () => {
    const k = key("ключ 🔑");
    await traced(async () => {
      expect(await redis.set(k, UNICODE)).toBe("OK");
      expect(await redis.get(k)).toBe(UNICODE);
      expect(await redis.strlen(k)).toBe(Buffer.byteLength(UNICODE, "utf8"));
      expect(await redis.eval("return redis.call('GET', KEYS[1])", [k], [])).toBe(UNICODE);
      expect(await redis.keys(`${k.slice(0, -2)}*`)).toEqual([k]); // pattern "…ключ *"
    });
  });

  test("a wrong token is refused (401) before anything runs", async () => {
    const k = key("unauth");
    const intruder = new Redis({
      url: bridge.url,
      token: "wrong-token",
      retry: false,
      enableTelemetry: false,
      enableAutoPipelining: mode.enableAutoPipelining,
      ...(mode.base64 ? {} : { responseEncoding: false as const }),
    });
    await expect(intruder.set(k, "x")).rejects.toThrow(/Unauthorized/);
    expect(await redis.exists(k)).toBe(0);
  });
});

describe("scripts with Upstash-only shebang flags (@upstash/ratelimit 2.2 writes allow-key-locking)", () => {
  test("EVAL runs them without the flag; EVALSHA of the client's SHA-1 and SCRIPT LOAD's answer are the client's", async () => {
    const script = `#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])`;
    const k = key("shebang");
    expect(await raw("/", ["EVALSHA", sha1(script), 1, k])).toMatchObject({ status: 400 });
    expect(await raw("/", ["EVAL", script, 1, k])).toEqual({ status: 200, body: { result: 1 } });
    expect(await raw("/", ["EVALSHA", sha1(script), 1, k])).toEqual({ status: 200, body: { result: 2 } });
    const other = `#!lua flags=no-writes,allow-key-locking\nreturn 7`;
    expect(await raw("/", ["SCRIPT", "LOAD", other])).toEqual({ status: 200, body: { result: sha1(other) } });
    expect(await raw("/pipeline", [["EVALSHA", sha1(other), 0]])).toEqual({ status: 200, body: [{ result: 7 }] });
    // a script without the flag is sent as it is: Redis's own SHA-1
    expect(await raw("/", ["SCRIPT", "LOAD", "return 8"])).toEqual({ status: 200, body: { result: sha1("return 8") } });
  });
});

describe("request counting", () => {
  test("10 concurrent writes with auto-pipelining: one HTTP request, at /pipeline", async () => {
    const redis = new Redis({ url: bridge.url, token: bridge.token, retry: false, enableTelemetry: false });
    const k = key("auto");
    bridge.resetCounts();
    const results = await Promise.all(Array.from({ length: 10 }, () => redis.incr(k)));
    expect(results.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(bridge.counts).toEqual({ total: 1, byPath: { "/pipeline": 1 }, commands: 10, base64: 1 });
  });

  test("10 concurrent reads and writes with auto-pipelining: fewer requests than commands, all at /pipeline", async () => {
    const redis = new Redis({ url: bridge.url, token: bridge.token, retry: false, enableTelemetry: false });
    const k = key("mixed");
    bridge.resetCounts();
    await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? redis.incr(k) : redis.get(k))));
    const counts = bridge.counts;
    expect(counts.total).toBeLessThan(10);
    expect(Object.keys(counts.byPath)).toEqual(["/pipeline"]);
    expect(counts.byPath["/pipeline"]).toBe(counts.total);
    expect(counts.commands).toBe(10);
  });

  test("10 concurrent commands without auto-pipelining: exactly 10 requests at /", async () => {
    const redis = new Redis({
      url: bridge.url,
      token: bridge.token,
      retry: false,
      enableTelemetry: false,
      enableAutoPipelining: false,
    });
    const k = key("noauto");
    bridge.resetCounts();
    await Promise.all(Array.from({ length: 10 }, () => redis.incr(k)));
    expect(bridge.counts).toEqual({ total: 10, byPath: { "/": 10 }, commands: 10, base64: 10 });
  });

  test("refused requests are counted too; resetCounts() zeroes everything", async () => {
    bridge.resetCounts();
    expect((await raw("/", ["ping"], { token: null })).status).toBe(401);
    expect((await raw("/nope", ["ping"])).status).toBe(404);
    expect(bridge.counts).toEqual({ total: 2, byPath: { "/": 1, "/nope": 1 }, commands: 0, base64: 0 });
    bridge.resetCounts();
    expect(bridge.counts).toEqual({ total: 0, byPath: {}, commands: 0, base64: 0 });
  });
});

describe("wire format (what @upstash/redis 1.39.0 parses)", () => {
  test("POST / → {result}; base64 encodes strings only, and leaves a top-level OK alone", async () => {
    const k = key("wire");
    expect(await raw("/", ["set", k, UNICODE], { base64: true })).toEqual({ status: 200, body: { result: "OK" } });
    expect(await raw("/", ["get", k], { base64: true })).toEqual({ status: 200, body: { result: b64(UNICODE) } });
    expect(await raw("/", ["get", k])).toEqual({ status: 200, body: { result: UNICODE } });
    expect(await raw("/", ["get", key("none")], { base64: true })).toEqual({ status: 200, body: { result: null } });
    expect(await raw("/", ["incrby", key("n"), 5], { base64: true })).toEqual({ status: 200, body: { result: 5 } });
    expect(await raw("/", ["ping"], { base64: true })).toEqual({ status: 200, body: { result: b64("PONG") } });
  });

  test("arguments are String()-ed: numbers and booleans reach Redis as text", async () => {
    const k = key("args");
    expect((await raw("/", ["set", k, true])).body).toEqual({ result: "OK" });
    expect((await raw("/", ["get", k])).body).toEqual({ result: "true" });
    expect((await raw("/", ["set", k, 1.5])).body).toEqual({ result: "OK" });
    expect((await raw("/", ["incrbyfloat", k, 1])).body).toEqual({ result: "2.5" });
    expect(await raw("/", ["set", k, { nested: 1 }])).toEqual({
      status: 400,
      body: { error: "ERR the body must be a non-empty JSON array of strings, numbers or booleans" },
    });
  });

  test("nested arrays are encoded recursively; integers and nil stay JSON", async () => {
    const body = ["eval", "return { 'a', 1, { 'b', false, { 2, 'c' } }, false }", 0];
    expect((await raw("/", body, { base64: true })).body).toEqual({
      result: [b64("a"), 1, [b64("b"), null, [2, b64("c")]], null],
    });
    expect((await raw("/", body)).body).toEqual({ result: ["a", 1, ["b", null, [2, "c"]], null] });
  });

  test("a command error is 400 {error} with the Redis message unchanged (NOSCRIPT passes through)", async () => {
    expect(await raw("/", ["evalsha", "0".repeat(40), 0], { base64: true })).toEqual({
      status: 400,
      body: { error: "NOSCRIPT No matching script. Please use EVAL." },
    });
    const k = key("wrongtype");
    await raw("/", ["set", k, "x"]);
    expect(await raw("/", ["hget", k, "f"])).toEqual({
      status: 400,
      body: { error: "WRONGTYPE Operation against a key holding the wrong kind of value" },
    });
  });

  test("POST /pipeline → one {result} or {error} per command, in order", async () => {
    const k = key("rawpipe");
    expect(await raw("/pipeline", [["set", k, "1"], ["hget", k, "f"], ["incr", k], ["get", k]], { base64: true })).toEqual({
      status: 200,
      body: [
        { result: "OK" },
        { error: "WRONGTYPE Operation against a key holding the wrong kind of value" },
        { result: 2 },
        { result: b64("2") },
      ],
    });
  });

  test("POST /multi-exec → the same shape; a command refused while queueing aborts the whole transaction", async () => {
    const k = key("rawtx");
    expect(await raw("/multi-exec", [["set", k, "1"], ["incr", k]])).toEqual({
      status: 200,
      body: [{ result: "OK" }, { result: 2 }],
    });
    const aborted = await raw("/multi-exec", [["set", k, "99"], ["nosuchcommand", k]]);
    expect(aborted.status).toBe(400);
    expect(aborted.body).toEqual({
      error: expect.stringMatching(/^EXECABORT Transaction discarded because of previous errors: ERR unknown command 'nosuchcommand'/),
    });
    expect((await raw("/", ["get", k])).body).toEqual({ result: "2" });
  });

  test("commands that would change the shared connection's state are refused, and the bridge stays usable", async () => {
    expect(await raw("/", ["multi"])).toEqual({
      status: 400,
      body: { error: "ERR 'multi' is not supported over the REST API" },
    });
    expect(await raw("/", ["SELECT", 1])).toEqual({
      status: 400,
      body: { error: "ERR 'SELECT' is not supported over the REST API" },
    });
    expect((await raw("/pipeline", [["ping"], ["subscribe", "ch"]])).body).toEqual([
      { result: "PONG" },
      { error: "ERR 'subscribe' is not supported over the REST API" },
    ]);
    expect((await raw("/multi-exec", [["ping"], ["watch", "k"]])).status).toBe(400);
    expect(await raw("/", ["ping"])).toEqual({ status: 200, body: { result: "PONG" } });
  });

  test("authorization is required on every path: 401 {error} without or with a wrong bearer token", async () => {
    for (const path of ["/", "/pipeline", "/multi-exec", "/anything"]) {
      expect(await raw(path, [["ping"]], { token: null })).toEqual({
        status: 401,
        body: { error: "Unauthorized: missing or invalid bearer token" },
      });
      expect((await raw(path, [["ping"]], { token: `${bridge.token}x` })).status).toBe(401);
    }
  });

  test("only POST to /, /pipeline and /multi-exec: other methods are 405, other paths 404, bad JSON 400", async () => {
    expect((await raw("/", undefined, { method: "GET" })).status).toBe(405);
    expect((await raw("/get/foo", ["get", "foo"])).status).toBe(404);
    expect(await raw("/", "{not json")).toEqual({ status: 400, body: { error: "ERR the body is not valid JSON" } });
    expect((await raw("/pipeline", [])).status).toBe(400);
    expect((await raw("/", [])).status).toBe(400);
  });
});

describe("outages of the redis-server behind the bridge", () => {
  let ownServer: RedisServer;
  let ownBridge: UpstashBridge;
  let redis: Redis;

  beforeAll(async () => {
    ownServer = await startRedisServer();
    ownBridge = await startUpstashBridge({ redisUrl: ownServer.url });
    redis = new Redis({ url: ownBridge.url, token: ownBridge.token, retry: false, enableTelemetry: false });
  });

  afterAll(async () => {
    await ownBridge?.close();
    await ownServer?.stop();
  });

  test("stopped: commands fail at once with an error; restarted: the bridge reconnects by itself", async () => {
    expect(await redis.set("k", "before")).toBe("OK");
    await ownServer.stop();
    await expect(redis.get("k")).rejects.toThrow(/redis unavailable/);
    const status = await fetch(ownBridge.url, {
      method: "POST",
      headers: { authorization: `Bearer ${ownBridge.token}` },
      body: JSON.stringify(["get", "k"]),
    });
    expect(status.status).toBe(503);
    await ownServer.start();
    await ownBridge.redisReady();
    expect(await redis.get("k")).toBeNull(); // nothing is persisted across a restart
    expect(await redis.set("k", "after")).toBe("OK");
    expect(await redis.get("k")).toBe("after");
  });

  test("paused (hung): a request waits, and completes once the server resumes", async () => {
    expect(await redis.set("hung", "v")).toBe("OK");
    await ownServer.pause();
    let settled = false;
    const pending = redis.get("hung").finally(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(settled).toBe(false);
    await ownServer.resume();
    expect(await pending).toBe("v");
  });
});
