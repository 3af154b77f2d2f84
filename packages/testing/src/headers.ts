/**
 * Rate-limit headers for the adapters' tests, read off a response and expected:
 * `@sluice/testing/headers`.
 *
 * @module
 */

/**
 * Every header of `response` that starts with `ratelimit` or `x-ratelimit`, or is `retry-after`, as
 * a plain object (names lower-cased, as `Headers` gives them).
 *
 * @example
 * ```ts
 * expect(rateLimitHeadersOf(await app.request("/"))).toEqual({ "ratelimit-limit": "3", "ratelimit-remaining": "2", "ratelimit-reset": "60" });
 * ```
 */
export function rateLimitHeadersOf(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (name.startsWith("ratelimit") || name.startsWith("x-ratelimit") || name === "retry-after") out[name] = value;
  }
  return out;
}

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
