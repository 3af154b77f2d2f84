import { withRateLimit } from "@sluice/next";
import { apiKeyOf, storeKind, wrappedLimiter } from "../../../lib/limits";

export const runtime = "edge";
export const dynamic = "force-dynamic";

/** The same wrapper on the edge runtime: the build fails if anything it imports needs a Node.js API. */
export const GET = withRateLimit(
  // the handler gets Next's (request, context), then the request's decision
  async (request, _context, decision) =>
    Response.json({ route: "edge", store: storeKind(), path: request.nextUrl.pathname, remaining: decision?.remaining }),
  {
    limiter: wrappedLimiter("next-app:edge"),
    key: apiKeyOf,
  },
);
