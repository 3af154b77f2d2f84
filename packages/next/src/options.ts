/**
 * The options both Next.js entry points share, and their request pipeline.
 *
 * @module
 */
import {
  type Decision,
  type MaybePromise,
  type Pipeline,
  type PipelineCommonOptions,
  type PipelineOptions,
  type Platform,
  type RateLimiter,
  SluiceConfigError,
  type TierSettings,
  UNKNOWN_CLIENT_KEY,
  createPipeline,
  describeValue,
} from "@sluice/core";
import type { NextRequest } from "next/server.js";

export { UNKNOWN_CLIENT_KEY };

/** Next.js's arguments: the request, then `Extra` (the `NextFetchEvent` in a proxy, the route context in a route handler). */
export type NextArgs<Extra extends unknown[]> = [request: NextRequest, ...extra: Extra];

/**
 * Options every form takes: core's `PipelineCommonOptions` (`key`, `trust`, `ipv6Subnet`, `cost`,
 * `skip`, `headers`) over Next.js's arguments — `(request, ...extra)` — with what Sluice adds right
 * after the request: `onLimited(request, decision, ...extra)`.
 */
export interface RateLimitCommonOptions<Extra extends unknown[] = []> extends Omit<PipelineCommonOptions<NextArgs<Extra>>, "onLimited"> {
  /**
   * Builds the response for a denied request instead of the default RFC 9457
   * `application/problem+json` 429. The rate-limit headers (and `Retry-After`) are added to it
   * unless it already has them.
   */
  onLimited?: (request: NextRequest, decision: Decision, ...extra: Extra) => MaybePromise<Response>;
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
  /** The tier of a request, `(request, key, ...extra)`; cached per key for `tierCacheTtlMs`. */
  tier: (request: NextRequest, key: string, ...extra: Extra) => MaybePromise<string>;
}

/** `limiter`, or `tiers` + `tier`; and `key` or `trust`. */
export type RateLimitOptions<Extra extends unknown[] = []> = RateLimitLimiterOptions<Extra> | RateLimitTieredOptions<Extra>;

/** A callback in Next's order, `(request, added, ...extra)`, called in the pipeline's, `(request, ...extra, added)`. */
function addedAfterRequest(fn: unknown): unknown {
  if (typeof fn !== "function") return fn; // the pipeline names what is wrong with it
  return (request: NextRequest, ...rest: unknown[]) => {
    const added = rest.pop();
    return fn(request, added, ...rest);
  };
}

/** Validates the options (throwing `SluiceConfigError` naming the option) and builds the pipeline. */
export function nextPipeline<Extra extends unknown[]>(options: RateLimitOptions<Extra>, platform: Platform<NextArgs<Extra>>): Pipeline<NextArgs<Extra>> {
  if (typeof options !== "object" || options === null) return createPipeline(options, platform);
  const { onLimited, tier, waitUntil } = options as Partial<RateLimitTieredOptions<Extra>>;
  if (waitUntil !== undefined && typeof waitUntil !== "function") {
    throw new SluiceConfigError(`${platform.where}: waitUntil must be a function; got ${describeValue(waitUntil)}`);
  }
  const ordered = { ...options, onLimited: addedAfterRequest(onLimited), tier: addedAfterRequest(tier) };
  return createPipeline(ordered as PipelineOptions<NextArgs<Extra>>, platform);
}
