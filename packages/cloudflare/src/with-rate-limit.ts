/**
 * `withRateLimit(handler, options)`: rate limiting around a module Worker's `fetch(request, env, ctx)`.
 *
 * @module
 */
import { type Decision, RateLimiter, SluiceConfigError, UNKNOWN_CLIENT_KEY, fixedWindow } from "@sluice/core";
import { type Pipeline, type PipelineOptions, type Platform, createPipeline, describeValue } from "@sluice/core/adapter";
import type { WithRateLimitOptions, WorkerArgs } from "./options.js";

export { UNKNOWN_CLIENT_KEY };

/** A Worker's `fetch` with the request's decision as a fourth argument (`undefined` when `skip` said so). */
export type RateLimitedFetch<Env> = (
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rateLimit: Decision | undefined,
) => Response | Promise<Response>;

/** A module Worker's handler object whose `fetch` gets the decision as a fourth argument. */
export interface RateLimitedHandler<Env> {
  fetch: RateLimitedFetch<Env>;
}

/** What {@link withRateLimit} returns: the handler, its `fetch` rate-limited. */
export type WithRateLimitHandler<Env, H = object> = Omit<H, "fetch"> & {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response>;
};

const platform: Platform<WorkerArgs<unknown>> = {
  where: "withRateLimit",
  tag: "cloudflare",
  params: "request, env, ctx",
  request: (request) => request,
  waitUntil: (_request, _env, ctx) => (typeof ctx?.waitUntil === "function" ? (promise) => ctx.waitUntil(promise) : undefined),
};

/**
 * Rate-limits a module Worker. Each request is keyed (`key`, or the client address with `trust`)
 * and checked against the limiter (or its tier's limits). Denied: the RFC 9457 429 (or
 * `onLimited`'s response) is returned and the handler is not called. Allowed: the handler's
 * `fetch` is called — with the decision as a fourth argument — after waiting `delayMs` if a
 * shaping `leakyBucket` asks for it, and the rate-limit headers are added to its response (a copy
 * if its headers are immutable). Either way `decision.pending` goes to `ctx.waitUntil`, so
 * background work outlives the response. Other handlers of the object (`scheduled`, `queue`, …)
 * are kept as they are.
 *
 * The limiter usually needs `env` (the Durable Object binding), so `limiter` (and, with tiers,
 * `store`) may be a factory of `env`; it is called at the first request of each `env` object and
 * cached. Misconfiguration throws `SluiceConfigError` when `withRateLimit()` is called (an
 * invalid limiter returned by the factory: at the first request).
 *
 * @param handler - `{ fetch(request, env, ctx, rateLimit) }` (plus any other handlers), or the `fetch` function alone.
 * @param options - `limiter` (or `tiers` + `tier`), `key` (or `trust`), `cost`, `skip`, `headers`,
 *   `onLimited`, `countWhen`, `onDecision`, `onCallbackError` (see `WithRateLimitCommonOptions`,
 *   and `TierSettings` in `@sluice/core`). Callbacks get the Worker's `(request, env, ctx)`, then
 *   what Sluice adds: `tier(request, env, ctx, key)`, `onLimited(request, env, ctx, decision)`,
 *   `countWhen(request, env, ctx, response, decision)`, `onDecision(request, env, ctx, decision, info)`.
 * @returns The handler object with its `fetch` rate-limited.
 *
 * @example
 * ```ts
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { DurableObjectStore, type SluiceLimiter, withRateLimit } from "@sluice/cloudflare";
 * export { SluiceLimiter } from "@sluice/cloudflare";
 *
 * interface Env { SLUICE: DurableObjectNamespace<SluiceLimiter> }
 *
 * export default withRateLimit<Env>(
 *   {
 *     async fetch(request, env, ctx, rateLimit) {
 *       return Response.json({ hello: "world", remaining: rateLimit?.remaining });
 *     },
 *   },
 *   {
 *     limiter: (env) =>
 *       new RateLimiter({ store: new DurableObjectStore(env.SLUICE), limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *     trust: "cloudflare",
 *   },
 * );
 * ```
 */
export function withRateLimit<Env = unknown, H extends RateLimitedHandler<Env> = RateLimitedHandler<Env>>(
  handler: H | RateLimitedFetch<Env>,
  options: WithRateLimitOptions<Env>,
): WithRateLimitHandler<Env, H> {
  const inner: RateLimitedHandler<Env> | undefined =
    typeof handler === "function"
      ? { fetch: handler }
      : typeof handler === "object" && handler !== null && typeof (handler as Partial<H>).fetch === "function"
        ? handler
        : undefined;
  if (inner === undefined) {
    throw new SluiceConfigError(
      `[sluice] [cloudflare] handler must be a module Worker's { fetch(request, env, ctx) } or a fetch function; got ${describeValue(handler)}`,
      { option: "handler" },
    );
  }
  const pipelineFor = pipelines(options);

  function fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    return pipelineFor(env).handle([request, env, ctx], (decision) => inner!.fetch(request, env, ctx, decision));
  }

  const wrapped = typeof handler === "function" ? { fetch } : { ...handler, fetch };
  return wrapped as unknown as WithRateLimitHandler<Env, H>;
}

/** Validates `options` now and returns `env → pipeline`, building each `env`'s pipeline once (the factories need `env`). */
function pipelines<Env>(options: WithRateLimitOptions<Env>): (env: Env) => Pipeline<WorkerArgs<Env>> {
  const { limiter, store } = (typeof options === "object" && options !== null ? options : {}) as { limiter?: unknown; store?: unknown };
  const make = (env: Env, validateOnly: boolean): Pipeline<WorkerArgs<Env>> => {
    let made = limiter;
    if (typeof limiter === "function") {
      made = validateOnly ? new RateLimiter({ limits: fixedWindow({ limit: 1, window: 1000 }) }) : limiter(env);
      if (!(made instanceof RateLimiter)) {
        throw new SluiceConfigError(`[sluice] [cloudflare] limiter must be a RateLimiter or a factory (env) => RateLimiter; the factory returned ${describeValue(made)}`, {
          option: "limiter",
        });
      }
    }
    // with a store factory, the options are checked against a throwaway MemoryStore first
    const resolved = typeof store === "function" ? (validateOnly ? undefined : store(env)) : store;
    const concrete = typeof options === "object" && options !== null ? { ...options, limiter: made, store: resolved } : options;
    return createPipeline(concrete as PipelineOptions<WorkerArgs<Env>>, platform);
  };
  const first = make(undefined as Env, true);
  if (typeof limiter !== "function" && typeof store !== "function") return () => first;

  const byEnv = new WeakMap<object, Pipeline<WorkerArgs<Env>>>();
  let withoutEnv: Pipeline<WorkerArgs<Env>> | undefined;
  return (env) => {
    if (typeof env !== "object" || env === null) return (withoutEnv ??= make(env, false));
    let pipeline = byEnv.get(env);
    if (pipeline === undefined) {
      pipeline = make(env, false);
      byEnv.set(env, pipeline);
    }
    return pipeline;
  };
}
