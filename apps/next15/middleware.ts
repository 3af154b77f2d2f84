/**
 * Next.js 15 runs middleware.ts on the edge runtime by default: `rateLimitMiddleware` is the same
 * guard as `rateLimitProxy` (Next.js 16's proxy.ts), under the older name.
 */
import { rateLimitMiddleware } from "@sluice/next";
import { apiKeyOf, guardedLimiter } from "./lib/limits";

export const middleware = rateLimitMiddleware({
  limiter: guardedLimiter(),
  key: apiKeyOf,
  // the health check is never limited
  skip: (request) => request.nextUrl.pathname === "/api/guarded/health",
});

// Only these paths go through the middleware; everything else never does.
export const config = {
  matcher: "/api/guarded/:path*",
};
