/**
 * Finishing a request: `createGuard`'s `finish(response)` applies the headers, `countWhen` and the
 * release of a concurrency lease exactly as the adapters do; a `countWhen` that throws or rejects
 * never costs the client its response (it is served, counted, and the error reported).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createPipeline } from "./adapter.js";
import { MemoryStore, RateLimiter, concurrency, createGuard, fixedWindow } from "./index.js";

const T0 = 1_700_000_022_000;
const store = () => new MemoryStore({ clock: () => T0 });
const request = (path = "/login") => new Request(`https://api.test${path}`, { method: "POST" });

afterEach(() => {
  vi.restoreAllMocks();
});

describe("createGuard: finish(response)", () => {
  it("adds the headers the response lacks (its own win) and resolves to the response", async () => {
    const guard = createGuard({ limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 3, window: "1m" }) }), key: () => "k", headers: "legacy" });
    const { response, finish } = await guard(request());
    expect(response).toBeUndefined();
    const own = new Response("ok", { headers: { "X-RateLimit-Limit": "mine" } });
    const finished = await finish(own);
    expect(finished).toBe(own);
    expect(Object.fromEntries(finished.headers)).toEqual({
      "content-type": "text/plain;charset=UTF-8",
      "x-ratelimit-limit": "mine",
      "x-ratelimit-remaining": "2",
      "x-ratelimit-reset": "1700000040",
    });
    // immutable headers: a copy; a skipped request: unchanged
    const redirect = await (await guard(request())).finish(Response.redirect("https://api.test/next", 303));
    expect([redirect.status, redirect.headers.get("location"), redirect.headers.get("x-ratelimit-remaining")]).toEqual([303, "https://api.test/next", "1"]);
    const skipping = createGuard({ limiter: new RateLimiter({ store: store(), limits: fixedWindow({ limit: 3, window: "1m" }) }), key: () => "k", skip: () => true });
    const plain = new Response("ok");
    expect(await (await skipping(request())).finish(plain)).toBe(plain);
    expect(plain.headers.has("ratelimit")).toBe(false);
  });

  it("countWhen(request, response, decision): a request that should not count is refunded before finish resolves", async () => {
    const limiter = new RateLimiter({ store: store(), limits: fixedWindow({ limit: 2, window: "5m", name: "login" }) });
    const seen: [string, number, number][] = [];
    const guard = createGuard({
      limiter,
      key: () => "ip",
      countWhen: (r, response, decision) => (seen.push([new URL(r.url).pathname, response.status, decision.remaining]), response.status >= 400),
    });
    const attempt = async (status: number) => {
      const { response, finish } = await guard(request());
      return response ?? finish(new Response(null, { status }));
    };
    const statuses = [];
    for (const status of [200, 200, 200, 401, 200, 401, 200]) statuses.push((await attempt(status)).status);
    expect(statuses).toEqual([200, 200, 200, 401, 200, 401, 429]);
    expect(seen).toEqual([
      ["/login", 200, 1],
      ["/login", 200, 1],
      ["/login", 200, 1],
      ["/login", 401, 1],
      ["/login", 200, 0],
      ["/login", 401, 0],
    ]);
    expect((await limiter.peek("ip")).remaining).toBe(0);
  });

  it("a concurrency lease is held until the finished body ends; without a body it is freed at once", async () => {
    const limiter = new RateLimiter({ store: store(), limits: concurrency({ limit: 1, name: "exports" }) });
    const guard = createGuard({ limiter, key: () => "k" });
    let push!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({ start: (controller) => void (push = controller) });
    const first = await guard(request("/export"));
    const finished = await first.finish(new Response(body));
    expect((await guard(request("/export"))).response?.status).toBe(429); // still held
    const reader = finished.body!.getReader();
    push.enqueue(new TextEncoder().encode("row\n"));
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("row\n");
    push.close();
    expect((await reader.read()).done).toBe(true);
    expect((await limiter.peek("k")).remaining).toBe(1); // freed when the body ended
    const second = await guard(request("/export"));
    await second.finish(new Response(null, { status: 204 }));
    expect((await limiter.peek("k")).remaining).toBe(1);
    // release() by hand still works, and a second release frees nothing more
    const third = await guard(request("/export"));
    await third.release();
    await third.release();
    expect((await limiter.peek("k")).remaining).toBe(1);
  });
});

describe("a countWhen that throws or rejects", () => {
  const limiterOf = () => new RateLimiter({ store: store(), limits: fixedWindow({ limit: 3, window: "5m", name: "login" }) });

  it("serves the handler's response with its headers, counts the request, and reports (request, error, \"countWhen\")", async () => {
    for (const countWhen of [
      () => {
        throw new Error("classifier down");
      },
      async () => {
        throw new Error("classifier down");
      },
    ]) {
      const limiter = limiterOf();
      const reported: [Request, unknown, string][] = [];
      const { handle } = createPipeline<[request: Request]>(
        { limiter, key: () => "ip", countWhen, onCallbackError: (r, error, callback) => reported.push([r, error, callback]) },
        { where: "test", request: (r) => r },
      );
      const sent = request();
      const response = await handle([sent], () => new Response("welcome", { status: 200 }));
      expect([response.status, await response.text(), response.headers.get("ratelimit")]).toEqual([200, "welcome", '"login";r=2;t=78']);
      expect(reported).toEqual([[sent, new Error("classifier down"), "countWhen"]]);
      expect(reported[0]?.[0]).toBe(sent);
      expect((await limiter.peek("ip")).remaining).toBe(2); // counted: nothing given back
    }
  });

  it("createGuard's finish: the same; without onCallbackError the error is logged with console.error", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const limiter = limiterOf();
    const failure = new Error("classifier down");
    const guard = createGuard({
      limiter,
      key: () => "ip",
      countWhen: () => {
        throw failure;
      },
    });
    const { finish } = await guard(request());
    const response = await finish(new Response("welcome"));
    expect([response.status, response.headers.get("ratelimit")]).toEqual([200, '"login";r=2;t=78']);
    expect(logged.mock.calls).toEqual([
      ["[sluice] createGuard: countWhen threw; the response was served and the request counts (nothing refunded). Pass onCallbackError to report it yourself.", failure],
    ]);
    expect((await limiter.peek("ip")).remaining).toBe(2);
  });

  it("with a concurrency lease: the lease is still freed when the response is produced", async () => {
    const limiter = new RateLimiter({ store: store(), limits: concurrency({ limit: 1, name: "exports" }) });
    const reported: string[] = [];
    const { handle } = createPipeline<[request: Request]>(
      { limiter, key: () => "k", countWhen: () => Promise.reject(new Error("down")), onCallbackError: (_r, _e, callback) => reported.push(callback) },
      { where: "test", request: (r) => r },
    );
    const response = await handle([request("/export")], () => new Response(null, { status: 204 }));
    expect(response.status).toBe(204);
    expect(reported).toEqual(["countWhen"]);
    expect((await limiter.peek("k")).remaining).toBe(1);
  });
});
