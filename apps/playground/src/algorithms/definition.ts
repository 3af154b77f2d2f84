/**
 * What the playground knows of one algorithm ({@link PlaygroundAlgorithm}): the heading of its
 * column, its settings (how the form reads each one, and its value in the default preset), its
 * settings for a plan of the demo API, and how its settings become a policy of the real
 * `@sluice/core`. The table in `index.ts` maps every policy kind to one (or to `null` for a kind
 * the page does not plot).
 *
 * No DOM and no Node APIs: it runs in the browser and in Node alike.
 *
 * @module
 */
import type { Duration, Policy } from "@sluice/core";

/** How an algorithm's setting is read: a positive count, a count that may be 0, a duration. */
export type AlgorithmFieldKind = "count" | "count0" | "duration";

/** One setting of an algorithm's column. */
export interface AlgorithmField {
  /** Its name in the column: the setting's key is `<kind>.<name>` (`fixedWindow.limit`). */
  readonly name: string;
  readonly label: string;
  readonly kind: AlgorithmFieldKind;
  /** Its value in the default preset ("100 per minute" for every algorithm). */
  readonly default: string;
}

/** Reads the settings of one column as core expects them (core's factory says what is wrong). */
export interface SettingsReader {
  /** A count: digits become a number, anything else `NaN`. */
  count(name: string): number;
  /** A duration: digits become a number of ms, anything else goes as it is (`"1m"`). */
  duration(name: string): Duration;
}

/** What a plan of the demo API allows: requests per minute, and the burst a client may spend at once. */
export interface PlanLimits {
  readonly perMinute: number;
  readonly burst: number;
}

/** Everything the playground knows of one algorithm. */
export interface PlaygroundAlgorithm {
  /** The heading of its column. */
  readonly title: string;
  /** Its settings, in the order the form shows them and the URL writes them. */
  readonly fields: readonly AlgorithmField[];
  /** Its settings (by field name) for a plan: the plan's per-minute rate, the buckets at its burst. */
  plan(plan: PlanLimits): Readonly<Record<string, string>>;
  /** Its policy, built by core's factory from its settings. */
  policy(read: SettingsReader): Policy;
}

/** A window algorithm: `limit` per `window`, "100 per minute" by default, the plan's rate per minute. */
export function windowAlgorithm(title: string, factory: (options: { limit: number; window: Duration }) => Policy): PlaygroundAlgorithm {
  return {
    title,
    fields: [
      { name: "limit", label: "limit", kind: "count", default: "100" },
      { name: "window", label: "window", kind: "duration", default: "1m" },
    ],
    plan: ({ perMinute }) => ({ limit: String(perMinute), window: "1m" }),
    policy: (read) => factory({ limit: read.count("limit"), window: read.duration("window") }),
  };
}
