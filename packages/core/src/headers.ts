/**
 * Rate-limit response headers in four styles. Every relative value (`t`, `reset`,
 * `RateLimit-Reset`, `Retry-After`) is `max(0, ceil((x - decision.now) / 1000))` seconds, computed
 * from the store's clock carried in `decision.now`, never the edge's own clock.
 *
 * @module
 */
import { type Policy, quotaUnitOf } from "./algorithms/index.js";
import { SluiceConfigError, describe } from "./errors.js";
import { base64, sha256 } from "./sha256.js";
import type { Decision, PolicyResult } from "./types.js";

/**
 * - `"ietf"`: draft-ietf-httpapi-ratelimit-headers-10/11, one list member per policy:
 *   `RateLimit-Policy: "100-per-1m";q=100;w=60` and `RateLimit: "100-per-1m";r=42;t=18`, where `t`
 *   is the effective window: seconds until the policy's available quota next grows
 *   ({@link PolicyResult.refillAt}). A policy that denied the request has `r=0`, so on a 429 each
 *   violated policy reads `r=0` and `Retry-After` is never earlier than its `t`. A concurrency cap: `"exports";q=2;qu="concurrent-requests"`,
 *   and `r` is the free slots (`t`: at most 1 s, when a slot may next free).
 * - `"draft-7"`: `RateLimit: limit=100, remaining=42, reset=18` and `RateLimit-Policy: 100;w=60`
 *   (binding policy; `reset` = seconds until it is back to its full quota).
 * - `"draft-6"`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (binding policy;
 *   seconds until full quota).
 * - `"legacy"`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds
 *   when the binding policy is back to its full quota).
 */
export type HeaderStyle = "ietf" | "draft-7" | "draft-6" | "legacy";

/** The `headers` option: one style, several, or `false` for none. */
export type HeadersOption = HeaderStyle | readonly HeaderStyle[] | false;

/** The default styles: `["ietf", "legacy"]`. */
export const DEFAULT_HEADER_STYLES: readonly HeaderStyle[] = Object.freeze(["ietf", "legacy"]);

/** Where {@link setRateLimitHeaders} writes: a `Headers`, or anything with the same `set`. */
export interface HeaderSink {
  set(name: string, value: string): void;
}

/** Writes one style's headers for one decision. `pk` is the partition key's Byte Sequence (`:…:`), if enabled. */
export type HeaderWriter = (sink: HeaderSink, decision: Decision, pk: string | undefined) => void;

/**
 * One header style: the header names it writes (two styles that share a name cannot be combined)
 * and how to build its writer for a limiter's policies. Everything static (names, `q`, `w`, the
 * whole `RateLimit-Policy`) is computed in `compile`, once per limiter or tier; the writer formats
 * only the values that change per request.
 */
export interface HeaderFormatter {
  readonly fields: readonly string[];
  compile(policies: readonly Policy[]): HeaderWriter;
}

/** Seconds from `decision.now` to `at`, rounded up, never negative. */
function secondsUntil(at: number, now: number): number {
  return at <= now ? 0 : Math.ceil((at - now) / 1000);
}

/**
 * One `RateLimit-Policy` list member: `"100-per-1m";q=100;w=60`; a concurrency cap counts
 * requests in flight, not per window: `"exports";q=2;qu="concurrent-requests"` (no `w`).
 */
function ietfPolicyMember(p: Policy): string {
  const unit = quotaUnitOf(p);
  return unit !== undefined ? `"${p.name}";q=${p.limit};qu="${unit}"` : `"${p.name}";q=${p.limit};w=${p.windowSeconds}`;
}

/** The `RateLimit-Policy` value of the `"ietf"` style for a list of policies (static per limiter). */
export function ietfPolicyHeader(policies: readonly Policy[]): string {
  return policies.map(ietfPolicyMember).join(", ");
}

/**
 * The header styles, one entry each: a later draft (a renamed parameter, a `RateLimit-Partition`
 * field) is one more entry here and one more name in {@link HeaderStyle}.
 */
