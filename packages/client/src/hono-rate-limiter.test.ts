/**
 * Against a real Hono app on `@hono/node-server` limited by hono-rate-limiter, served on
 * 127.0.0.1. hono-rate-limiter writes draft-6 fields by default (`standardHeaders: "draft-6"`,
 * also for `true`) or the draft-7 dictionary (`"draft-7"`), and never `X-RateLimit-*` nor the
 * IETF lists. `Date` is frozen for the header tests (sockets and timers run for real).
 */
import { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseRateLimit, rateLimitedFetch } from "./index.js";
import { type Running, serveFetch } from "./test/servers.js";

/** 2023-11-14T22:14:00Z */
const T0 = 1_700_000_040_000;

function honoApp(windowMs: number, limit: number, standardHeaders: "draft-6" | "draft-7"): Promise<Running> {
  const app = new Hono();
  app.use(rateLimiter({ windowMs, limit, standardHeaders, keyGenerator: () => "one-client" }));
  app.get("/", (c) => c.text("ok"));
  return serveFetch(app.fetch);
}

function rateLimitFields(response: Response): Record<string, string> {
  return Object.fromEntries([...response.headers].filter(([name]) => /ratelimit|retry-after/.test(name)));
}

afterEach(() => {
  vi.useRealTimers();
});

describe("hono-rate-limiter's headers, read by parseRateLimit (limit 3 per minute)", () => {
  const fields = {
    "draft-6": (remaining: number, reset: number) => ({
      "ratelimit-limit": "3",
      "ratelimit-policy": "3;w=60",
      "ratelimit-remaining": String(remaining),
      "ratelimit-reset": String(reset),
    }),
    "draft-7": (remaining: number, reset: number) => ({ ratelimit: `limit=3, remaining=${remaining}, reset=${reset}`, "ratelimit-policy": "3;w=60" }),
  };

  it.each(["draft-6", "draft-7"] as const)("%s", async (style) => {
    vi.useFakeTimers({ toFake: ["Date"], now: T0 });
    const server = await honoApp(60_000, 3, style);
    try {
      const seen: { status: number; fields: Record<string, string>; info: unknown }[] = [];
      const get = async () => {
        const response = await fetch(server.url);
        seen.push({ status: response.status, fields: rateLimitFields(response), info: parseRateLimit(response.headers, { now: Date.now() }) });
        await response.arrayBuffer();
      };
      for (let i = 0; i < 4; i++) await get();
      vi.setSystemTime(T0 + 20_500);
      await get();

      const f = fields[style];
      expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 429, 429]);
      expect(seen.map((s) => s.fields)).toEqual([
        f(2, 60),
        f(1, 60),
        f(0, 60),
        { ...f(0, 60), "retry-after": "60" },
        { ...f(0, 40), "retry-after": "40" },
      ]);
      const policy = (remaining: number, reset: number) => ({ policy: "default", quota: 3, window: 60, remaining, resetSeconds: reset });
      expect(seen.map((s) => s.info)).toEqual([
        { style, retryAfterSeconds: undefined, policies: [policy(2, 60)] },
        { style, retryAfterSeconds: undefined, policies: [policy(1, 60)] },
        { style, retryAfterSeconds: undefined, policies: [policy(0, 60)] },
        { style, retryAfterSeconds: 60, policies: [policy(0, 60)] },
        { style, retryAfterSeconds: 40, policies: [policy(0, 40)] },
      ]);
    } finally {
      await server.close();
    }
  });
});

describe("rateLimitedFetch against hono-rate-limiter, real clock (limit 4 per second)", () => {
  it.concurrent.each(["draft-6", "draft-7"] as const)("%s: 12 requests, not one 429", async (style) => {
    const server = await honoApp(1_000, 4, style);
    try {
      const statuses: number[] = [];
      const waits: number[] = [];
      const api = rateLimitedFetch({
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          statuses.push(response.status);
          return response;
        },
        onWait: ({ waitMs }) => waits.push(waitMs),
      });
      for (let i = 0; i < 12; i++) await (await api(server.url)).arrayBuffer();
      expect(statuses).toEqual(Array(12).fill(200));
      expect(waits.length).toBeGreaterThanOrEqual(2);
    } finally {
      await server.close();
    }
  });
});
