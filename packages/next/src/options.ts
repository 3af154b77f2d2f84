/**
 * The options both Next.js entry points share, and their request pipeline.
 *
 * @module
 */
import { type RateLimiter, SluiceConfigError, UNKNOWN_CLIENT_KEY } from "@sluice/core";
import {
  type MaybePromise,
  type Pipeline,
  type PipelineCommonOptions,
  type PipelineOptions,
  type Platform,
  type TierSettings,
  createPipeline,
  describeValue,
} from "@sluice/core/adapter";
import type { NextRequest } from "next/server.js";

export { UNKNOWN_CLIENT_KEY };

/** Next.js's arguments: the request, then `Extra` (the `NextFetchEvent` in a proxy, the route context in a route handler). */
export type NextArgs<Extra extends unknown[]> = [request: NextRequest, ...extra: Extra];

/**
 * Options every form takes: core's `PipelineCommonOptions` (`key`, `trust`, `ipv6Subnet`, `cost`,
 * `skip`, `headers`, `onLimited`, `countWhen`, `onDecision`, `onCallbackError`…) over Next.js's
 * arguments — `(request, context)` in a route handler, `(request, event)` in a proxy — with what
 * Sluice adds after them: `onLimited(request, context, decision)`,
 * `countWhen(request, context, response, decision)`, `onDecision(request, context, decision, info)`.
 */
export interface RateLimitCommonOptions<Extra extends unknown[] = []> extends PipelineCommonOptions<NextArgs<Extra>> {
  /**
   * Where the decision's background work (`decision.pending`: analytics, sync) goes so the
   * response need not wait for it: pass `after` from `next/server`. A proxy called by Next.js uses
   * its event's `waitUntil` instead.
   * @default undefined (the work is awaited before the response is returned)
   */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** One `RateLimiter` for every request. */
export interface RateLimitLimiterOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra> {
  /** The limiter: its policies, store and prefix. */
  limiter: RateLimiter;
}

/** Plans: each tier its own limits and its own key namespace (see `TierSettings` in `@sluice/core`). */
export interface RateLimitTieredOptions<Extra extends unknown[] = []> extends RateLimitCommonOptions<Extra>, TierSettings {
  /** The tier of a request, `(request, context, key)` (a proxy: `(request, event, key)`); cached per key for `tierCacheTtlMs`. */
  tier: (...args: [...NextArgs<Extra>, key: string]) => MaybePromise<string>;
}

/** `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type RateLimitOptions<Extra extends unknown[] = []> = RateLimitLimiterOptions<Extra> | RateLimitTieredOptions<Extra>;

/** Validates the options (throwing `SluiceConfigError` naming the option) and builds the pipeline. */
export function nextPipeline<Extra extends unknown[]>(options: RateLimitOptions<Extra>, platform: Platform<NextArgs<Extra>>): Pipeline<NextArgs<Extra>> {
  const waitUntil = (options as Partial<RateLimitCommonOptions<Extra>> | null | undefined)?.waitUntil;
  if (waitUntil !== undefined && typeof waitUntil !== "function") {
    throw new SluiceConfigError(`[sluice] [next] waitUntil must be a function; got ${describeValue(waitUntil)}`, { option: "waitUntil" });
  }
  return createPipeline(options as PipelineOptions<NextArgs<Extra>>, platform);
}
