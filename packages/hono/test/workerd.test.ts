/**
 * `@sluice/hono` in workerd (Miniflare): the headers go through Hono, so a middleware registered
 * before `rateLimiter` reads them from `c.res.headers` after `await next()` — on Workers as on
 * `@hono/node-server` and under `app.request()` (src/node-server.test.ts).
 */
import { type StartedWorker, startWorker } from "@sluice/testing/miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let worker: StartedWorker | undefined;

beforeAll(async () => {
  worker = await startWorker({ entry: new URL("./fixtures/outer-middleware.ts", import.meta.url) });
});

afterAll(async () => {
  await worker?.stop();
});

describe("rateLimiter on Workers", () => {
  it("a middleware before it reads RateLimit (and Retry-After on the 429) from c.res.headers after await next()", async () => {
    const seen = [];
    for (const path of ["/", "/raw", "/"]) {
      const response = await fetch(new URL(path, worker?.url));
      await response.text();
      seen.push([path, response.status, response.headers.get("ratelimit"), response.headers.get("x-seen-ratelimit"), response.headers.get("x-seen-retry-after")]);
    }
    expect(seen).toEqual([
      ["/", 200, '"api";r=1;t=50', '"api";r=1;t=50', "none"],
      ["/raw", 200, '"api";r=0;t=50', '"api";r=0;t=50', "none"],
      ["/", 429, '"api";r=0;t=50', '"api";r=0;t=50', "50"],
    ]);
  });
});
