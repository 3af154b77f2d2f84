import { withRateLimit } from "@sluice/next";
import { apiKeyOf, burstLimiter, storeKind } from "../../../../lib/limits";

export const dynamic = "force-dynamic";

/**
 * Two layers on one request: proxy.ts limits /api/guarded/* and forwards its headers here
 * (`forwardHeaders`), and this route has a limit of its own. Every response — the route's 429 too —
 * carries one set of rate-limit headers with the policies of both.
 */
export const GET = withRateLimit(
  async (_request, _context, decision) => Response.json({ route: "burst", store: storeKind(), remaining: decision?.remaining }),
  { limiter: burstLimiter(), key: apiKeyOf },
);
