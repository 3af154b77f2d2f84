/**
 * A concurrency limit in Next.js: `withRateLimit` holds the lease until the route's response has
 * been produced (a streamed body until it ends); `rateLimitProxy` refuses one, since a proxy never
 * sees the route's response.
 */
import { MemoryStore, RateLimiter, SluiceConfigError, concurrency, fixedWindow } from "@sluice/core";
import { NextRequest } from "next/server";
import { describe, expect, it } from "vitest";
import { rateLimitMiddleware, rateLimitProxy, withRateLimit } from "./index.js";
import { slowBody } from "@sluice/testing/streams";

const request = () => new NextRequest("https://app.test/api/export");
const key = () => "k";

describe("withRateLimit with a concurrency limit", () => {
  it("a streamed route response holds its slot until the stream ends: a request meanwhile is a 429, one after passes", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: concurrency({ limit: 1, name: "exports" }) });
    const GET = withRateLimit(() => new Response(slowBody(4, 50), { headers: { "content-type": "text/csv" } }), { limiter, key });
    const first = await GET(request(), {});
    expect([first.status, first.headers.get("content-type"), first.headers.get("RateLimit-Policy")]).toEqual([200, "text/csv", '"exports";q=1;qu="concurrent-requests"']);
    const reader = first.body!.getReader();
    await reader.read();
    const during = await GET(request(), {});
    expect([during.status, during.headers.get("Retry-After")]).toEqual([429, "1"]);
    while (!(await reader.read()).done);
    const after = await GET(request(), {});
    expect(after.status).toBe(200);
    await after.text();
    expect((await limiter.peek("k")).remaining).toBe(1);
  });

  it("a handler that throws frees its slot", async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limits: concurrency({ limit: 1 }) });
    const GET = withRateLimit(
      () => {
        throw new Error("boom");
      },
      { limiter, key },
    );
    await expect(GET(request(), {})).rejects.toThrow("boom");
    expect((await limiter.peek("k")).remaining).toBe(1);
  });
});

describe("rateLimitProxy refuses a concurrency limit: a proxy never sees the route's response end", () => {
  it("on the limiter or on any tier, naming withRateLimit", () => {
    const withCap = new RateLimiter({ limits: [fixedWindow({ limit: 5, window: "1m" }), concurrency({ limit: 2 })] });
    expect(() => rateLimitProxy({ limiter: withCap, key })).toThrow(SluiceConfigError);
    expect(() => rateLimitMiddleware({ limiter: withCap, key })).toThrow(
      /^\[sluice\] \[next\] limiter must hold no concurrency\(\) limit in a proxy: a lease needs the end of the route's response.*withRateLimit$/,
    );
    expect(() => rateLimitProxy({ limiter: withCap, key })).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option: "limiter" }));
    const tier = () => "pro";
    const objectForm = () => rateLimitProxy({ tiers: { free: [fixedWindow({ limit: 5, window: "1m" })], pro: { limits: concurrency({ limit: 2 }) } }, tier, key });
    expect(objectForm).toThrow(SluiceConfigError);
    expect(objectForm).toThrow(expect.objectContaining({ option: "tiers.pro.limits" }));
    expect(() => rateLimitProxy({ tiers: { free: concurrency({ limit: 2 }) }, tier, key })).toThrow(SluiceConfigError);
    expect(() => rateLimitProxy({ tiers: { free: concurrency({ limit: 2 }) }, tier, key })).toThrow(expect.objectContaining({ option: "tiers.free" }));
    expect(() => rateLimitProxy({ limiter: new RateLimiter({ limits: fixedWindow({ limit: 5, window: "1m" }) }), key })).not.toThrow();
  });
});