export const HEADER_FORMATTERS: Readonly<Record<HeaderStyle, HeaderFormatter>> = Object.freeze({
  ietf: {
    fields: ["RateLimit", "RateLimit-Policy"],
    compile(policies) {
      const policy = ietfPolicyHeader(policies);
      const members = policies.map((p) => `"${p.name}";`);
      const policyMembers = policies.map(ietfPolicyMember);
      // under a key's override the quotas are the effective ones (each result's limit): `q` follows them
      const afterQuota = policies.map((p) => {
        const unit = quotaUnitOf(p);
        return unit !== undefined ? `;qu="${unit}"` : `;w=${p.windowSeconds}`;
      });
      const overridden = (decision: Decision, pk: string | undefined): string => {
        const results = decision.policies;
        let value = "";
        for (let i = 0; i < results.length; i++) {
          const r = results[i] as PolicyResult;
          const member = `${members[i] ?? `"${r.policy}";`}q=${r.limit}${afterQuota[i] ?? ""}${pk === undefined ? "" : `;pk=${pk}`}`;
          value = i === 0 ? member : `${value}, ${member}`;
        }
        return value;
      };
      return (sink, decision, pk) => {
        const now = decision.now;
        const results = decision.policies;
        let value = "";
        for (let i = 0; i < results.length; i++) {
          const r = results[i] as PolicyResult;
          // a policy that denied this request has nothing left for it: r=0, whatever a smaller cost could still get
          const member = `${members[i] ?? `"${r.policy}";`}r=${r.allowed ? r.remaining : 0};t=${secondsUntil(r.refillAt, now)}`;
          value = i === 0 ? member : `${value}, ${member}`;
          if (pk !== undefined) value += `;pk=${pk}`;
        }
        if (decision.override !== undefined) sink.set("RateLimit-Policy", overridden(decision, pk));
        else sink.set("RateLimit-Policy", pk === undefined ? policy : policyMembers.map((m) => `${m};pk=${pk}`).join(", "));
        sink.set("RateLimit", value);
      };
    },
  },
  "draft-7": {
    fields: ["RateLimit", "RateLimit-Policy"],
    compile(policies) {
      // a concurrency cap has no window: its policy is the bare quota
      const windows = new Map(policies.map((p) => [p.name, quotaUnitOf(p) !== undefined ? "" : `;w=${p.windowSeconds}`]));
      return (sink, decision) => {
        sink.set(
          "RateLimit",
          `limit=${decision.limit}, remaining=${decision.remaining}, reset=${secondsUntil(decision.resetAt, decision.now)}`,
        );
        sink.set("RateLimit-Policy", `${decision.limit}${windows.get(decision.policy) ?? ";w=0"}`);
      };
    },
  },
  "draft-6": {
    fields: ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"],
    compile() {
      return (sink, decision) => {
        sink.set("RateLimit-Limit", String(decision.limit));
        sink.set("RateLimit-Remaining", String(decision.remaining));
        sink.set("RateLimit-Reset", String(secondsUntil(decision.resetAt, decision.now)));
      };
    },
  },
  legacy: {
    fields: ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"],
    compile() {
      return (sink, decision) => {
        sink.set("X-RateLimit-Limit", String(decision.limit));
        sink.set("X-RateLimit-Remaining", String(decision.remaining));
        sink.set("X-RateLimit-Reset", String(Math.ceil(decision.resetAt / 1000)));
      };
    },
  },
});

const STYLE_NAMES = Object.keys(HEADER_FORMATTERS) as HeaderStyle[];

/**
 * Every field a header style (or a denial) writes, by the name it is written with, to its
 * lowercase form. A Fetch `Headers` lowercases a name on every `set`, `has` and `get`; a constant
 * lowercase name spares it a new string per call, and one whose hash the engine has already
 * computed (names are case-insensitive, and a `Headers` iterates them in lowercase anyway).
 */
const LOWERCASE_FIELDS: ReadonlyMap<string, string> = new Map(
  [...Object.values(HEADER_FORMATTERS).flatMap((f) => f.fields), "Retry-After"].map((name) => [name, name.toLowerCase()]),
);

/** The lowercase form of a rate-limit header's name (any other name as it is: `Headers` lowercases it). */
export function fieldName(name: string): string {
  return LOWERCASE_FIELDS.get(name) ?? name;
}

