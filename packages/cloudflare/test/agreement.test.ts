/**
 * The Workers `withRateLimit` (Node, over MemoryStore: the wrapper imports nothing from
 * `cloudflare:workers`): every 429's headers agree with its body (the property over random limits
 * and sequences), and a `countWhen` that throws serves the handler's response, counted, reporting
 * `onCallbackError(request, env, ctx, error, "countWhen")`. (In workerd, with the Durable Object
 * store: with-rate-limit.test.ts.)
 */
import { MemoryStore, RateLimiter, fixedWindow } from "@sluice/core";
import { checkHeadersAgreeWithBody, costOf } from "@sluice/testing/agreement";
import { describe, expect, it } from "vitest";
import { withRateLimit } from "../src/with-rate-limit.js";

const ctx = { waitUntil: () => {}, passThroughOnException: () => {} } as unknown as ExecutionContext;

describe("withRateLimit (Workers)", () => {
  it("headers agree with the body on every 429 (property)", async () => {
    const checked = await checkHeadersAgreeWithBody((limits, clock) => {
      const worker = withRateLimit(() => new Response("ok"), { limiter: new RateLimiter({ store: new MemoryStore({ clock }), limits }), key: () => "k", cost: costOf });
      return (request) => worker.fetch(request, {}, ctx);
    });
    expect(checked).toBeGreaterThan(0);
  });

  it("a countWhen that throws: the handler's response, counted; onCallbackError gets the Worker's arguments", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => 1_700_000_022_000 }), limits: fixedWindow({ limit: 3, window: "1m" }) });
    const reported: unknown[][] = [];
    const worker = withRateLimit(() => new Response("welcome"), {
      limiter,
      key: () => "ip",
      countWhen: async () => {
        throw new Error("down");
      },
      onCallbackError: (...args) => reported.push(args),
    });
    const env = {};
    const request = new Request("https://worker.test/login", { method: "POST" });
    const response = await worker.fetch(request, env, ctx);
    expect([response.status, await response.text(), response.headers.get("ratelimit")]).toEqual([200, "welcome", '"3-per-1m";r=2;t=18']);
    expect(reported).toEqual([[request, env, ctx, new Error("down"), "countWhen"]]);
    expect(reported[0]?.[0]).toBe(request);
    expect((await limiter.peek("ip")).remaining).toBe(2);
  });
});
