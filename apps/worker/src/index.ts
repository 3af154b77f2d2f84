/**
 * Hono on Cloudflare Workers, rate-limited by Sluice with the Durable Object store: every instance
 * of this Worker, in every location, shares one limit per client, decided by the `SluiceLimiter`
 * object that holds the client's key (with the object's clock).
 *
 * - `GET /`: not limited.
 * - `GET /api/*`: per client address (`CF-Connecting-IP`), a token bucket of 3 that refills one
 *   every 10 seconds and at most 5 requests in any minute (an exact sliding log); IETF
 *   `RateLimit`/`RateLimit-Policy` headers plus `X-RateLimit-*`, and the RFC 9457 429.
 */
import { DurableObjectStore, type SluiceLimiter } from "@sluice/cloudflare";
import { RateLimiter, slidingLog, tokenBucket } from "@sluice/core";
import { type RateLimitVariables, rateLimiter } from "@sluice/hono";
import { env } from "cloudflare:workers";
import { Hono } from "hono";

// The Durable Object class must be exported from the Worker's main module.
export { SluiceLimiter } from "@sluice/cloudflare";

declare global {
  namespace Cloudflare {
    interface Env {
      /** The SluiceLimiter namespace (wrangler.toml [[durable_objects.bindings]]). */
      SLUICE: DurableObjectNamespace<SluiceLimiter>;
    }
  }
}

/** The API's limits: a short burst and a per-minute budget, both per client address. */
export const API_LIMITS = [
  tokenBucket({ capacity: 3, refillRate: 1, interval: "10s", name: "burst" }),
  slidingLog({ limit: 5, window: "1m", name: "per-minute" }),
];

// `env` from "cloudflare:workers" is the Worker's bindings, readable at module scope, so the
// limiter is built once per isolate. (Building a store does no I/O: the first call to an object
// happens in a request.)
const apiLimiter = new RateLimiter({ store: new DurableObjectStore(env.SLUICE), limits: API_LIMITS, prefix: "api" });

const app = new Hono<{ Bindings: Cloudflare.Env; Variables: RateLimitVariables }>();

app.get("/", (c) => c.text("Sluice on Cloudflare Workers: try /api/hello"));

app.use("/api/*", rateLimiter({ limiter: apiLimiter, trust: "cloudflare" }));

app.get("/api/hello", (c) => {
  const decision = c.get("rateLimit"); // undefined only where a limiter's skip says so
  return c.json({ hello: "world", remaining: decision?.remaining, policy: decision?.policy });
});

export default app;
