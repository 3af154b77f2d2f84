/**
 * The wrapper for App Router route handlers (`app/**\/route.ts`).
 *
 * @module
 */
import { type Decision, SluiceConfigError } from "@sluice/core";
import { describeValue } from "@sluice/core/adapter";
import type { NextRequest } from "next/server.js";
import { FORWARDED_HEADERS, decodeForwarded } from "./forward.js";
import { type RateLimitOptions, nextPipeline } from "./options.js";

/**
 * A route handler as Next.js calls it — the request, then the route context (`{ params }`, a
 * promise of the dynamic segments) — and then the request's decision (`undefined` when `skip`
 * said so). A handler that takes only the request fits too.
 */
export type RouteHandler<Context = unknown> = (
  request: NextRequest,
  context: Context,
  rateLimit: Decision | undefined,
) => Response | Promise<Response>;

/**
 * Options of {@link withRateLimit}: every function gets Next.js's arguments, the request and the
 * route context (`{ params }`), then what Sluice adds: `key(request, context)`,
 * `tier(request, context, key)`, `onLimited(request, context, decision)`,
 * `countWhen(request, context, response, decision)`, `onDecision(request, context, decision, info)`.
 */
export type WithRateLimitOptions<Context = unknown> = RateLimitOptions<[context: Context]>;

/**
 * Rate limiting for one App Router route handler. Each call is keyed (`key`, or the client
 * address with `trust`) and checked against the limiter (or its tier's limits): a denied request
 * gets the 429 (`application/problem+json`, RFC 9457) or `onLimited`'s response and the handler
 * does not run; an allowed one runs the handler — with the decision as its last argument,
 * `handler(request, context, decision)` — and its response gets the rate-limit headers
 * (headers it already has win; a response with immutable headers is copied). A decision that
 * asks to be shaped (`delayMs > 0`) waits `delayMs` before the handler runs. With a
 * `concurrency()` limit the request's lease is freed once the response has been produced: when its
 * body (a stream too) ends or is cancelled, at once for a response without a body or a handler
 * that throws. Misconfiguration throws `SluiceConfigError` naming the option when
 * `withRateLimit()` is called.
 *
 * Works on both route runtimes (`export const runtime = "edge"` or the default `"nodejs"`).
 *
 * Behind a `rateLimitProxy` that limits the same request, give the proxy `forwardHeaders` for this
 * route: the proxy then hands its rate-limit headers to the route, and every response of the route
 * (its 429 too) carries one set that lists the policies of both layers — the IETF lists joined, the
 * single-policy styles and `Retry-After` from the layer that binds — so the headers agree with the
 * body. (Without it Next.js sends the proxy's headers in place of the route's.)
 *
 * @param {RouteHandler} handler - The route handler to protect: `(request, context, decision)`.
 * @param {WithRateLimitOptions} options - The same options as `rateLimitProxy` (without `proxy` and `forwardHeaders`); every function receives `(request, context, ...)`.
 * @returns {RouteHandler} The wrapped handler, to export as `GET`, `POST`, ….
 *
 * @example app/api/hello/route.ts
 * ```ts
 * import { RateLimiter, tokenBucket } from "@sluice/core";
 * import { withRateLimit } from "@sluice/next";
 *
 * const limiter = new RateLimiter({ limits: tokenBucket({ capacity: 10, refillRate: 1 }) });
 *
 * export const GET = withRateLimit(
 *   async (request, context, decision) => Response.json({ hello: "world", remaining: decision?.remaining }),
 *   { limiter, key: (request) => request.headers.get("x-api-key") ?? "anonymous" },
 * );
 * ```
 *
 * @example Keyed by a route parameter
 * ```ts
 * export const POST = withRateLimit(
 *   async (request, { params }: { params: Promise<{ team: string }> }) => Response.json(await params),
 *   { limiter, key: async (request, { params }) => `team:${(await params).team}`, cost: 5 },
 * );
 * ```
 */
export function withRateLimit<Context = unknown>(
  handler: RouteHandler<Context>,
  options: WithRateLimitOptions<Context>,
): (request: NextRequest, context: Context) => Promise<Response> {
  const where = "withRateLimit";
  if (typeof handler !== "function") {
    throw new SluiceConfigError(`[sluice] [next] handler must be the route handler, (request, context) => Response; got ${describeValue(handler)}`, {
      option: "handler",
    });
  }
  if (typeof options === "object" && options !== null && "proxy" in options) {
    throw new SluiceConfigError("[sluice] [next] proxy must be left out of withRateLimit: it is an option of rateLimitProxy (a route handler is wrapped directly)", {
      option: "proxy",
    });
  }
  if (typeof options === "object" && options !== null && "forwardHeaders" in options) {
    throw new SluiceConfigError(
      "[sluice] [next] forwardHeaders must be left out of withRateLimit: it is an option of rateLimitProxy (the proxy forwards, the route merges what it receives)",
      { option: "forwardHeaders" },
    );
  }
  const waitUntil = options?.waitUntil;
  const { handle } = nextPipeline<[context: Context]>(options, {
    where,
    tag: "next",
    params: "request, context",
    request: (request) => request,
    waitUntil: () => waitUntil,
    // the headers a rateLimitProxy with forwardHeaders left to this route
    outerHeaders: (request) => decodeForwarded(request.headers.get(FORWARDED_HEADERS)),
  });

  return function rateLimited(request: NextRequest, context: Context): Promise<Response> {
    return handle([request, context], (decision) => handler(request, context, decision));
  };
}
