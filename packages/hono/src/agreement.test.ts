/**
 * Through the Hono middleware: every 429's headers agree with its body (the property over random
 * limits and sequences), `countWhen(c, response, decision)` gets Hono's own `c` first, and a
 * `countWhen` that throws serves the handler's response, counted, reporting
 * `onCallbackError(c, error, "countWhen")`.
 */
import { MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { checkHeadersAgreeWithBody, costOf } from "@sluice/testing/agreement";
import { type Context, Hono } from "hono";
import { describe, expect, it } from "vitest";
import { rateLimiter } from "./index.js";

const T0 = 1_700_000_022_000;

describe("rateLimiter: headers agree with the body on every 429 (property)", () => {
  it("app.request()", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const app = new Hono();
      app.use(rateLimiter({ limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: (c) => costOf(c.req.raw) }));
      app.get("*", (c) => c.text("ok"));
      return async (request) => app.request(request);
    });
    expect(checked).toBeGreaterThan(0);
  });
});

describe("rateLimiter: countWhen", () => {
  it("gets (c, response, decision): Hono's c, the handler's response, the request's decision", async () => {
    const calls: [Context, number, unknown][] = [];
    const contexts: Context[] = [];
    const app = new Hono();
    app.use(
      rateLimiter({
        limiter: new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 3, window: "1m" }) }),
        key: () => "k",
        countWhen: (c, response, decision) => (calls.push([c, response.status, decision.remaining]), true),
      }),
    );
    app.get("/", (c) => (contexts.push(c), c.text("created", 201)));
    expect((await app.request("/")).status).toBe(201);
    expect(calls.map(([, status, remaining]) => [status, remaining])).toEqual([[201, 2]]);
    expect(calls[0]?.[0]).toBe(contexts[0]);
  });

  it("one that throws or rejects: the handler's response is served with its headers, counted; onCallbackError(c, error, \"countWhen\")", async () => {
    for (const countWhen of [
      () => {
        throw new Error("down");
      },
      () => Promise.reject(new Error("down")),
    ]) {
      const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 3, window: "1m" }) });
      const reported: [string, string, string][] = [];
      const app = new Hono();
      app.use(rateLimiter({ limiter, key: () => "k", countWhen, onCallbackError: (c, error, callback) => reported.push([c.req.path, (error as Error).message, callback]) }));
      app.get("/login", (c) => c.text("welcome"));
      const response = await app.request("/login");
      expect([response.status, await response.text(), response.headers.get("ratelimit")]).toEqual([200, "welcome", '"3-per-1m";r=2;t=18']);
      expect(reported).toEqual([["/login", "down", "countWhen"]]);
      expect((await limiter.peek("k")).remaining).toBe(2);
    }
  });
});
