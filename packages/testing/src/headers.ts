/**
 * Expected rate-limit headers shared by the adapters' tests: `@sluice/testing/headers`.
 *
 * @module
 */

/**
 * The headers (`"ietf"` + `"legacy"`, names lower-cased) of `fixedWindow({ limit: 2, window: "1m" })`
 * decided at `1_700_000_022_000` (42 s into a minute: the window ends 18 s later, at
 * `1_700_000_040_000`) with `remaining` units left.
 *
 * @example
 * ```ts
 * expect(rateLimitHeadersOf(response)).toEqual({ ...twoPerMinute(0), "retry-after": "18" });
 * ```
 */
export function twoPerMinute(remaining: number): Record<string, string> {
  return {
    "ratelimit-policy": '"2-per-1m";q=2;w=60',
    ratelimit: `"2-per-1m";r=${remaining};t=18`,
    "x-ratelimit-limit": "2",
    "x-ratelimit-remaining": String(remaining),
    "x-ratelimit-reset": "1700000040",
  };
}
