/**
 * Against a real Express app limited by express-rate-limit, served on 127.0.0.1: its four header
 * styles (`standardHeaders: "draft-6" | "draft-7" | "draft-8"`, `legacyHeaders: true`) as it
 * really writes them, and what `parseRateLimit` reads from them; then `rateLimitedFetch` pacing
 * itself against each style with the real clock, without a single 429.
 *
 * The header tests freeze `Date` (only `Date`: sockets and timers run for real), so the server's
 * reset times and the parser's "now" are exact.
 */
import { createHash } from "node:crypto";
import express from "express";
import { type Options, rateLimit } from "express-rate-limit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseRateLimit, rateLimitedFetch } from "./index.js";
import { type Running, listen } from "./test/servers.js";

/** 2023-11-14T22:14:00Z */
const T0 = 1_700_000_040_000;

type Style = Pick<Options, "standardHeaders" | "legacyHeaders">;
const STYLES: [string, Style][] = [
  ["draft-6", { standardHeaders: "draft-6", legacyHeaders: false }],
  ["draft-7", { standardHeaders: "draft-7", legacyHeaders: false }],
  ["draft-8", { standardHeaders: "draft-8", legacyHeaders: false }],
  ["legacy", { standardHeaders: false, legacyHeaders: true }],
];

/** The rate-limit fields of a response, lower-cased, as the server sent them. */
function rateLimitFields(response: Response): Record<string, string> {
  return Object.fromEntries([...response.headers].filter(([name]) => /ratelimit|retry-after/.test(name)));
}

async function expressApp(limiters: Partial<Options>[]): Promise<Running> {
  const app = express();
  for (const options of limiters) app.use(rateLimit(options));
  app.get("/", (_request, response) => {
    response.send("ok");
  });
  return listen(app);
}

/** express-rate-limit's draft-8 partition key: base64 of the first 12 hex digits of SHA-256(key). */
const PK = Buffer.from(createHash("sha256").update("127.0.0.1").digest("hex").slice(0, 12)).toString("base64");

afterEach(() => {
  vi.useRealTimers();
});

