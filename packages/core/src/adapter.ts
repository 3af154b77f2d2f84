/**
 * `@sluice/core/adapter`: what an adapter author needs, and nothing an application does.
 *
 * - The request pipeline, written once for every adapter: {@link createPipeline} over a
 *   {@link Platform} (where the framework's `Request` is, where `decision.pending` goes, the
 *   adapter's name for error messages), giving a {@link Pipeline}: `check` (or `checkNow`) → an
 *   {@link Outcome} (the decision, the rate-limit headers as a {@link HeaderList}, the 429),
 *   `delay`, `finish` (headers, `countWhen`, lease release), `release`, or `handle` for all of it.
 * - The header writer machinery: {@link resolveHeaderStyles} validates the `headers` option,
 *   {@link compileRateLimitHeaders} builds a limiter's writer once (everything static computed
 *   then), {@link HEADER_FORMATTERS} is the table of styles; {@link mergeRateLimitHeaders} joins
 *   the headers of two layers that limited one request; {@link ietfPolicyHeader} is a limiter's
 *   `RateLimit-Policy` value and {@link partitionKeyOf} the `pk` of a storage key.
 * - {@link describeValue}, to write configuration errors the way core does; {@link isPolicy} tells
 *   a policy from anything else (an adapter whose arguments are overloaded), {@link holdsLeases}
 *   whether its allowed requests hold a lease the adapter must release.
 *
 * One callback convention, no exceptions: every callback gets the framework's own arguments
 * first, in the framework's order, then what Sluice adds (`key`, `response`, `decision`, `info`).
 * An adapter chooses `Args`, its framework's argument tuple, and every option follows from it.
 *
 * @example A framework whose handlers get `(request, env, ctx)`
 * ```ts
 * import { type PipelineOptions, createPipeline } from "@sluice/core/adapter";
 *
 * type Args = [request: Request, env: Env, ctx: ExecutionContext];
 *
 * export function guarded(handler: (...args: [...Args, decision: Decision | undefined]) => Promise<Response>, options: PipelineOptions<Args>) {
 *   const { handle } = createPipeline<Args>(options, {
 *     where: "guarded",
 *     tag: "my-adapter", // errors read "[sluice] [my-adapter] key must be …"
 *     params: "request, env, ctx",
 *     request: (request) => request,
 *     waitUntil: (_request, _env, ctx) => (promise) => ctx.waitUntil(promise),
 *   });
 *   return (request: Request, env: Env, ctx: ExecutionContext) => handle([request, env, ctx], (decision) => handler(request, env, ctx, decision));
 * }
 * ```
 *
 * @module
 */
export {
  createPipeline,
  describeValue,
  type Pipeline,
  type Platform,
  type Outcome,
  type HeaderList,
  type PipelineOptions,
  type PipelineCommonOptions,
  type PipelineLimiterOptions,
  type PipelineTieredOptions,
  type CallbackName,
  type DecisionInfo,
  type TierSettings,
  type TierConfig,
} from "./pipeline/index.js";
export {
  compileRateLimitHeaders,
  resolveHeaderStyles,
  mergeRateLimitHeaders,
  ietfPolicyHeader,
  partitionKeyOf,
  HEADER_FORMATTERS,
  type HeaderFormatter,
  type HeaderWriter,
  type HeaderSink,
  type HeaderStyle,
} from "./headers.js";
export { holdsLeases, isPolicy } from "./algorithms/index.js";
export type { Decision, MaybePromise } from "./types.js";
