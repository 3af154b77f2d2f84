/**
 * Next.js 16 runs proxy.ts on the Node.js runtime (the only runtime proxy.ts has; for the edge
 * runtime, keep middleware.ts and export `rateLimitMiddleware(...)` as `middleware`).
 */
import { rateLimitProxy } from "@sluice/next";
import { apiKeyOf, guardedLimiter } from "./lib/limits";

export const proxy = rateLimitProxy({
  limiter: guardedLimiter(),
  key: apiKeyOf,
  // the health check is never limited
  skip: (request) => request.nextUrl.pathname === "/api/guarded/health",
  // a route with a limit of its own (withRateLimit): it writes one set of headers for both layers
  forwardHeaders: (request) => request.nextUrl.pathname === "/api/guarded/burst",
});

// Only these paths go through the proxy; everything else (pages, /_next/static, …) never does.
export const config = {
  matcher: "/api/guarded/:path*",
};
