/**
 * The request pipeline with a concurrency limit: the lease of an allowed request is freed when the
 * response has been produced — a streamed body when it ends, fails or is cancelled; a response
 * without a body at once; a handler that throws at once — through `handle` (Next route handlers,
 * Workers), `finish` (Hono) and `createGuard`'s `release()`.
 */
import { slowBody } from "@sluice/testing/streams";
import { describe, expect, it } from "vitest";
import {
  MemoryStore,
  QUOTA_EXCEEDED_TYPE,
  RateLimiter,
  SluiceInputError,
  type Store,
  concurrency,
  createGuard,
  fixedWindow,
} from "./index.js";
import { createPipeline } from "./adapter.js";

type Args = [request: Request];
const platform = { where: "test", request: (request: Request) => request };

function limiterOf(limit: number, options: { mode?: "dry-run"; store?: Store; onStoreFailure?: (error: unknown) => void } = {}) {
  return new RateLimiter({ store: options.store ?? new MemoryStore(), limits: concurrency({ limit, name: "exports" }), ...options });
}


const request = () => new Request("https://api.test/export");

describe("handle: the lease is held until the response has been produced", () => {
  it("a streamed body holds its slot until the stream ends: a second request meanwhile is a 429, after it passes", async () => {
    const limiter = limiterOf(1);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const first = await handle([request()], () => new Response(slowBody(4, 50), { headers: { "content-type": "text/plain" } }));
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("text/plain");
    expect(first.headers.get("RateLimit-Policy")).toBe('"exports";q=1;qu="concurrent-requests"');
    expect(first.headers.get("RateLimit")).toBe('"exports";r=0;t=1');
    const reader = first.body!.getReader();
    await reader.read(); // the stream has begun: the slot is held
    const second = await handle([request()], () => new Response("never"));
    expect(second.status).toBe(429);
    expect(second.headers.get("Retry-After")).toBe("1");
    expect(second.headers.get("content-type")).toBe("application/problem+json");
    expect(await second.json()).toMatchObject({ type: QUOTA_EXCEEDED_TYPE, status: 429, retryAfter: 1, "violated-policies": ["exports"] });
    let text = "chunk 0\n";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toBe("chunk 0\nchunk 1\nchunk 2\nchunk 3\n");
    // the end of the body reached the reader only once the slot was free
    expect((await limiter.peek("k")).remaining).toBe(1);
    const third = await handle([request()], () => new Response("ok"));
    expect([third.status, await third.text()]).toEqual([200, "ok"]);
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a cancelled stream (the client went away) frees its slot, and the handler's stream is cancelled too", async () => {
    const limiter = limiterOf(1);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    let cancelled: unknown;
    const body = new ReadableStream<Uint8Array>({
      pull: (controller) => controller.enqueue(new Uint8Array([1])),
      cancel: (reason) => {
        cancelled = reason;
      },
    });
    const response = await handle([request()], () => new Response(body));
    const reader = response.body!.getReader();
    await reader.read();
    expect((await limiter.peek("k")).remaining).toBe(0);
    await reader.cancel("gone");
    expect(cancelled).toBe("gone");
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a body that fails frees its slot, and the reader sees the failure", async () => {
    const limiter = limiterOf(1);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array([1]));
      },
      pull(controller) {
        controller.error(new Error("disk full"));
      },
    });
    const response = await handle([request()], () => new Response(body));
    await expect(response.arrayBuffer()).rejects.toThrow("disk full");
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a response without a body frees the slot before it is returned; a handler that throws frees it too", async () => {
    const limiter = limiterOf(1);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const empty = await handle([request()], () => new Response(null, { status: 204 }));
    expect(empty.status).toBe(204);
    expect((await limiter.peek("k")).remaining).toBe(1);
    const redirect = await handle([request()], () => Response.redirect("https://api.test/elsewhere", 303));
    expect([redirect.status, redirect.headers.get("location"), redirect.headers.get("RateLimit")]).toEqual([303, "https://api.test/elsewhere", '"exports";r=0;t=1']);
    expect((await limiter.peek("k")).remaining).toBe(1);
    await expect(handle([request()], () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect((await limiter.peek("k")).remaining).toBe(1);
    await expect(handle([request()], () => "not a response" as never)).rejects.toThrow(SluiceInputError);
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a HEAD request frees its slot as soon as the handler has answered: its body is never sent", async () => {
    const limiter = limiterOf(1);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    const head = await handle([new Request("https://api.test/export", { method: "HEAD" })], () => new Response(slowBody(3, 20)));
    expect(head.status).toBe(200);
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a dry-run limiter holds and frees leases exactly as an enforcing one, and lets the request through", async () => {
    const limiter = limiterOf(1, { mode: "dry-run" });
    const reports: boolean[] = [];
    const { handle } = createPipeline<Args>({ limiter, key: () => "k", onLimited: (_r, d) => (reports.push(d.allowed), new Response(null, { status: 429 })) }, platform);
    const first = await handle([request()], () => new Response(slowBody(2, 20)));
    const second = await handle([request()], () => new Response("served anyway"));
    expect([second.status, await second.text(), reports]).toEqual([200, "served anyway", [false]]);
    await first.text();
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("countWhen's refund and the release both happen; a failing release goes to onStoreFailure and the response still goes out", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: [concurrency({ limit: 1 }), fixedWindow({ limit: 5, window: "1m", name: "per-minute" })] });
    const { handle } = createPipeline<Args>({ limiter, key: () => "k", countWhen: (_request, response) => response.status >= 400 }, platform);
    await (await handle([request()], () => new Response("fine"))).text();
    expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([1, 5]);

    const failures: unknown[] = [];
    const inner = new MemoryStore();
    const broken: Store = {
      bind(namespace) {
        const bound = inner.bind(namespace);
        return {
          consume: bound.consume.bind(bound),
          peek: bound.peek.bind(bound),
          reset: bound.reset.bind(bound),
          refund: bound.refund.bind(bound),
          release: () => Promise.reject(new Error("redis went away")),
        };
      },
    };
    const brokenLimiter = limiterOf(1, { store: broken, onStoreFailure: (error) => failures.push(error) });
    const pipeline = createPipeline<Args>({ limiter: brokenLimiter, key: () => "k" }, platform);
    const response = await pipeline.handle([request()], () => new Response("still served"));
    expect(await response.text()).toBe("still served");
    expect(failures.map(String)).toEqual(["Error: redis went away"]);
  });

  it("without a concurrency limit nothing is wrapped: finish returns the handler's own response", async () => {
    const limiter = new RateLimiter({ limits: fixedWindow({ limit: 5, window: "1m" }) });
    const { check, finish } = createPipeline<Args>({ limiter, key: () => "k", headers: false }, platform);
    const outcome = await check(request());
    expect(outcome.decision?.lease).toBeUndefined();
    const own = new Response("mine");
    expect(finish(outcome, own)).toBe(own);
  });

  it("50 concurrent requests through handle, handlers held until the others are answered: 3 run at once, 47 get the 429", async () => {
    const limiter = limiterOf(3);
    const { handle } = createPipeline<Args>({ limiter, key: () => "k" }, platform);
    let running = 0;
    let most = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let denials = 0;
    const responses = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const response = await handle([request()], async () => {
          running++;
          most = Math.max(most, running);
          await released;
          running--;
          return new Response("done");
        });
        if (response.status === 429 && ++denials === 47) release();
        await response.arrayBuffer();
        return response.status;
      }),
    );
    expect(most).toBe(3);
    expect(responses.filter((s) => s === 200)).toHaveLength(3);
    expect(responses.filter((s) => s === 429)).toHaveLength(47);
    expect((await limiter.peek("k")).remaining).toBe(3);
  });
});

describe("createGuard: release() for code that calls its handler itself", () => {
  it("frees the lease; resolves at once without one", async () => {
    const limiter = limiterOf(1);
    const guard = createGuard({ limiter, key: () => "k" });
    const first = await guard(request());
    expect([first.response, typeof first.decision?.lease]).toEqual([undefined, "string"]);
    const second = await guard(request());
    expect(second.response?.status).toBe(429);
    await second.release(); // holds nothing
    expect((await limiter.peek("k")).remaining).toBe(0);
    await first.release();
    await first.release(); // twice is fine
    expect((await limiter.peek("k")).remaining).toBe(1);
    const plain = createGuard({ limiter: new RateLimiter({ limits: fixedWindow({ limit: 1, window: "1m" }) }), key: () => "k" });
    await expect((await plain(request())).release()).resolves.toBeUndefined();
  });
});