/** Validates the `headers` option and returns the list of styles. */
export function resolveHeaderStyles(option: unknown): readonly HeaderStyle[] {
  if (option === undefined) return DEFAULT_HEADER_STYLES;
  if (option === false) return [];
  const list = Array.isArray(option) ? option : [option];
  for (const [i, style] of list.entries()) {
    if (typeof style !== "string" || !Object.hasOwn(HEADER_FORMATTERS, style)) {
      const path = Array.isArray(option) ? `headers[${i}]` : "headers";
      throw new SluiceConfigError(
        `${path} must be ${STYLE_NAMES.map((s) => `"${s}"`).join(", ")}${path === "headers" ? ", a list of them, or false" : ""}; got ${describe(style)}`,
        { option: path },
      );
    }
  }
  const styles = [...new Set(list as HeaderStyle[])];
  // conflicts are named in the table's order, whatever the order given
  const ordered = STYLE_NAMES.filter((name) => styles.includes(name));
  for (let i = 0; i < ordered.length; i++) {
    for (let j = i + 1; j < ordered.length; j++) {
      const a = ordered[i] as HeaderStyle;
      const b = ordered[j] as HeaderStyle;
      const shared = HEADER_FORMATTERS[a].fields.find((f) => HEADER_FORMATTERS[b].fields.includes(f));
      if (shared !== undefined) {
        throw new SluiceConfigError(`headers must not hold both "${a}" and "${b}", which both write the ${shared} header; choose one`, { option: "headers" });
      }
    }
  }
  return Object.freeze(styles);
}

/**
 * Builds the writer for `styles` over a limiter's `policies` (static parts computed now): it
 * writes each style's headers, plus `Retry-After` on a denial with a finite `retryAfterMs`.
 *
 * @example
 * ```ts
 * const write = compileRateLimitHeaders(["ietf", "legacy"], limiter.policies);
 * const headers = new Headers();
 * write(headers, await limiter.limit("user:42"), undefined);
 * ```
 */
export function compileRateLimitHeaders(styles: readonly HeaderStyle[], policies: readonly Policy[]): HeaderWriter {
  const writers = styles.map((style) => HEADER_FORMATTERS[style].compile(policies));
  const one = writers.length === 1 ? writers[0] : undefined;
  const none = writers.length === 0;
  return (sink, decision, pk) => {
    if (one !== undefined) one(sink, decision, pk);
    else if (!none) for (let i = 0; i < writers.length; i++) (writers[i] as HeaderWriter)(sink, decision, pk);
    if (!decision.allowed && decision.retryAfterMs !== Infinity) {
      sink.set("Retry-After", String(decision.retryAfterMs <= 0 ? 0 : Math.ceil(decision.retryAfterMs / 1000)));
    }
  };
}

/**
 * Writes the rate-limit headers of `decision` in each of `styles`, plus `Retry-After` on a denial
 * with a finite `retryAfterMs`. `policies` are the limiter's policies, in the order of
 * `decision.policies`. (The pipeline compiles the styles once per limiter with
 * {@link compileRateLimitHeaders}; this one-shot form is for code outside it.)
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
  pk?: string,
): void {
  compileRateLimitHeaders(styles, policies)(headers, decision, pk);
}

/** The `partitionKey` option: `true`, or `{ salt }` to make the hashes unguessable from the keys. */
export type PartitionKeyOption = boolean | { readonly salt: string };

/**
 * The `pk` parameter's value for a storage key: an RFC 9651 Byte Sequence of the first 12 bytes
 * of SHA-256(salt + key), never the key itself.
 *
 * @example
 * ```ts
 * partitionKeyOf("sluice:1.2.3.4", "my-secret"); // ":q2V0...==:" (16 base64 characters between colons)
 * ```
 */
export function partitionKeyOf(storageKey: string, salt = ""): string {
  return `:${base64(sha256(new TextEncoder().encode(salt + storageKey)).subarray(0, 12))}:`;
}

/** Validates the `partitionKey` option; returns the salt to hash with, or `undefined` when off. */
export function resolvePartitionKey(option: unknown): string | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return "";
  if (typeof option === "object" && option !== null && typeof (option as { salt?: unknown }).salt === "string") {
    return (option as { salt: string }).salt;
  }
  throw new SluiceConfigError(`partitionKey must be true, false or { salt: string }; got ${describe(option)}`, { option: "partitionKey" });
}

/** Whether a header value is an IETF list of policies (`"name";…`), not a draft-7 `limit=…` value. */
function isPolicyList(value: string): boolean {
  return value.startsWith('"');
}

