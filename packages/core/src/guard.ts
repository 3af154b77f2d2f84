/**
 * `createGuard`: the request pipeline over a plain Fetch `Request`, for code that calls its handler
 * itself (a Service Worker, Deno, Bun, a framework without an adapter).
 *
 * @module
 */
import { type PipelineOptions, createPipeline } from "./pipeline/index.js";
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
  /**
   * Frees the request's concurrency lease (`decision.lease`, with a `concurrency()` limit): call it
   * once the response has been sent — for a streamed body, when the stream ends — e.g. in a
   * `finally`. Resolves at once when the decision holds no lease; never rejects (a failing release
   * goes to the limiter's `onStoreFailure`, and the lease then expires on its own).
   */
  release(): Promise<void>;
}

/** A guard: decides one request. */
export type Guard = (request: Request) => Promise<GuardResult>;

/** `decision.pending` is the caller's: it is neither awaited nor handed anywhere. */
const leaveToCaller = () => () => {};

/**
 * The request pipeline as a function of a `Request`. Configuration is validated here,
 * synchronously. The caller waits `decision.delayMs` (if a shaping `leakyBucket` asks for it), runs
 * its handler and adds `headers` to the response (`addRateLimitHeaders`); with a `concurrency()`
 * limit it calls `release()` once the response has been sent.
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
 * @example A concurrency limit, on a server that calls its handler itself
 * ```ts
 * const guard = createGuard({ limiter: new RateLimiter({ limits: concurrency({ limit: 2 }) }), key: (request) => request.headers.get("x-api-key") ?? "anonymous" });
 * const { response, headers, release } = await guard(request);
 * if (response) return response;
 * try {
 *   return addRateLimitHeaders(await buildReport(), headers); // a body read to the end before the finally runs
 * } finally {
 *   await release();
 * }
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
  const { check, release } = createPipeline<[request: Request]>(options, { where: "createGuard", request: (request) => request, waitUntil: leaveToCaller });
  return async function guard(request) {
    const outcome = await check(request);
    const { decision, headers, response } = outcome;
    return { decision, headers: new Headers(headers), response, release: () => release(outcome) };
  };
}
