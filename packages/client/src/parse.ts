/**
 * `parseRateLimit`: one result from any of the rate-limit header styles servers emit.
 *
 * @module
 */
import { parseHttpDate } from "./http-date.js";
import { type BareItem, type Member, type Parameters, parseDictionary, parseList } from "./structured-fields.js";

/**
 * Response headers in any of the usual shapes: a Fetch `Headers`, `[name, value]` pairs (a
 * `Map`, `Object.entries(...)`), or a plain object such as Node's `IncomingHttpHeaders` (an array
 * value is several field lines). Names are case-insensitive; several lines of one field are
 * combined with `", "`, as `Headers#get` does.
 *
 * @example
 * ```ts
 * const fromFetch: HeadersLike = response.headers;
 * const fromNode: HeadersLike = { "ratelimit": '"day";r=9;t=60', "retry-after": "5" };
 * const fromPairs: HeadersLike = [["RateLimit-Remaining", "9"]];
 * ```
 */
export type HeadersLike =
  | Headers
  | Iterable<readonly [string, string]>
  | Readonly<Record<string, string | readonly string[] | number | undefined>>;

/**
 * One rate-limit policy as the server described it. Every number is a non-negative count or a
 * number of seconds; a field the server did not send is absent.
 *
 * @example
 * ```ts
 * const policy: RateLimitPolicy = { policy: "per-minute", quota: 100, window: 60, remaining: 42, resetSeconds: 18 };
 * ```
 */
export interface RateLimitPolicy {
  /**
   * The policy's name: the IETF list member's name (`"per-minute"` in
   * `"per-minute";r=42;t=18`); `"default"` for the styles that do not name it (draft-7, draft-6,
   * `X-RateLimit-*`).
   */
  policy: string;
  /** The quota: units allowed per `window` (`q`, `limit`, `RateLimit-Limit`, `X-RateLimit-Limit`). */
  quota?: number;
  /** The policy's window in seconds (`w`). */
  window?: number;
  /** Units left (`r`, `remaining`, `RateLimit-Remaining`, `X-RateLimit-Remaining`). */
  remaining?: number;
  /**
   * Seconds from now (rounded up for epoch values) after which the server's word on `remaining`
   * no longer holds: `t` (draft-11: the time until the available quota next grows), `reset`,
   * `RateLimit-Reset`, or `X-RateLimit-Reset` (epoch seconds above 1e9, epoch milliseconds above
   * 1e12, else a delta).
   */
  resetSeconds?: number;
  /** The quota unit (`qu`): `"requests"` unless the server says otherwise (`"content-bytes"`, ...). */
  unit?: string;
  /** The partition key (`pk`), a Byte Sequence, as its base64 text (e.g. `"NTcwYWJlOWU2YjNi"`). */
  partitionKey?: string;
}

/**
 * What {@link parseRateLimit} read from one response.
 *
 * @example
 * ```ts
 * const info: RateLimitInfo = { style: "ietf", policies: [{ policy: "day", remaining: 0, resetSeconds: 30 }], retryAfterSeconds: 30 };
 * ```
 */
export interface RateLimitInfo {
  /** The policies of the highest-precedence style present, in the order the server listed them. */
  policies: RateLimitPolicy[];
  /** `Retry-After` in seconds (an HTTP-date becomes the seconds from now, rounded up), if present and valid. */
  retryAfterSeconds: number | undefined;
  /** Which style `policies` came from; `undefined` if none was present. */
  style: RateLimitStyle | undefined;
}

/**
 * A rate-limit header style, in order of precedence when a response carries several:
 * `"ietf"` (draft-ietf-httpapi-ratelimit-headers-08 to -11: `RateLimit` and `RateLimit-Policy`
 * Lists), `"draft-7"` (the `RateLimit` Dictionary), `"draft-6"` (`RateLimit-Limit`,
 * `-Remaining`, `-Reset`) and `"legacy"` (`X-RateLimit-*`).
 *
 * @example
 * ```ts
 * const style: RateLimitStyle = parseRateLimit(response.headers).style ?? "legacy";
 * ```
 */
export type RateLimitStyle = "ietf" | "draft-7" | "draft-6" | "legacy";

