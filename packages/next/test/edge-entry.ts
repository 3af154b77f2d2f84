/**
 * The entry the edge-runtime test bundles with esbuild and evaluates inside `@edge-runtime/vm`
 * (the Vercel Edge Runtime): it imports the BUILT packages (`dist`, never the sources), runs
 * decisions through `rateLimitProxy` and `withRateLimit`, and hands back plain JSON (objects
 * crossing the VM boundary are compared as data).
 */
import { MemoryStore, RateLimiter, type Store, tokenBucket } from "@sluice/core";
import { rateLimitProxy, withRateLimit } from "@sluice/next";
import { UpstashStore } from "@sluice/redis";
import { Redis } from "@upstash/redis";
import { NextRequest } from "next/server";

/** What one response looked like, as plain data. */
export interface Seen {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Whether the runtime has the Node.js globals a Node-only bundle would reach for. */
export function globalsSeen(): Record<string, string> {
  const g = globalThis as Record<string, unknown>;
  return {
    require: typeof g.require,
    process: typeof g.process,
    Buffer: typeof g.Buffer,
    module: typeof g.module,
    EdgeRuntime: typeof g.EdgeRuntime,
  };
}

async function seen(response: Response): Promise<Seen> {
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

const byApiKey = (request: NextRequest) => request.headers.get("x-api-key") ?? "anonymous";

/**
 * Four requests through `rateLimitProxy`, then four through a route handler wrapped with
 * `withRateLimit`, both over `store` with a burst of 3 refilled one per 20.25 s (a quarter second
 * off the whole seconds, so `t` and `Retry-After` are the same under Redis's µs clock).
 */
async function run(store: Store, apiKey: string): Promise<{ proxy: Seen[]; route: Seen[] }> {
  const limits = tokenBucket({ name: "edge", capacity: 3, refillRate: 1, interval: "20250ms" });
  const proxy = rateLimitProxy({ limiter: new RateLimiter({ store, prefix: "edge:proxy", limits }), key: byApiKey });
  const GET = withRateLimit(async (request: NextRequest) => Response.json({ path: request.nextUrl.pathname }), {
    limiter: new RateLimiter({ store, prefix: "edge:route", limits }),
    key: byApiKey,
  });
  const request = () => new NextRequest("https://edge.test/api/items", { headers: { "x-api-key": apiKey } });
  const out = { proxy: [] as Seen[], route: [] as Seen[] };
  for (let i = 0; i < 4; i++) out.proxy.push(await seen(await proxy(request())));
  for (let i = 0; i < 4; i++) out.route.push(await seen(await GET(request(), { params: Promise.resolve({}) })));
  return out;
}

/** With a `MemoryStore` whose clock is fixed at `nowMs`. */
export function runWithMemory(nowMs: number, apiKey: string): Promise<{ proxy: Seen[]; route: Seen[] }> {
  return run(new MemoryStore({ clock: () => nowMs }), apiKey);
}

/** With an `UpstashStore` over the real `@upstash/redis` client, using the runtime's own fetch. */
export function runWithUpstash(url: string, token: string, apiKey: string): Promise<{ proxy: Seen[]; route: Seen[] }> {
  return run(new UpstashStore(new Redis({ url, token, retry: false, enableTelemetry: false })), apiKey);
}
