/**
 * The wrapper for App Router route handlers (`app/**\/route.ts`).
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import type { NextRequest } from "next/server.js";
import { type RateLimitOptions, buildGuard, keepAlive, kind, sleep, withHeaders } from "./options.js";

/**
 * A route handler as Next.js calls it: the request, then the route context (`{ params }`, a
 * promise of the dynamic segments). A handler that takes only the request fits too.
 */
export type RouteHandler<Context = unknown> = (request: NextRequest, context: Context) => Response | Promise<Response>;

/**
 * Options of {@link withRateLimit}: every function gets the request first and the route context
 * (`{ params }`) last.
 */
export type WithRateLimitOptions<Context = unknown> = RateLimitOptions<[context: Context]>;

/**
 * Rate limiting for one App Router route handler. Each call is keyed (`key`, or the client
 * address with `trust`) and checked against the limiter (or its tier's limits): a denied request
 * gets the 429 (`application/problem+json`, RFC 9457) or `onLimited`'s response and the handler
 * does not run; an allowed one runs the handler, and its response gets the rate-limit headers
 * (headers it already has win; a response with immutable headers is copied). A decision that
 * asks to be shaped (`delayMs > 0`) waits `delayMs` before the handler runs. Misconfiguration
 * throws `SluiceConfigError` naming the option when `withRateLimit()` is called.
 *
 * Works on both route runtimes (`export const runtime = "edge"` or the default `"nodejs"`).
 *
 * @param {RouteHandler} handler - The route handler to protect.
 * @param {WithRateLimitOptions} options - The same options as `rateLimitProxy` (without `proxy`); every function receives `(request, ..., context)`.
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
 *   async (request) => Response.json({ hello: "world" }),
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
    throw new SluiceConfigError(`${where}: the first argument must be the route handler, (request, context) => Response; got ${kind(handler)}`);
  }
  if (typeof options === "object" && options !== null && "proxy" in options) {
    throw new SluiceConfigError(`${where}: proxy is an option of rateLimitProxy; a route handler is wrapped directly`);
  }
  const guard = buildGuard<[context: Context]>(options, where);
  const waitUntil = options.waitUntil;

  return async function rateLimited(request: NextRequest, context: Context): Promise<Response> {
    const { decision, headers, response } = await guard({ request, extra: [context] });
    if (decision !== undefined) await keepAlive(decision.pending, undefined, waitUntil);
    if (response !== undefined) return response;
    if (decision !== undefined && decision.delayMs > 0) await sleep(decision.delayMs);
    const result = await handler(request, context);
    if (typeof result !== "object" || result === null || typeof (result as Partial<Response>).status !== "number") {
      throw new TypeError(`[sluice] ${where}: the route handler must return a Response; got ${kind(result)}`);
    }
    return withHeaders(result, headers);
  };
}
