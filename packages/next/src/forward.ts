/**
 * Two layers on one request — a proxy in front of a wrapped route handler — and one set of
 * rate-limit headers. Next.js sends the headers a proxy set on its `NextResponse.next()` in place of
 * the route's own (a route cannot replace them), so a proxy whose route limits the request too
 * hands its headers to the route instead, in one request header; the route merges them with its own
 * (`mergeRateLimitHeaders`: one IETF list with the policies of both) on every response, its 429
 * included, so the headers agree with the body.
 *
 * @module
 */
import type { HeaderList } from "@sluice/core/adapter";

/**
 * The request header that carries a proxy's rate-limit headers to the route: a JSON list of
 * `[name, value]` pairs. A proxy sets it (or removes what a client sent) on every request it
 * passes on.
 */
export const FORWARDED_HEADERS = "x-sluice-forwarded-ratelimit";

/** The fields a proxy may forward: the rate-limit headers of every style, and `Retry-After`. */
const FORWARDABLE = new Set([
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
]);

/** At most this many characters are read from the request header. */
const MAX_FORWARDED_LENGTH = 8192;

/** The request header's value for a proxy's headers. */
export function encodeForwarded(headers: HeaderList): string {
  return JSON.stringify(headers);
}

/**
 * The headers a proxy forwarded, or `undefined` when there are none or the value is not what a
 * proxy writes (then nothing of it reaches the response): only rate-limit fields, with printable
 * ASCII values.
 */
export function decodeForwarded(value: string | null): HeaderList | undefined {
  if (value === null || value.length > MAX_FORWARDED_LENGTH) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  const headers: HeaderList = [];
  for (const pair of parsed) {
    if (!Array.isArray(pair) || pair.length !== 2) return undefined;
    const [name, text] = pair as unknown[];
    if (typeof name !== "string" || typeof text !== "string") return undefined;
    if (!FORWARDABLE.has(name.toLowerCase()) || !/^[\x20-\x7e]*$/.test(text)) return undefined;
    headers.push([name, text]);
  }
  return headers;
}