describe("express-rate-limit's headers, read by parseRateLimit (limit 3 per minute)", () => {
  /** What each style writes for (remaining, reset seconds), with and without Retry-After. */
  const expected: Record<string, (remaining: number, reset: number) => Record<string, string>> = {
    "draft-6": (remaining, reset) => ({
      "ratelimit-limit": "3",
      "ratelimit-policy": "3;w=60",
      "ratelimit-remaining": String(remaining),
      "ratelimit-reset": String(reset),
    }),
    "draft-7": (remaining, reset) => ({ ratelimit: `limit=3, remaining=${remaining}, reset=${reset}`, "ratelimit-policy": "3;w=60" }),
    "draft-8": (remaining, reset) => ({
      ratelimit: `"3-in-1min"; r=${remaining}; t=${reset}`,
      "ratelimit-policy": `"3-in-1min"; q=3; w=60; pk=:${PK}:`,
    }),
    legacy: (remaining) => ({ "x-ratelimit-limit": "3", "x-ratelimit-remaining": String(remaining), "x-ratelimit-reset": "1700000100" }),
  };
  const parsed: Record<string, (remaining: number, reset: number) => object> = {
    "draft-6": (remaining, reset) => ({ policy: "default", quota: 3, window: 60, remaining, resetSeconds: reset }),
    "draft-7": (remaining, reset) => ({ policy: "default", quota: 3, window: 60, remaining, resetSeconds: reset }),
    "draft-8": (remaining, reset) => ({ policy: "3-in-1min", quota: 3, window: 60, remaining, resetSeconds: reset, partitionKey: PK }),
    legacy: (remaining, reset) => ({ policy: "default", quota: 3, remaining, resetSeconds: reset }),
  };

  it.each(STYLES)("%s", async (name, style) => {
    vi.useFakeTimers({ toFake: ["Date"], now: T0 });
    const server = await expressApp([{ windowMs: 60_000, limit: 3, ...style }]);
    try {
      const seen: { status: number; fields: Record<string, string>; info: unknown }[] = [];
      const get = async () => {
        const response = await fetch(server.url);
        seen.push({ status: response.status, fields: rateLimitFields(response), info: parseRateLimit(response.headers, { now: Date.now() }) });
        await response.arrayBuffer();
      };
      for (let i = 0; i < 4; i++) await get();
      vi.setSystemTime(T0 + 20_500); // 39.5 s left in the window
      await get();
      vi.setSystemTime(T0 + 60_000); // a new window
      await get();

      const fields = expected[name] as (remaining: number, reset: number) => Record<string, string>;
      const policy = parsed[name] as (remaining: number, reset: number) => object;
      const retry = (seconds: number) => ({ "retry-after": String(seconds) });
      expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 429, 429, 200]);
      expect(seen.map((s) => s.fields)).toEqual([
        fields(2, 60),
        fields(1, 60),
        fields(0, 60),
        { ...fields(0, 60), ...retry(60) },
        { ...fields(0, 40), ...retry(40) },
        name === "legacy" ? { ...fields(2, 0), "x-ratelimit-reset": "1700000160" } : fields(2, 60),
      ]);
      const style = name === "draft-8" ? "ietf" : name;
      expect(seen.map((s) => s.info)).toEqual([
        { style, retryAfterSeconds: undefined, policies: [policy(2, 60)] },
        { style, retryAfterSeconds: undefined, policies: [policy(1, 60)] },
        { style, retryAfterSeconds: undefined, policies: [policy(0, 60)] },
        { style, retryAfterSeconds: 60, policies: [policy(0, 60)] },
        { style, retryAfterSeconds: 40, policies: [policy(0, 40)] },
        { style, retryAfterSeconds: undefined, policies: [policy(2, 60)] },
      ]);
    } finally {
      await server.close();
    }
  });

  it("draft-8 with two limiters: two members appended to each field, one policy each", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: T0 });
    const server = await expressApp([
      { windowMs: 60_000, limit: 3, standardHeaders: "draft-8", legacyHeaders: false },
      { windowMs: 86_400_000, limit: 100, standardHeaders: "draft-8", legacyHeaders: false },
    ]);
    try {
      const response = await fetch(server.url);
      expect(rateLimitFields(response)).toEqual({
        ratelimit: '"3-in-1min"; r=2; t=60, "100-in-1day"; r=99; t=86400',
        "ratelimit-policy": `"3-in-1min"; q=3; w=60; pk=:${PK}:, "100-in-1day"; q=100; w=86400; pk=:${PK}:`,
      });
      expect(parseRateLimit(response.headers).policies).toEqual([
        { policy: "3-in-1min", quota: 3, window: 60, remaining: 2, resetSeconds: 60, partitionKey: PK },
        { policy: "100-in-1day", quota: 100, window: 86400, remaining: 99, resetSeconds: 86400, partitionKey: PK },
      ]);
    } finally {
      await server.close();
    }
  });
});

describe("rateLimitedFetch against express-rate-limit, real clock (limit 4 per second)", () => {
  it.concurrent.each(STYLES)("%s: 12 requests, not one 429", async (_name, style) => {
    const server = await expressApp([{ windowMs: 1_000, limit: 4, ...style }]);
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
      const started = Date.now();
      for (let i = 0; i < 12; i++) await (await api(server.url)).arrayBuffer();
      expect(statuses).toEqual(Array(12).fill(200));
      // 4 per window: the client had to wait at least twice, about a second each time
      expect(waits.length).toBeGreaterThanOrEqual(2);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await server.close();
    }
  });

  it("draft-8, three concurrent loops sharing one client: 15 requests, not one 429", async () => {
    const server = await expressApp([{ windowMs: 1_000, limit: 4, standardHeaders: "draft-8", legacyHeaders: false }]);
    try {
      const statuses: number[] = [];
      const api = rateLimitedFetch({
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          statuses.push(response.status);
          return response;
        },
      });
      const loop = async () => {
        for (let i = 0; i < 5; i++) await (await api(server.url)).arrayBuffer();
      };
      await Promise.all([loop(), loop(), loop()]);
      expect(statuses).toEqual(Array(15).fill(200));
    } finally {
      await server.close();
    }
  });
});