/**
 * Options of {@link parseRateLimit}.
 *
 * @example
 * ```ts
 * parseRateLimit(headers, { now: Date.parse(response.headers.get("date") ?? "") || Date.now() });
 * ```
 */
export interface ParseRateLimitOptions {
  /**
   * The current time in epoch milliseconds: the base for epoch resets and HTTP-dates.
   * @default Date.now()
   */
  now?: number;
}

/** The name given to the policy of the styles that do not name it. */
const UNNAMED = "default";

/** Field names are case-insensitive; lines of one field are joined with ", " (RFC 9110 §5.3). */
function headerGetter(headers: HeadersLike): (name: string) => string | undefined {
  if (typeof Headers !== "undefined" && headers instanceof Headers) {
    return (name) => headers.get(name) ?? undefined;
  }
  const fields = new Map<string, string[]>();
  const add = (name: string, value: unknown) => {
    if (value === undefined || value === null) return;
    const key = name.toLowerCase();
    const values = fields.get(key) ?? [];
    if (Array.isArray(value)) for (const v of value) values.push(String(v));
    else values.push(String(value));
    fields.set(key, values);
  };
  if (Symbol.iterator in headers) {
    for (const [name, value] of headers as Iterable<readonly [string, string]>) add(name, value);
  } else {
    for (const [name, value] of Object.entries(headers)) add(name, value);
  }
  return (name) => {
    const values = fields.get(name);
    return values === undefined || values.length === 0 ? undefined : values.join(", ");
  };
}

function nonNegativeInteger(item: BareItem | undefined): number | undefined {
  return item?.type === "integer" && item.value >= 0 ? item.value : undefined;
}

function itemInteger(member: Member | undefined): number | undefined {
  return member?.kind === "item" ? nonNegativeInteger(member.value) : undefined;
}

function textOf(item: BareItem | undefined): string | undefined {
  return item?.type === "string" || item?.type === "token" ? item.value : undefined;
}

function encodeBase64(bytes: Uint8Array): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const [a = 0, b = 0, c = 0] = [bytes[i], bytes[i + 1], bytes[i + 2]];
    const n = (a << 16) | (b << 8) | c;
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.length ? alphabet[(n >> 6) & 63] : "=";
    out += i + 2 < bytes.length ? alphabet[n & 63] : "=";
  }
  return out;
}

function set<K extends keyof RateLimitPolicy>(policy: RateLimitPolicy, key: K, value: RateLimitPolicy[K] | undefined): void {
  if (value !== undefined && policy[key] === undefined) policy[key] = value;
}

function partitionKey(params: Parameters): string | undefined {
  const pk = params.get("pk");
  return pk?.type === "binary" ? encodeBase64(pk.value) : undefined;
}

/**
 * The IETF list form (draft-08 to -11, Sluice's `"ietf"`, express-rate-limit's `"draft-8"`):
 * `RateLimit-Policy` and `RateLimit` Lists whose members are named policies, joined by name.
 * A field that is not a valid List is ignored entirely.
 */
function ietf(get: (name: string) => string | undefined): RateLimitPolicy[] {
  const byName = new Map<string, RateLimitPolicy>();
  const policyField = get("ratelimit-policy");
  for (const member of (policyField === undefined ? undefined : parseList(policyField)) ?? []) {
    const name = member.kind === "item" ? textOf(member.value) : undefined;
    if (name === undefined || byName.has(name)) continue;
    const policy: RateLimitPolicy = { policy: name };
    set(policy, "quota", nonNegativeInteger(member.params.get("q")));
    set(policy, "window", nonNegativeInteger(member.params.get("w")));
    set(policy, "unit", textOf(member.params.get("qu")));
    set(policy, "partitionKey", partitionKey(member.params));
    byName.set(name, policy);
  }
  const limitField = get("ratelimit");
  const seen = new Set<string>();
  for (const member of (limitField === undefined ? undefined : parseList(limitField)) ?? []) {
    const name = member.kind === "item" ? textOf(member.value) : undefined;
    if (name === undefined || seen.has(name)) continue;
    seen.add(name);
    const policy = byName.get(name) ?? { policy: name };
    set(policy, "remaining", nonNegativeInteger(member.params.get("r")));
    set(policy, "resetSeconds", nonNegativeInteger(member.params.get("t")));
    set(policy, "partitionKey", partitionKey(member.params));
    byName.set(name, policy);
  }
  return [...byName.values()];
}

