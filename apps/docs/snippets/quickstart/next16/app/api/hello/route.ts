import { RateLimiter, slidingWindow } from "@sluice/core";
import { withRateLimit } from "@sluice/next";

const limiter = new RateLimiter({ limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }) });

export const GET = withRateLimit(
  async (request, context, decision) => Response.json({ hello: "world", remaining: decision?.remaining }),
  { limiter, key: (request) => request.headers.get("x-api-key") ?? "anonymous" },
);
