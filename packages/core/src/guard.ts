/**
 * `createGuard`: the request pipeline over a plain Fetch `Request`, for code that calls its handler
 * itself (a Service Worker, Deno, Bun, a framework without an adapter).
 *
 * @module
 */
import { type PipelineOptions, createPipeline } from "./pipeline.js";
import type { Decision } from "./types.js";

/** Options of {@link createGuard}: `limiter`, or `tiers` + `tier`; and `key`, or `trust`. Callbacks get the `Request`. */
export type GuardOptions = PipelineOptions<[request: Request]>;

/** What a guard returns for one request. */
export interface GuardResult {
  /** The decision; `undefined` if `skip` said so. Hand `decision.pending` to your platform's `waitUntil`. */
  decision: Decision | undefined;
  /** Rate-limit headers to put on the response (empty if skipped). */
  headers: Headers;
  /** The response to return when denied (the 429, or `onLimited`'s). `undefined` when allowed. */
  response: Response | undefined;
}

/** A guard: decides one request. */
export type Guard = (request: Request) => Promise<GuardResult>;

/** `decision.pending` is the caller's: it is neither awaited nor handed anywhere. */
const leaveToCaller = () => () => {};

/**
 * The request pipeline as a function of a `Request`. Configuration is validated here,
 * synchronously. The caller waits `decision.delayMs` (if a shaping `leakyBucket` asks for it), runs
 * its handler and adds `headers` to the response (`addRateLimitHeaders`).
 *
 * @example
 * ```ts
 * const guard = createGuard({
 *   limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *   trust: "cloudflare", // key by CF-Connecting-IP
 * });
 * const { response, headers } = await guard(request);
 * if (response) return response; // the 429
 * ```
 *
 * @example Tiers
 * ```ts
 * const guard = createGuard({
 *   tiers: { free: [slidingWindow({ limit: 30, window: "1m" })], pro: [slidingWindow({ limit: 300, window: "1m" })] },
 *   key: (request) => request.headers.get("x-api-key") ?? "anonymous",
 *   tier: async (request, key) => (await db.plan(key)) ?? "free",
 *   onLimited: (request, decision) => Response.json({ retryAfterMs: decision.retryAfterMs }, { status: 429 }),
 * });
 * ```
 */
export function createGuard(options: GuardOptions): Guard {
  const { check } = createPipeline<[request: Request]>(options, { where: "createGuard", request: (request) => request, waitUntil: leaveToCaller });
  return async function guard(request) {
    const { decision, headers, response } = await check(request);
    return { decision, headers: new Headers(headers), response };
  };
}
