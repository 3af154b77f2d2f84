import { SluiceConfigError, describe } from "./errors.js";

/** A duration unit accepted in strings: milliseconds, seconds, minutes, hours, days. */
export type DurationUnit = "ms" | "s" | "m" | "h" | "d";
/** A duration: milliseconds as a number, or a string such as `"500ms"`, `"10s"`, `"1m"`, `"1h"`, `"1d"`. */
export type Duration = number | `${number}${DurationUnit}`;

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_RE = /^(\d+)(ms|s|m|h|d)$/;

/** The largest duration Sluice accepts, in ms (2^31 - 1, the largest timer delay). */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/**
 * Parses a duration to whole milliseconds, validating it for the option `option` (a path such as
 * `"window"` or `"block.base"`: the {@link SluiceConfigError} carries it as its `option`).
 * Accepts a positive integer number of milliseconds or a string `"<integer><ms|s|m|h|d>"`.
 *
 * @example
 * ```ts
 * toMs("1m", "window"); // 60000
 * toMs(1500, "window"); // 1500
 * ```
 */
export function toMs(value: unknown, option: string): number {
  let ms: number;
  if (typeof value === "number") {
    ms = value;
  } else if (typeof value === "string") {
    const match = DURATION_RE.exec(value.trim());
    if (!match) {
      throw new SluiceConfigError(
        `${option} must be a duration: a positive integer of milliseconds or a string like "500ms", "10s", "1m", "1h", "1d"; got ${describe(value)}`,
        { option },
      );
    }
    ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  } else {
    throw new SluiceConfigError(
      `${option} must be a duration (milliseconds or a string like "10s", "1m"); got ${describe(value)}`,
      { option },
    );
  }
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new SluiceConfigError(`${option} must be a positive whole number of milliseconds; got ${describe(value)}`, { option });
  }
  if (ms > MAX_DURATION_MS) {
    throw new SluiceConfigError(`${option} must be at most ${MAX_DURATION_MS} ms (about 24.8 days); got ${describe(value)}`, { option });
  }
  return ms;
}

/** Writes whole milliseconds in the largest unit that divides them: 60000 → "1m", 1500 → "1500ms". */
export function formatMs(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    const size = UNIT_MS[unit];
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
