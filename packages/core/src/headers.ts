/**
 * Rate-limit response headers in four styles. Every relative value (`t`, `reset`,
 * `RateLimit-Reset`, `Retry-After`) is `max(0, ceil((x - decision.now) / 1000))` seconds, computed
 * from the store's clock carried in `decision.now`, never the edge's own clock.
 *
 * @module
 */
import type { Policy } from "./algorithms.js";
import { SluiceConfigError, describe } from "./errors.js";
import type { Decision, PolicyResult } from "./types.js";

/**
 * - `"ietf"`: draft-ietf-httpapi-ratelimit-headers-10/11, one list member per policy:
 *   `RateLimit-Policy: "100-per-1m";q=100;w=60` and `RateLimit: "100-per-1m";r=42;t=18`.
 * - `"draft-7"`: `RateLimit: limit=100, remaining=42, reset=18` and `RateLimit-Policy: 100;w=60` (binding policy).
 * - `"draft-6"`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (binding policy).
 * - `"legacy"`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds).
 */
export type HeaderStyle = "ietf" | "draft-7" | "draft-6" | "legacy";

/** The `headers` option: one style, several, or `false` for none. */
export type HeadersOption = HeaderStyle | readonly HeaderStyle[] | false;

/** The default styles: `["ietf", "legacy"]`. */
export const DEFAULT_HEADER_STYLES: readonly HeaderStyle[] = Object.freeze(["ietf", "legacy"]);
const STYLES: ReadonlySet<string> = new Set(["ietf", "draft-7", "draft-6", "legacy"]);

/** Validates the `headers` option and returns the list of styles. */
export function resolveHeaderStyles(option: unknown): readonly HeaderStyle[] {
  if (option === undefined) return DEFAULT_HEADER_STYLES;
  if (option === false) return [];
  const list = Array.isArray(option) ? option : [option];
  for (const style of list) {
    if (typeof style !== "string" || !STYLES.has(style)) {
      throw new SluiceConfigError(
        `headers must be "ietf", "draft-7", "draft-6", "legacy", a list of them, or false; got ${describe(style)}`,
      );
    }
  }
  if (list.includes("ietf") && list.includes("draft-7")) {
    throw new SluiceConfigError(`headers: "ietf" and "draft-7" both write the RateLimit header; choose one`);
  }
  return Object.freeze([...new Set(list as HeaderStyle[])]);
}

/** Where {@link setRateLimitHeaders} writes: a `Headers`, or anything with the same `set`. */
export interface HeaderSink {
  set(name: string, value: string): void;
}

/** Seconds from `decision.now` to `at`, rounded up, never negative. */
function secondsUntil(at: number, now: number): number {
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** The `RateLimit-Policy` value of the `"ietf"` style for a list of policies (static per limiter). */
export function ietfPolicyHeader(policies: readonly Policy[]): string {
  return policies.map((p) => `"${p.name}";q=${p.limit};w=${p.windowSeconds}`).join(", ");
}

/**
 * Writes the rate-limit headers of `decision` in each of `styles`, plus `Retry-After` on a denial
 * with a finite `retryAfterMs`. `policies` are the limiter's policies, in the order of
 * `decision.policies`.
 *
 * @example
 * ```ts
 * const headers = new Headers();
 * setRateLimitHeaders(headers, decision, ["ietf", "legacy"], limiter.policies);
 * ```
 */
export function setRateLimitHeaders(
  headers: HeaderSink,
  decision: Decision,
  styles: readonly HeaderStyle[],
  policies: readonly Policy[],
  ietfPolicy: string = ietfPolicyHeader(policies),
): void {
  const now = decision.now;
  for (const style of styles) {
    switch (style) {
      case "ietf": {
        headers.set("RateLimit-Policy", ietfPolicy);
        headers.set(
          "RateLimit",
          decision.policies
            .map((r: PolicyResult) => `"${r.policy}";r=${r.remaining};t=${secondsUntil(r.resetAt, now)}`)
            .join(", "),
        );
        break;
      }
      case "draft-7": {
        const binding = policies.find((p) => p.name === decision.policy);
        headers.set(
          "RateLimit",
          `limit=${decision.limit}, remaining=${decision.remaining}, reset=${secondsUntil(decision.resetAt, now)}`,
        );
        headers.set("RateLimit-Policy", `${decision.limit};w=${binding?.windowSeconds ?? 0}`);
        break;
      }
      case "draft-6":
        headers.set("RateLimit-Limit", String(decision.limit));
        headers.set("RateLimit-Remaining", String(decision.remaining));
        headers.set("RateLimit-Reset", String(secondsUntil(decision.resetAt, now)));
        break;
      case "legacy":
        headers.set("X-RateLimit-Limit", String(decision.limit));
        headers.set("X-RateLimit-Remaining", String(decision.remaining));
        headers.set("X-RateLimit-Reset", String(Math.ceil(decision.resetAt / 1000)));
        break;
    }
  }
  if (!decision.allowed && Number.isFinite(decision.retryAfterMs)) {
    headers.set("Retry-After", String(Math.max(0, Math.ceil(decision.retryAfterMs / 1000))));
  }
}
