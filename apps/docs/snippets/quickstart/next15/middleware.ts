import { RateLimiter, slidingWindow } from "@sluice/core";
import { rateLimitMiddleware } from "@sluice/next";

// Next.js 15 runs middleware.ts on the edge runtime
export const middleware = rateLimitMiddleware({
  limiter: new RateLimiter({ limits: slidingWindow({ limit: 5, window: "1m", name: "per-minute" }) }),
  key: (request) => request.headers.get("x-api-key") ?? "anonymous",
});

export const config = { matcher: "/api/:path*" };
