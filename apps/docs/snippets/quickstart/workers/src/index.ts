import { RateLimiter, slidingWindow, tokenBucket } from "@sluice/core";
import { DurableObjectStore, type SluiceLimiter, withRateLimit } from "@sluice/cloudflare";

export { SluiceLimiter } from "@sluice/cloudflare"; // the Durable Object class, from the main module

interface Env {
  SLUICE: DurableObjectNamespace<SluiceLimiter>;
}

export default withRateLimit<Env>(
  {
    async fetch(request, env, ctx, rateLimit) {
      return Response.json({ hello: "world", remaining: rateLimit?.remaining });
    },
  },
  {
    limiter: (env) =>
      new RateLimiter({
        store: new DurableObjectStore(env.SLUICE), // one object per key
        limits: [
          tokenBucket({ capacity: 5, refillRate: 1, interval: "1m", name: "burst" }), // 5 at once, then 1 per minute
          slidingWindow({ limit: 60, window: "1h", name: "per-hour" }),
        ],
      }),
    trust: "cloudflare", // key by CF-Connecting-IP
  },
);