/** The window of the draft-6/7 `RateLimit-Policy: 100;w=60` (the member whose quota is `quota`, else the first). */
function unnamedPolicyWindow(field: string | undefined, quota: number | undefined): number | undefined {
  const members = (field === undefined ? undefined : parseList(field)) ?? [];
  const numbered = members.filter((m) => itemInteger(m) !== undefined);
  const match = numbered.find((m) => itemInteger(m) === quota) ?? numbered[0];
  return nonNegativeInteger(match?.params.get("w"));
}

/** draft-7: `RateLimit: limit=100, remaining=42, reset=18` and `RateLimit-Policy: 100;w=60`. */
function draft7(get: (name: string) => string | undefined): RateLimitPolicy[] {
  const field = get("ratelimit");
  const dict = field === undefined ? undefined : parseDictionary(field);
  if (dict === undefined) return [];
  const quota = itemInteger(dict.get("limit"));
  const remaining = itemInteger(dict.get("remaining"));
  const resetSeconds = itemInteger(dict.get("reset"));
  if (quota === undefined && remaining === undefined && resetSeconds === undefined) return [];
  const policy: RateLimitPolicy = { policy: UNNAMED };
  set(policy, "quota", quota);
  set(policy, "window", unnamedPolicyWindow(get("ratelimit-policy"), quota));
  set(policy, "remaining", remaining);
  set(policy, "resetSeconds", resetSeconds);
  return [policy];
}

/**
 * A non-negative number from a plain field: `42`, `1.5`, or the first member of a List such as
 * draft-3's `RateLimit-Limit: 10, 10;w=1` (whose `w` is returned too).
 */
function numberField(field: string | undefined): { value: number; window?: number } | undefined {
  if (field === undefined) return undefined;
  const text = field.trim();
  // a number no clock or counter can hold (309 digits read as Infinity, say) is no value at all
  if (/^\d+(?:\.\d+)?$/.test(text)) return saneNumber(Number(text)) ? { value: Number(text) } : undefined;
  const first = parseList(text)?.[0];
  if (first?.kind !== "item" || (first.value.type !== "integer" && first.value.type !== "decimal") || first.value.value < 0 || !saneNumber(first.value.value)) {
    return undefined;
  }
  const window = nonNegativeInteger(first.params.get("w"));
  return window === undefined ? { value: first.value.value } : { value: first.value.value, window };
}

/** A reset value that may be epoch seconds (> 1e9), epoch milliseconds (> 1e12) or a delta in seconds. */
function resetFromNow(value: number | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  if (value > 1e12) return Math.max(0, Math.ceil((value - now) / 1000));
  if (value > 1e9) return Math.max(0, Math.ceil(value - now / 1000));
  return value;
}

/** draft-6: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (+ `RateLimit-Policy: 100;w=60`). */
function draft6(get: (name: string) => string | undefined, now: number): RateLimitPolicy[] {
  const limit = numberField(get("ratelimit-limit"));
  const remaining = numberField(get("ratelimit-remaining"));
  const reset = numberField(get("ratelimit-reset"));
  if (limit === undefined && remaining === undefined && reset === undefined) return [];
  const policy: RateLimitPolicy = { policy: UNNAMED };
  set(policy, "quota", limit?.value);
  set(policy, "window", unnamedPolicyWindow(get("ratelimit-policy"), limit?.value) ?? limit?.window);
  set(policy, "remaining", remaining?.value);
  set(policy, "resetSeconds", resetFromNow(reset?.value, now));
  return [policy];
}

