import { withRateLimit } from "@sluice/next";
import { apiKeyOf, storeKind, wrappedLimiter } from "../../../lib/limits";

export const dynamic = "force-dynamic";

/** A route handler on the Node.js runtime, wrapped: not matched by proxy.ts. */
export const GET = withRateLimit(
  // the handler gets Next's (request, context), then the request's decision
  async (request, _context, decision) =>
    Response.json({ route: "wrapped", store: storeKind(), path: request.nextUrl.pathname, remaining: decision?.remaining }),
  {
    limiter: wrappedLimiter("next-app:wrapped"),
    key: apiKeyOf,
  },
);
