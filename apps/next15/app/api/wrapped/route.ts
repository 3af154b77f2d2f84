import { withRateLimit } from "@sluice/next";
import { apiKeyOf, wrappedLimiter } from "../../../lib/limits";

export const dynamic = "force-dynamic";

/** A route handler on the Node.js runtime, wrapped: not matched by middleware.ts. */
export const GET = withRateLimit(
  // the handler gets Next's (request, context), then the request's decision
  async (request, _context, decision) => Response.json({ route: "wrapped", path: request.nextUrl.pathname, remaining: decision?.remaining }),
  { limiter: wrappedLimiter(), key: apiKeyOf },
);
