/**
 * A concurrency limit through the Hono middleware: the lease is freed when the response has been
 * produced (a streamed `c.body(stream)` or `stream(c, ...)` body when it ends, a response without
 * a body at once, a handler that throws too), checked with `app.request` and with real concurrency
 * over HTTP on `@hono/node-server`.
 */
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { MemoryStore, QUOTA_EXCEEDED_TYPE, RateLimiter, concurrency, fixedWindow } from "@sluice/core";
import { Hono } from "hono";
import { stream } from "hono/streaming";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rateLimiter } from "./index.js";
import { sleep, slowBody } from "@sluice/testing/streams";


function exportsLimiter(limit: number) {
  return new RateLimiter({ store: new MemoryStore(), limits: concurrency({ limit, name: "exports" }) });
}

/** Reads the rest of a body. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += new TextDecoder().decode(value);
  }
}

describe("rateLimiter with a concurrency limit (app.request)", () => {
  it("a streamed c.body(stream) holds its slot until the stream ends: a second request meanwhile is a 429, after it passes", async () => {
    const limiter = exportsLimiter(1);
    const app = new Hono();
    app.use("/export", rateLimiter({ limiter, key: () => "k" }));
    app.get("/export", (c) => {
      c.header("content-type", "text/csv");
      return c.body(slowBody(4, 50));
    });
    const first = await app.request("/export");
    expect([first.status, first.headers.get("content-type"), first.headers.get("RateLimit-Policy"), first.headers.get("RateLimit")]).toEqual([
      200,
      "text/csv",
      '"exports";q=1;qu="concurrent-requests"',
      '"exports";r=0;t=1',
    ]);
    const reader = first.body!.getReader();
    await reader.read();
    const second = await app.request("/export");
    expect([second.status, second.headers.get("Retry-After"), second.headers.get("content-type")]).toEqual([429, "1", "application/problem+json"]);
    expect(await second.json()).toMatchObject({ type: QUOTA_EXCEEDED_TYPE, retryAfter: 1, "violated-policies": ["exports"] });
    expect(await drain(reader)).toBe("chunk 1\nchunk 2\nchunk 3\n");
    const third = await app.request("/export");
    expect(third.status).toBe(200);
    await third.arrayBuffer();
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("hono/streaming's stream() holds the slot until its callback is done", async () => {
    const limiter = exportsLimiter(1);
    const app = new Hono();
    app.use(rateLimiter({ limiter, key: () => "k" }));
    // the callback goes on only when the test says so: its slot is held however slow the machine
    let goOn!: () => void;
    const wentOn = new Promise<void>((resolve) => (goOn = resolve));
    app.get("/", (c) =>
      stream(c, async (s) => {
        await s.write("part 0\n");
        await wentOn;
        for (let i = 1; i < 3; i++) await s.write(`part ${i}\n`);
      }),
    );
    const first = await app.request("/");
    const reader = first.body!.getReader();
    await reader.read();
    expect((await app.request("/")).status).toBe(429);
    goOn();
    expect(await drain(reader)).toBe("part 1\npart 2\n");
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("frees the slot at once for a response without a body, a HEAD request, and when the handler throws", async () => {
    const limiter = exportsLimiter(1);
    const app = new Hono();
    app.use(rateLimiter({ limiter, key: () => "k" }));
    app.get("/empty", (c) => c.body(null, 204));
    app.get("/report", (c) => c.body(slowBody(3, 20)));
    app.get("/boom", () => {
      throw new Error("boom");
    });
    app.onError((error, c) => c.text(`failed: ${error.message}`, 500));
    expect((await app.request("/empty")).status).toBe(204);
    expect((await limiter.peek("k")).remaining).toBe(1);
    // Hono answers HEAD with the GET handler's response, its body dropped unread
    const head = await app.request("/report", { method: "HEAD" });
    expect([head.status, head.body]).toEqual([200, null]);
    expect((await limiter.peek("k")).remaining).toBe(1);
    const failed = await app.request("/boom");
    expect([failed.status, await failed.text()]).toEqual([500, "failed: boom"]);
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a concurrency limit and a rate limit in one limiter: c.get(\"rateLimit\") has the lease; a rate denial holds nothing", async () => {
    const limiter = new RateLimiter({ limits: [concurrency({ limit: 2, name: "exports" }), fixedWindow({ limit: 2, window: "1h", name: "hourly" })] });
    const app = new Hono<{ Variables: { rateLimit: import("@sluice/core").Decision | undefined } }>();
    app.use(rateLimiter({ limiter, key: () => "k" }));
    app.get("/", (c) => c.json({ lease: typeof c.get("rateLimit")?.lease }));
    expect(await (await app.request("/")).json()).toEqual({ lease: "string" });
    await (await app.request("/")).arrayBuffer();
    const third = await app.request("/");
    expect([third.status, third.headers.get("RateLimit-Policy")]).toEqual([429, '"exports";q=2;qu="concurrent-requests", "hourly";q=2;w=3600']);
    expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([2, 0]);
  });
});

describe("real concurrency over HTTP (@hono/node-server, MemoryStore)", () => {
  let server: ServerType;
  let base: string;
  const slow = exportsLimiter(3);
  const held = exportsLimiter(3);
  const streamed = exportsLimiter(1);
  let running = 0;
  let most = 0;
  /** /held handlers wait for this; the test settles it. */
  let release: () => void = () => {};
  let released = Promise.resolve();
  let holding = 0;

  beforeAll(async () => {
    const app = new Hono();
    app.use("/slow", rateLimiter({ limiter: slow, key: () => "one-key" }));
    app.get("/slow", async (c) => {
      running++;
      most = Math.max(most, running);
      await sleep(150);
      running--;
      return c.text("done");
    });
    app.use("/held", rateLimiter({ limiter: held, key: () => "one-key" }));
    app.get("/held", async (c) => {
      holding++;
      most = Math.max(most, holding);
      await released;
      holding--;
      return c.text("done");
    });
    app.use("/stream", rateLimiter({ limiter: streamed, key: () => "one-key" }));
    app.get("/stream", (c) => c.body(slowBody(4, 50)));
    base = await new Promise<string>((resolve) => {
      server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`));
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it("50 simultaneous requests to a route limited to 3 in flight, handlers held until the 47 others are answered: 3 served, 47 denied", async () => {
    most = 0;
    released = new Promise<void>((resolve) => (release = resolve));
    let denials = 0;
    const results = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const response = await fetch(`${base}/held`);
        if (response.status === 429 && ++denials === 47) release(); // every slot held: the rest were denied
        await response.arrayBuffer();
        return { status: response.status, retryAfter: response.headers.get("Retry-After") };
      }),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    const denied = results.filter((r) => r.status === 429);
    expect(denied).toHaveLength(47);
    expect(denied.every((r) => r.retryAfter === "1")).toBe(true);
    expect(most).toBe(3);
    expect((await held.peek("one-key")).remaining).toBe(3);
  });

  it("50 clients that retry until served (sustained load): all served, never more than 3 running at once", async () => {
    most = 0;
    const started = performance.now();
    let attempts = 0;
    const statuses = await Promise.all(
      Array.from({ length: 50 }, async (_, client) => {
        for (let attempt = 0; ; attempt++) {
          attempts++;
          const response = await fetch(`${base}/slow`);
          await response.arrayBuffer();
          if (response.status === 200) return 200;
          expect(response.status).toBe(429);
          if (performance.now() - started > 40_000) throw new Error("not served within 40 s");
          await sleep(20 + ((client * 7 + attempt * 13) % 40));
        }
      }),
    );
    console.log(
      `concurrency over HTTP (MemoryStore), sustained: limit 3, 50 clients retrying until served → 50 served in ${attempts} attempts, at most ${most} handlers running at once, ${Math.round(performance.now() - started)} ms`,
    );
    expect(statuses).toHaveLength(50);
    expect(most).toBe(3);
  }, 60_000);

  it("a streamed response holds its slot until the stream ends: a second request while it streams is a 429, and passes after", async () => {
    const first = await fetch(`${base}/stream`);
    expect(first.status).toBe(200);
    const reader = first.body!.getReader();
    await reader.read();
    const during = await fetch(`${base}/stream`);
    expect([during.status, during.headers.get("Retry-After")]).toEqual([429, "1"]);
    await during.arrayBuffer();
    expect(await drain(reader)).toMatch(/chunk 3\n$/);
    const after = await fetch(`${base}/stream`);
    expect(after.status).toBe(200);
    await after.arrayBuffer();
  });

  it("a client that goes away mid-stream frees its slot", async () => {
    const controller = new AbortController();
    const first = await fetch(`${base}/stream`, { signal: controller.signal });
    await first.body!.getReader().read();
    expect((await streamed.peek("one-key")).remaining).toBe(0);
    controller.abort();
    // the server learns of it when the socket closes: wait for that (the test's own timeout bounds it)
    while ((await streamed.peek("one-key")).remaining === 0) await sleep(10);
    expect((await streamed.peek("one-key")).remaining).toBe(1);
  });
});
