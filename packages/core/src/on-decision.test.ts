/**
 * `onDecision(...frameworkArgs, decision, info)`: called once per decided request, after the
 * decision, with the framework's arguments, then the decision, the key's hash, the tier and the
 * route; never for a skipped request; never able to break one (its errors go to `onCallbackError`).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type Decision,
  type DecisionInfo,
  MemoryStore,
  RateLimiter,
  SluiceConfigError,
  type Store,
  createGuard,
  fixedWindow,
} from "./index.js";
import { createPipeline, partitionKeyOf } from "./adapter.js";

const T0 = 1_700_000_022_000;
const store = () => new MemoryStore({ clock: () => T0 });
const byApiKey = (r: Request) => r.headers.get("x-api-key") ?? "anonymous";

function request(path: string, apiKey?: string, method = "GET"): Request {
  return new Request(`https://api.test${path}`, { method, headers: apiKey === undefined ? {} : { "x-api-key": apiKey } });
}

/** SHA-256 by WebCrypto, its first 12 bytes in base64: what keyHash must be (a second, independent hash). */
async function expectedHash(storageKey: string, salt = ""): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(salt + storageKey)));
  return btoa(String.fromCharCode(...digest.subarray(0, 12)));
}

/** Records every call as plain data (the getters read). */
function recorder() {
  const calls: { framework: unknown[]; decision: Decision; info: { keyHash: string; tier: string | undefined; route: string } }[] = [];
  const onDecision = (...args: [...unknown[], Decision, DecisionInfo]) => {
    const info = args.pop() as DecisionInfo;
    const decision = args.pop() as Decision;
    calls.push({ framework: args, decision, info: { keyHash: info.keyHash, tier: info.tier, route: info.route } });
  };
  return { calls, onDecision };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("onDecision", () => {
  it("is called once per decided request with the request, the very decision, the key's hash, no tier and the route", async () => {
    const { calls, onDecision } = recorder();
    const guard = createGuard({ limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 2, window: "1m" }) }), key: byApiKey, onDecision });
    const results: Awaited<ReturnType<typeof guard>>[] = [];
    const requests = [0, 1, 2].map(() => request("/api/items?token=secret#x", "k1"));
    for (const r of requests) results.push(await guard(r));
    expect(calls).toHaveLength(3);
    calls.forEach((c, i) => expect(c.framework).toEqual([requests[i]]));
    calls.forEach((c, i) => expect(c.framework[0]).toBe(requests[i]));
    expect(calls.map((c) => c.decision)).toEqual(results.map((r) => r.decision));
    calls.forEach((c, i) => expect(c.decision).toBe(results[i]?.decision)); // the same objects, not copies
    expect(calls.map((c) => [c.decision.allowed, c.decision.reason, c.decision.remaining])).toEqual([
      [true, "ok", 1],
      [true, "ok", 0],
      [false, "limit", 0],
    ]);
    const keyHash = await expectedHash("sluice::k1");
    expect(keyHash).toMatch(/^[A-Za-z0-9+/]{16}$/);
    for (const call of calls) expect(call.info).toEqual({ keyHash, tier: undefined, route: "GET /api/items" });
    // the denied request still got its 429
    expect(results[2]?.response?.status).toBe(429);
  });

  it("keyHash differs per key and per prefix, is the header's pk with partitionKey, and uses its salt", async () => {
    const { calls, onDecision } = recorder();
    const limiter = new RateLimiter({ store: store(), prefix: "app", limits: fixedWindow({ limit: 5, window: "1m" }) });
    const guard = createGuard({ limiter, key: byApiKey, onDecision, partitionKey: { salt: "pepper" }, headers: "ietf" });
    const a = await guard(request("/", "alice"));
    await guard(request("/", "bob"));
    const [alice, bob] = calls.map((c) => c.info.keyHash);
    expect(alice).toBe(await expectedHash("app::alice", "pepper"));
    expect(bob).toBe(await expectedHash("app::bob", "pepper"));
    expect(alice).not.toBe(bob);
    expect(alice).toBe(partitionKeyOf("app::alice", "pepper").slice(1, -1));
    // the pk a client sees in RateLimit is the keyHash a log line holds: the two can be matched
    expect(a.headers.get("ratelimit")).toBe(`"5-per-1m";r=4;t=18;pk=:${alice}:`);
  });

  it("with tiers: the tier that decided; the hash covers the tier", async () => {
    const { calls, onDecision } = recorder();
    const guard = createGuard({
      store: store(),
      tiers: { free: fixedWindow({ limit: 1, window: "1m" }), pro: fixedWindow({ limit: 10, window: "1m" }) },
      tier: (_request, key) => (key.startsWith("pro") ? "pro" : "free"),
      key: byApiKey,
      onDecision,
    });
    await guard(request("/a", "pro-1", "POST"));
    await guard(request("/b", "free-1"));
    await guard(request("/b", "free-1"));
    expect(calls.map((c) => [c.info.tier, c.info.route, c.decision.allowed])).toEqual([
      ["pro", "POST /a", true],
      ["free", "GET /b", true],
      ["free", "GET /b", false],
    ]);
    expect(calls[0]?.info.keyHash).toBe(await expectedHash("sluice:pro:pro-1"));
    expect(calls[1]?.info.keyHash).toBe(await expectedHash("sluice:free:free-1"));
  });

  it("is not called for a skipped request, nor for one that fails before a decision", async () => {
    const onDecision = vi.fn();
    const guard = createGuard({
      limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 5, window: "1m" }) }),
      key: (r) => r.headers.get("x-api-key") ?? "",
      skip: (r) => new URL(r.url).pathname === "/health",
      onDecision,
    });
    expect((await guard(request("/health", "k"))).decision).toBeUndefined();
    await expect(guard(request("/api"))).rejects.toThrow("key"); // an empty key: SluiceInputError, no decision
    expect(onDecision).not.toHaveBeenCalled();
    await guard(request("/api", "k"));
    expect(onDecision).toHaveBeenCalledTimes(1);
  });

  it("a callback that throws or rejects cannot break the request, and the request does not wait for it; the error goes to onCallbackError", async () => {
    const unhandled = vi.fn();
    process.on("unhandledRejection", unhandled);
    const reported: [unknown, string, string][] = [];
    const onCallbackError = (r: Request, error: unknown, callback: string) => reported.push([r.url, (error as Error).message, callback]);
    try {
      const limiter = new RateLimiter({ store: store(), limits: fixedWindow({ limit: 1, window: "1m" }) });
      const throwing = createGuard({ limiter, key: byApiKey, onCallbackError, onDecision: () => { throw new Error("logger down"); } });
      const allowed = await throwing(request("/", "k"));
      expect(allowed.decision?.allowed).toBe(true);
      expect(allowed.response).toBeUndefined();
      const denied = await throwing(request("/", "k"));
      expect(denied.response?.status).toBe(429);

      let release!: () => void;
      const slow = new Promise<void>((resolve) => (release = resolve));
      const rejecting = createGuard({
        limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 1, window: "1m" }) }),
        key: byApiKey,
        onCallbackError,
        onDecision: async () => {
          await slow; // never released before the guard answers: the guard does not wait
          throw new Error("async logger down");
        },
      });
      const result = await rejecting(request("/", "k"));
      expect(result.decision?.allowed).toBe(true);
      expect(reported).toEqual([
        ["https://api.test/", "logger down", "onDecision"],
        ["https://api.test/", "logger down", "onDecision"],
      ]);
      release();
      await slow;
      await vi.waitFor(() => expect(reported).toHaveLength(3));
      expect(reported[2]).toEqual(["https://api.test/", "async logger down", "onDecision"]);
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off("unhandledRejection", unhandled);
    }
  });

  it("reports dry-run decisions, store failures and cached denials with their reasons", async () => {
    const { calls, onDecision } = recorder();
    const dry = createGuard({
      limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 1, window: "1m" }), mode: "dry-run" }),
      key: byApiKey,
      onDecision,
    });
    await dry(request("/", "k"));
    const second = await dry(request("/", "k"));
    expect(second.response).toBeUndefined(); // served: dry run
    const broken: Store = {
      bind: () => ({
        consume: () => Promise.reject(new Error("ECONNREFUSED")),
        peek: () => Promise.reject(new Error("ECONNREFUSED")),
        reset: () => Promise.reject(new Error("ECONNREFUSED")),
        refund: () => Promise.reject(new Error("ECONNREFUSED")),
        release: () => Promise.reject(new Error("ECONNREFUSED")),
      }),
    };
    const failing = createGuard({ limiter: new RateLimiter({ store: broken, limits: fixedWindow({ limit: 1, window: "1m" }), onStoreError: "deny" }), key: byApiKey, onDecision });
    await failing(request("/", "k"));
    // an asynchronous store that denies: the next call is answered by the deny cache
    const inner = store();
    const asyncStore: Store = {
      bind(namespace) {
        const bound = inner.bind(namespace);
        return {
          consume: async (k, c) => bound.consume(k, c),
          peek: async (k) => bound.peek(k),
          reset: async (k) => bound.reset(k),
          refund: async (k, c, charge) => bound.refund(k, c, charge),
          release: async (k, lease) => bound.release(k, lease),
        };
      },
    };
    const cached = createGuard({ limiter: new RateLimiter({ store: asyncStore, limits: fixedWindow({ limit: 1, window: "1m" }) }), key: byApiKey, onDecision });
    for (let i = 0; i < 3; i++) await cached(request("/", "k"));
    expect(calls.map((c) => [c.decision.allowed, c.decision.reason, c.decision.dryRun])).toEqual([
      [true, "ok", true],
      [false, "limit", true],
      [false, "store-error", false],
      [true, "ok", false],
      [false, "limit", false],
      [false, "cached-deny", false],
    ]);
  });

  it("reaches adapters through createPipeline, with the route of the platform's request", async () => {
    const { calls, onDecision } = recorder();
    type Args = [ctx: { req: Request }];
    const pipeline = createPipeline<Args>(
      { limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 5, window: "1m" }) }), key: (ctx) => byApiKey(ctx.req), onDecision },
      { where: "test", params: "ctx", request: (ctx) => ctx.req },
    );
    const ctx = { req: request("/v1/things/42?x=1", "k", "DELETE") };
    const response = await pipeline.handle([ctx], () => new Response("ok"));
    expect(response.status).toBe(200);
    expect(calls.map((c) => c.info.route)).toEqual(["DELETE /v1/things/42"]);
    expect(calls[0]?.framework[0]).toBe(ctx);
  });

  it("info serializes with its computed fields (an undefined tier is left out, as JSON does)", async () => {
    const infos: string[] = [];
    const guard = createGuard({
      limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 5, window: "1m" }) }),
      key: byApiKey,
      onDecision: (_request, _decision, info) => infos.push(JSON.stringify(info)),
    });
    await guard(request("/x", "k"));
    expect(JSON.parse(infos[0] as string)).toEqual({ keyHash: await expectedHash("sluice::k"), route: "GET /x" });
  });

  it("without onCallbackError, an error of onDecision is logged with console.error, naming the adapter; a throwing onCallbackError is ignored", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const limiter = new RateLimiter({ store: store(), limits: fixedWindow({ limit: 5, window: "1m" }) });
    const error = new Error("logger down");
    const guard = createGuard({ limiter, key: byApiKey, onDecision: () => { throw error; } });
    expect((await guard(request("/", "k"))).decision?.allowed).toBe(true);
    expect(logged.mock.calls).toEqual([["[sluice] createGuard: onDecision threw; the request went on. Pass onCallbackError to report it yourself.", error]]);
    const reporterThrows = createGuard({ limiter, key: byApiKey, onDecision: () => { throw error; }, onCallbackError: () => { throw new Error("reporter down"); } });
    expect((await reporterThrows(request("/", "k"))).decision?.allowed).toBe(true);
    expect(logged).toHaveBeenCalledTimes(1);
  });

  it("must be a function", () => {
    const limiter = new RateLimiter({ store: store(), limits: fixedWindow({ limit: 5, window: "1m" }) });
    expect(() => createGuard({ limiter, key: byApiKey, onCallbackError: "log" as never })).toThrow('[sluice] onCallbackError must be a function; got "log"');
    expect(() => createGuard({ limiter, key: byApiKey, onDecision: "log" as never })).toThrow(SluiceConfigError);
    expect(() => createGuard({ limiter, key: byApiKey, onDecision: "log" as never })).toThrow('[sluice] onDecision must be a function; got "log"');
  });
});