/** `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds or a delta). */
function legacy(get: (name: string) => string | undefined, now: number): RateLimitPolicy[] {
  const limit = numberField(get("x-ratelimit-limit"));
  const remaining = numberField(get("x-ratelimit-remaining"));
  const reset = numberField(get("x-ratelimit-reset"));
  if (limit === undefined && remaining === undefined && reset === undefined) return [];
  const policy: RateLimitPolicy = { policy: UNNAMED };
  set(policy, "quota", limit?.value);
  set(policy, "remaining", remaining?.value);
  set(policy, "resetSeconds", resetFromNow(reset?.value, now));
  return [policy];
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) in seconds: delay-seconds, or an HTTP-date turned into the
 * seconds from `now` (rounded up, at least 0); `undefined` if absent or invalid.
 */
function retryAfter(field: string | undefined, now: number): number | undefined {
  if (field === undefined) return undefined;
  const text = field.trim();
  if (/^\d+$/.test(text)) return saneNumber(Number(text)) ? Number(text) : undefined;
  const date = parseHttpDate(text, now);
  if (date !== undefined) return Math.max(0, Math.ceil((date - now) / 1000));
  // the same value sent twice and combined by Headers#get: "120, 120"
  const repeated = /^(\d+)\s*,/.exec(text);
  return repeated && saneNumber(Number(repeated[1])) ? Number(repeated[1]) : undefined;
}

/** Whether a header's number is one a client can act on: finite, at most 2^53 − 1. */
function saneNumber(value: number): boolean {
  return Number.isFinite(value) && value <= Number.MAX_SAFE_INTEGER;
}

/**
 * Reads the rate-limit headers of a response, whatever style the server uses, into one result.
 *
 * Styles, in order of precedence (the first one present gives `policies`):
 * 1. **IETF lists** (draft-ietf-httpapi-ratelimit-headers-08 to -11; Sluice's default,
 *    express-rate-limit's `"draft-8"`): `RateLimit-Policy: "per-minute";q=100;w=60` and
 *    `RateLimit: "per-minute";r=42;t=18`, one member per policy, joined by name, parsed as RFC
 *    9651 Lists. A field that is not a valid List is ignored entirely, as the draft requires.
 * 2. **draft-7**: `RateLimit: limit=100, remaining=42, reset=18` + `RateLimit-Policy: 100;w=60`.
 * 3. **draft-6**: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (+ `RateLimit-Policy`).
 * 4. **legacy**: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch
 *    seconds when above 1e9, epoch milliseconds above 1e12, else seconds from now).
 *
 * `Retry-After` is read whatever the style: seconds, or an HTTP-date (seconds from `now`).
 *
 * @param headers - the response's headers: `response.headers`, a plain object or `[name, value]` pairs
 * @param options - `now` (epoch ms, default `Date.now()`): the base for epoch values and dates
 * @returns `{ policies, retryAfterSeconds, style }`; no policies and `style: undefined` if the
 *   response carries no rate-limit headers
 *
 * @example
 * ```ts
 * import { parseRateLimit } from "@sluice/client";
 *
 * const info = parseRateLimit({
 *   "ratelimit-policy": '"burst";q=10;w=20, "per-day";q=1000;w=86400',
 *   ratelimit: '"burst";r=0;t=2, "per-day";r=990;t=3432',
 *   "retry-after": "2",
 * });
 * // info.policies: [
 * //   { policy: "burst", quota: 10, window: 20, remaining: 0, resetSeconds: 2 },
 * //   { policy: "per-day", quota: 1000, window: 86400, remaining: 990, resetSeconds: 3432 },
 * // ]
 * // info.retryAfterSeconds: 2, info.style: "ietf"
 * ```
 */
export function parseRateLimit(headers: HeadersLike, options: ParseRateLimitOptions = {}): RateLimitInfo {
  const now = options.now ?? Date.now();
  const get = headerGetter(headers);
  const retryAfterSeconds = retryAfter(get("retry-after"), now);
  const styles: [RateLimitStyle, () => RateLimitPolicy[]][] = [
    ["ietf", () => ietf(get)],
    ["draft-7", () => draft7(get)],
    ["draft-6", () => draft6(get, now)],
    ["legacy", () => legacy(get, now)],
  ];
  for (const [style, read] of styles) {
    const policies = read();
    if (policies.length > 0) return { policies, retryAfterSeconds, style };
  }
  return { policies: [], retryAfterSeconds, style: undefined };
}
