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
   * Finishes the request exactly as the adapters do: give it your handler's response and return
   * what it resolves to. It adds the rate-limit headers the response lacks (headers it already
   * has win; a response with immutable headers is copied), asks `countWhen` and refunds a request
   * that should not count (a `countWhen` that throws is reported to `onCallbackError` and the
   * response is served, counted), and with a `concurrency()` limit frees the lease once the
   * response has been produced — a body when it ends or is cancelled, at once without one. Call it
   * once per request; not needed when `response` is set (the 429 is complete).
   * @example
   * ```ts
   * const { response, finish } = await guard(request);
   * if (response) return response;
   * return finish(await handler(request));
   * ```
   */
  finish(response: Response): Promise<Response>;
  /**
   * Frees the request's concurrency lease (`decision.lease`, with a `concurrency()` limit) by hand,
   * for code that does not use `finish`: call it once the response has been sent — for a streamed
   * body, when the stream ends — e.g. in a `finally`, or when the handler throws. Resolves at once
   * when the decision holds no lease (or it was already freed); never rejects (a failing release
   * goes to the limiter's `onStoreFailure`, and the lease then expires on its own).
   */
  release(): Promise<void>;
}

/** A guard: decides one request. */
export type Guard = (request: Request) => Promise<GuardResult>;

/** `decision.pending` is the caller's: it is neither awaited nor handed anywhere. */
const leaveToCaller = () => () => {};

/**
 * The request pipeline as a function of a `Request`, for code that calls its handler itself.
 * Configuration is validated here, synchronously. The guard decides; the caller waits
 * `decision.delayMs` (if a shaping `leakyBucket` asks for it), hands `decision.pending` to its
 * platform's `waitUntil`, runs its handler and returns `finish(handlerResponse)`, which applies the
 * rate-limit headers, `countWhen` and the release of a concurrency lease exactly as the adapters
 * do. Callbacks get the request first, then what Sluice adds: `tier(request, key)`,
 * `onLimited(request, decision)`, `countWhen(request, response, decision)`,
 * `onDecision(request, decision, info)`, `onCallbackError(request, error, callback)`.
 *
 * @example
 * ```ts
 * const guard = createGuard({
 *   limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *   trust: "cloudflare", // key by CF-Connecting-IP
 * });
 * const { response, finish } = await guard(request);
 * if (response) return response; // the 429
 * return finish(await handler(request)); // with the RateLimit headers
 * ```
 *
 * @example Count failed logins only
 * ```ts
 * const guard = createGuard({
 *   limiter: new RateLimiter({ limits: fixedWindow({ limit: 5, window: "15m" }) }),
 *   trust: "cloudflare",
 *   countWhen: (request, response) => response.status === 401, // a successful login is refunded
 * });
 * const { response, finish } = await guard(request);
 * return response ?? finish(await login(request));
 * ```
 *
 * @example A concurrency limit: the slot is held until the response's body ends
 * ```ts
 * const guard = createGuard({ limiter: new RateLimiter({ limits: concurrency({ limit: 2 }) }), key: (request) => request.headers.get("x-api-key") ?? "anonymous" });
 * const { response, finish, release } = await guard(request);
 * if (response) return response;
 * let report: Response;
 * try {
 *   report = await buildReport(); // a streamed body
 * } catch (error) {
 *   await release(); // no response: free the slot now
 *   throw error;
 * }
 * return finish(report); // frees the slot when the stream ends
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
  const { check, finish, release } = createPipeline<[request: Request]>(options, { where: "createGuard", request: (request) => request, waitUntil: leaveToCaller });
  return async function guard(request) {
    const outcome = await check(request);
    const { decision, headers, response } = outcome;
    return {
      decision,
      headers: new Headers(headers),
      response,
      finish: async (handlerResponse) => finish(outcome, handlerResponse),
      release: () => release(outcome),
    };
  };
}
