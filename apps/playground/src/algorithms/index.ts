/**
 * The playground's table of algorithms: every policy kind of `@sluice/core` maps to its column
 * (`<kind>.ts`: heading, settings, plan settings, policy) or to `null` for a kind the page does not
 * plot, so the compiler asks for a decision on every new kind. The page shows the columns in this
 * table's order; nothing else in the app branches on a kind.
 *
 * @module
 */
import type { PolicyKind } from "@sluice/core";
import type { PlaygroundAlgorithm } from "./definition.js";
import { fixedWindowColumn } from "./fixedWindow.js";
import { leakyBucketColumn } from "./leakyBucket.js";
import { slidingLogColumn } from "./slidingLog.js";
import { slidingWindowColumn } from "./slidingWindow.js";
import { tokenBucketColumn } from "./tokenBucket.js";

export type { AlgorithmField, AlgorithmFieldKind, PlanLimits, PlaygroundAlgorithm, SettingsReader } from "./definition.js";

/** Every policy kind's column, in the order the page shows them; `null`: not plotted. */
export const PLAYGROUND_ALGORITHMS = {
  fixedWindow: fixedWindowColumn,
  slidingWindow: slidingWindowColumn,
  slidingLog: slidingLogColumn,
  tokenBucket: tokenBucketColumn,
  leakyBucket: leakyBucketColumn,
  // a cap on requests in flight needs each request's duration, and a trace has arrival times only
  concurrency: null,
} as const satisfies { readonly [K in PolicyKind]: PlaygroundAlgorithm | null };

/** A kind the page plots: the name of its factory in `@sluice/core`. */
export type AlgorithmId = { [K in PolicyKind]: (typeof PLAYGROUND_ALGORITHMS)[K] extends null ? never : K }[PolicyKind];

/** The kinds the page plots, in the order it shows them. */
export const PLOTTED_ALGORITHMS: readonly AlgorithmId[] = Object.freeze(
  (Object.keys(PLAYGROUND_ALGORITHMS) as PolicyKind[]).filter((kind): kind is AlgorithmId => PLAYGROUND_ALGORITHMS[kind] !== null),
);
