/**
 * The request pipeline, written once for every adapter: key the request (`key`, or the client
 * address with `trust`), `skip` it or not, find its tier (cached), price it (`cost`), decide (the
 * limiter's deny cache may answer without a store round trip), hand the decision's background work
 * to the platform's `waitUntil`, build the 429 (or `onLimited`'s response), wait `delayMs` when a
 * shaping policy asks for it, merge the rate-limit headers into the handler's response, and free the
 * request's concurrency lease (a `concurrency()` limit) once the response has been produced. A
 * decision from a dry-run limiter (`dryRun: true`) is never enforced: no 429, no wait, headers
 * only with `dryRunHeaders`, and a would-be denial goes to `onLimited` as a report. Every option is
 * validated here, once.
 *
 * An adapter describes its framework's arguments (a {@link Platform}) and calls
 * {@link Pipeline.handle}, or {@link Pipeline.check} and {@link Pipeline.finish} around its own
 * `next()`. One callback convention everywhere: the framework's own arguments first, in its own
 * order, then what Sluice adds (`key`, then `decision`).
 *
 * @module
 */
import { SluiceInputError, describe, tagged } from "../errors.js";
import type { RateLimiter } from "../limiter/index.js";
import { addRateLimitHeaders } from "../response.js";
import type { Decision, MaybePromise } from "../types.js";
import { OUTCOME_ARGS, createChecker, isPromiseLike, isResponse } from "./check.js";
import { HEAD_REQUESTS, holdUntilProduced, releaseLease } from "./lease.js";
import type { PipelineOptions } from "./options.js";
import type { Outcome, Pipeline, Platform } from "./platform.js";
import { type Config, validate } from "./validate.js";

export type {
  CallbackName,
  DecisionInfo,
  PipelineCommonOptions,
  PipelineLimiterOptions,
  PipelineOptions,
  PipelineTieredOptions,
  TierConfig,
  TierSettings,
} from "./options.js";
export type { HeaderList, Outcome, Pipeline, Platform } from "./platform.js";

/** Formats a value for an adapter's own error messages: strings quoted, anything else as written in code. */
export const describeValue: (value: unknown) => string = describe;

/**
 * Builds an adapter's request pipeline. Every option is validated now, synchronously:
 * misconfiguration throws `SluiceConfigError` whose `option` names the option, its message tagged
 * with `platform.tag`. A handler's answer that is not a `Response` is a `SluiceInputError`
 * (`option: "response"`) at that request.
 *
 * @example A framework whose handlers get `(request, env, ctx)`
 * ```ts
 * const pipeline = createPipeline<[request: Request, env: Env, ctx: ExecutionContext]>(options, {
 *   where: "withRateLimit",
 *   tag: "my-workers",
 *   params: "request, env, ctx",
 *   request: (request) => request,
 *   waitUntil: (_request, _env, ctx) => (promise) => ctx.waitUntil(promise),
 * });
 * return pipeline.handle([request, env, ctx], (decision) => handler(request, env, ctx, decision));
 * ```
 */
export function createPipeline<Args extends unknown[]>(options: PipelineOptions<Args>, platform: Platform<Args>): Pipeline<Args> {
  const { tag } = platform;
  const config = validate(options, platform);
  const { countWhen } = config;
  const { check, checkNow } = createChecker(config, platform);

  function finish(outcome: Outcome, response: Response, headersWritten = false): MaybePromise<Response> {
    if (!isResponse(response)) {
      // what the handler answered (an adapter), or what the caller of finish() passed
      throw new SluiceInputError(tagged(tag, `response must be a Response (what the handler returns); got ${describe(response)}`), { option: "response" });
    }
    const out = headersWritten || outcome.headers.length === 0 ? response : addRateLimitHeaders(response, outcome.headers);
    const { decision, key, limiter } = outcome;
    if (decision === undefined || key === undefined || limiter === undefined) return out;
    // a concurrency lease (only with a concurrency() limit): held until the response is produced
    const held = decision.lease !== undefined;
    // countWhen: a request the store charged that should not count gets its units back
    if (countWhen === undefined || !decision.allowed || decision.reason !== "ok") {
      return held ? holdUntilProduced(out, limiter, key, decision, HEAD_REQUESTS.has(outcome)) : out;
    }
    const args = (OUTCOME_ARGS.get(outcome) ?? []) as Args;
    const refunded = refundUnlessCounted(config, countWhen, args, response, decision, limiter, key);
    return held ? refunded.then(() => holdUntilProduced(out, limiter, key, decision, HEAD_REQUESTS.has(outcome))) : refunded.then(() => out);
  }

  function handle(args: Args, next: (decision: Decision | undefined) => MaybePromise<Response>): Promise<Response> {
    // an in-memory limiter with synchronous callbacks decides in place: no promise until the handler's
    let checked: MaybePromise<Outcome>;
    try {
      checked = checkNow(...args);
    } catch (error) {
      return Promise.reject(error);
    }
    return isPromiseLike(checked) ? Promise.resolve(checked).then((outcome) => served(outcome, next)) : served(checked, next);
  }

  /** The rest of {@link handle} once the request is decided: the 429, or the handler and `finish`. */
  async function served(outcome: Outcome, next: (decision: Decision | undefined) => MaybePromise<Response>): Promise<Response> {
    if (outcome.response !== undefined) return outcome.response;
    if (outcome.decision !== undefined && outcome.decision.delayMs > 0 && !outcome.decision.dryRun) await delay(outcome);
    if (outcome.decision?.lease === undefined) return finish(outcome, await next(outcome.decision));
    // a concurrency lease: freed when the body ends (finish), or now if there is no response
    let response: Response;
    try {
      response = await next(outcome.decision);
    } catch (error) {
      await release(outcome);
      throw error;
    }
    try {
      return await finish(outcome, response);
    } catch (error) {
      await release(outcome);
      throw error;
    }
  }

  return { check, checkNow, delay, finish, release, handle };
}

/**
 * Asks `countWhen` (the framework's arguments, the response, the decision) and refunds the
 * request if it should not count. Never rejects: a `countWhen` that throws or rejects is reported
 * (`onCallbackError`) and the request counts; a failing refund goes to the limiter's
 * `onStoreFailure`.
 */
async function refundUnlessCounted<Args extends unknown[]>(
  config: Config<Args>,
  counts: NonNullable<Config<Args>["countWhen"]>,
  args: Args,
  response: Response,
  decision: Decision,
  limiter: RateLimiter,
  key: string,
): Promise<void> {
  try {
    if (await counts(...args, response, decision)) return;
  } catch (error) {
    // the handler's response goes out, counted: an error is no reason to give units back
    config.reportCallbackError(args, error, "countWhen");
    return;
  }
  try {
    await limiter.refund(key, { decision });
  } catch (error) {
    // the response goes out anyway; the failure is the store's, reported like any other
    limiter.reportStoreFailure(error);
  }
}

/** {@link Pipeline.delay}: waits the decision's `delayMs`; a dry run shapes nothing (the wait is enforcement too). */
function delay(outcome: Outcome): Promise<void> {
  const decision = outcome.decision;
  const ms = decision === undefined || decision.dryRun ? 0 : decision.delayMs;
  return ms > 0 ? sleep(ms) : NO_DELAY;
}

/** {@link Pipeline.release}: frees the decision's concurrency lease, if it holds one. */
function release(outcome: Outcome): Promise<void> {
  const { decision, key, limiter } = outcome;
  if (decision?.lease === undefined || key === undefined || limiter === undefined) return NO_DELAY;
  return releaseLease(limiter, key, decision);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const NO_DELAY: Promise<void> = Promise.resolve();