/** The policy name of one IETF list member, `"name";r=1;t=2` → `name`. */
function memberName(member: string): string {
  return member.slice(1, member.indexOf('"', 1));
}

/** Two IETF lists as one: the outer layer's members (but those the inner one names too), then the inner's. */
function joinPolicyLists(outer: string, inner: string): string {
  const innerMembers = inner.split(",").map((m) => m.trim());
  const innerNames = new Set(innerMembers.map(memberName));
  const kept = outer
    .split(",")
    .map((m) => m.trim())
    .filter((m) => !innerNames.has(memberName(m)));
  return [...kept, ...innerMembers].join(", ");
}

/** The binding policy's remaining units a layer wrote in a single-policy style, if it wrote one. */
function remainingOf(headers: readonly (readonly [string, string])[]): number | undefined {
  for (const [name, value] of headers) {
    const field = name.toLowerCase();
    if (field === "x-ratelimit-remaining" || field === "ratelimit-remaining") return Number(value);
    if (field === "ratelimit" && !isPolicyList(value)) {
      const match = /remaining=(\d+)/.exec(value);
      if (match !== null) return Number(match[1]);
    }
  }
  return undefined;
}

/**
 * The rate-limit headers of one response that two layers limited (a Next.js proxy in front of a
 * wrapped route handler, say): one set that agrees with whichever layer answered.
 *
 * - The IETF lists (`RateLimit`, `RateLimit-Policy`) are joined: the outer layer's members, then
 *   the inner layer's; a policy both name is the inner layer's.
 * - The single-policy styles (`"draft-7"`, `"draft-6"`, `"legacy"`) describe one binding policy, so
 *   they come from one layer: the inner one when it denied the request (it wrote `Retry-After`, or
 *   `innerDenied` says so), else the one with fewer units remaining (the inner one on a tie or
 *   when that cannot be read).
 * - `Retry-After` is the later of the two.
 * - A field only one layer wrote is kept as it is.
 *
 * @param outer - The outer layer's headers (the one that ran first and let the request through).
 * @param inner - The inner layer's headers.
 * @param innerDenied - Whether the inner layer denied the request; by default, whether it wrote `Retry-After`.
 * @example
 * ```ts
 * mergeRateLimitHeaders(
 *   [["RateLimit-Policy", '"100-per-1m";q=100;w=60'], ["RateLimit", '"100-per-1m";r=88;t=48']],
 *   [["RateLimit-Policy", '"10-burst";q=10;w=10'], ["RateLimit", '"10-burst";r=0;t=1'], ["Retry-After", "1"]],
 * );
 * // [["RateLimit-Policy", '"100-per-1m";q=100;w=60, "10-burst";q=10;w=10'],
 * //  ["RateLimit", '"100-per-1m";r=88;t=48, "10-burst";r=0;t=1'], ["Retry-After", "1"]]
 * ```
 */
export function mergeRateLimitHeaders(
  outer: readonly (readonly [string, string])[],
  inner: readonly (readonly [string, string])[],
  innerDenied?: boolean,
): [name: string, value: string][] {
  const innerFields = new Map<string, readonly [string, string]>();
  for (const pair of inner) innerFields.set(pair[0].toLowerCase(), pair);
  let innerBinds = innerDenied ?? innerFields.has("retry-after");
  if (!innerBinds) {
    const outerRemaining = remainingOf(outer);
    const innerRemaining = remainingOf(inner);
    innerBinds = outerRemaining === undefined || innerRemaining === undefined || innerRemaining <= outerRemaining;
  }
  const merged: [name: string, value: string][] = [];
  const seen = new Set<string>();
  for (const [name, value] of outer) {
    const field = name.toLowerCase();
    seen.add(field);
    const theirs = innerFields.get(field);
    if (theirs === undefined) merged.push([name, value]);
    else if (field === "retry-after") merged.push([name, String(Math.max(Number(value), Number(theirs[1])))]);
    else if (isPolicyList(value) && isPolicyList(theirs[1])) merged.push([name, joinPolicyLists(value, theirs[1])]);
    else merged.push(innerBinds ? [theirs[0], theirs[1]] : [name, value]);
  }
  for (const [name, value] of inner) if (!seen.has(name.toLowerCase())) merged.push([name, value]);
  return merged;
}
