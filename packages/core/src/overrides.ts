/**
 * Per-key overrides and manual blocks (`limiter.setOverride`, `limiter.block`): what they are, how
 * they are checked, how every store writes them down, and the effective policies they make.
 *
 * DESIGN: both are stored with the key's own state, in two fields of its record next to the
 * policies' (`|override`, `|block`: a policy's field is `<name>|<code>`, and a name is never empty,
 * so no policy field starts with `|`), so that the one round trip that decides also reads them.
 *
 * - `|override` holds `"<expiresAtUs>,<body>"` (`0`: it never expires). The body is `s,<scale>`
 *   (the scale as JavaScript writes the number: `String(1.5)`), `u` (unlimited), or
 *   `q,<name>=<quota>,…` (names in JavaScript's string order; a policy name has no `,` or `=`).
 * - `|block` holds the manual block's end (epoch µs).
 *
 * An override is read by every limiter with the key's prefix and tier (a `quotas` entry only by the
 * policy of that name). Its effective quota per policy (`Q` the policy's own: its `limit`, a
 * bucket's burst): `min(maxQuota, max(1, floor(Q × scale)))` for a scale, the listed quota
 * (clamped alike) for `quotas`. Redis computes the same numbers with the same IEEE operations.
 *
 * @module
 */
import { type Policy, algorithmOf } from "./algorithms/index.js";
import { type Duration, MAX_DURATION_MS, toMs } from "./duration.js";
import { SluiceInputError, describe, tagged } from "./errors.js";
import { markBlocked } from "./algorithms/penalty-box.js";
import type { PolicyResult } from "./results.js";

/**
 * A per-key override (`limiter.setOverride(key, override, { ttl })`):
 *
 * - `{ scale }`: every policy's quota (limit, capacity, burst) times `scale` (rounded down, at
 *   least 1); a window keeps its length and a bucket's rate scales with it, so each algorithm keeps
 *   its shape.
 * - `{ quotas: { [policyName]: quota } }`: new quotas for the named policies (their rates scale
 *   alike); the others keep theirs.
 * - `{ unlimited: true }`: every request is allowed and nothing is counted (a manual block still
 *   denies).
 *
 * @example
 * ```ts
 * await limiter.setOverride("customer-42", { scale: 10 }, { ttl: "1h" });
 * await limiter.setOverride("partner", { quotas: { "per-minute": 5000 } });
 * await limiter.setOverride("health-check", { unlimited: true });
 * ```
 */
export type Override = { readonly scale: number } | { readonly quotas: Readonly<Record<string, number>> } | { readonly unlimited: true };

/** Options of `limiter.setOverride`. */
export interface OverrideOptions {
  /** How long the override lasts (`"1h"`, or ms); without it, until `clearOverride`. */
  ttl?: Duration;
}

/**
 * What `BoundStore.control` is asked to do, in one round trip, to the record of one key. Times are
 * taken from the store's clock: `ttlMs`/`durationMs` count from the store's `now`.
 */
export type StoreCommand =
  | { readonly op: "getOverride" }
  /** `override`: the override's body (see {@link overrideText}); `ttlMs` 0: until cleared. */
  | { readonly op: "setOverride"; readonly override: string; readonly ttlMs: number }
  | { readonly op: "clearOverride" }
  /** A manual block until the store's now + `durationMs`, replacing any manual block the key has. */
  | { readonly op: "block"; readonly durationMs: number }
  /** Ends the manual block and the namespace's policies' penalty boxes. */
  | { readonly op: "unblock" };

/** What `BoundStore.control` answers. */
export interface ControlResult {
  /** The store's clock (epoch ms). */
  now: number;
  /** The body of the key's live override after the command (see {@link overrideText}), or `undefined`. */
  override?: string | undefined;
}

/** The field of a key's record holding its override. */
export const OVERRIDE_FIELD = "|override";
/** The field of a key's record holding its manual block's end (µs). */
export const BLOCK_FIELD = "|block";

/** The quota an override scales: a policy's `limit` (a bucket's burst). */
export function quotaOf(policy: Policy): number {
  return policy.limit;
}

/** The largest quota an override may give `policy` (the same constant in Lua). */
export function maxQuota(policy: Policy): number {
  return algorithmOf(policy).maxQuota(policy);
}

/**
 * Checks an override against a limiter's policies and gives its body (what a store keeps):
 * `SluiceInputError` naming the field for a scale that is not a positive finite number or makes a
 * quota 0 or too large, an unknown policy name, a quota that is not a positive safe integer or is
 * above the policy's maximum.
 *
 * @example
 * ```ts
 * overrideText({ scale: 2 }, limiter.policies); // "s,2"
 * ```
 */
export function overrideText(override: unknown, policies: readonly Policy[], option = "override"): string {
  if (typeof override !== "object" || override === null || Array.isArray(override)) {
    throw new SluiceInputError(`${option} must be { scale }, { quotas } or { unlimited: true }; got ${describe(override)}`, { option });
  }
  const o = override as Record<string, unknown>;
  const keys = Object.keys(o);
  for (const k of keys) {
    if (k !== "scale" && k !== "quotas" && k !== "unlimited") {
      throw new SluiceInputError(`${option}.${k} is not an override field: an override is { scale }, { quotas } or { unlimited: true }`, { option: `${option}.${k}` });
    }
  }
  if (keys.length !== 1) {
    throw new SluiceInputError(`${option} must have exactly one of scale, quotas and unlimited; got ${keys.length === 0 ? "none" : keys.join(", ")}`, { option });
  }
  // own fields only: an object whose prototype says `unlimited` is not an unlimited override
  if (Object.hasOwn(o, "unlimited")) {
    if (o.unlimited !== true) throw new SluiceInputError(`${option}.unlimited must be true; got ${describe(o.unlimited)}`, { option: `${option}.unlimited` });
    return "u";
  }
  if (Object.hasOwn(o, "scale")) {
    const scale = o.scale;
    if (typeof scale !== "number" || !Number.isFinite(scale) || scale <= 0) {
      throw new SluiceInputError(`${option}.scale must be a positive finite number; got ${describe(scale)}`, { option: `${option}.scale` });
    }
    for (const policy of policies) {
      const quota = Math.floor(quotaOf(policy) * scale);
      if (quota < 1) {
        throw new SluiceInputError(`${option}.scale must leave every quota at least 1; got ${scale}, which makes policy ${JSON.stringify(policy.name)}'s quota ${quotaOf(policy)} × ${scale} < 1`, {
          option: `${option}.scale`,
        });
      }
      assertQuota(policy, quota, `${option}.scale`, `${scale}, which makes policy ${JSON.stringify(policy.name)}'s quota ${quota}`);
    }
    return `s,${String(scale)}`;
  }
  const quotas = o.quotas;
  if (typeof quotas !== "object" || quotas === null || Array.isArray(quotas) || Object.keys(quotas).length === 0) {
    throw new SluiceInputError(`${option}.quotas must be an object of policy names to quotas with at least one entry; got ${describe(quotas)}`, { option: `${option}.quotas` });
  }
  const names = Object.keys(quotas).sort();
  const parts: string[] = [];
  for (const name of names) {
    const field = `${option}.quotas.${name}`;
    const policy = policies.find((p) => p.name === name);
    if (policy === undefined) {
      throw new SluiceInputError(`${field} names no policy of this limiter (its policies: ${policies.map((p) => JSON.stringify(p.name)).join(", ")})`, { option: field });
    }
    const quota = (quotas as Record<string, unknown>)[name];
    if (typeof quota !== "number" || !Number.isSafeInteger(quota) || quota < 1) {
      throw new SluiceInputError(`${field} must be a positive safe integer; got ${describe(quota)}`, { option: field });
    }
    assertQuota(policy, quota, field, String(quota));
    parts.push(`${name}=${quota}`);
  }
  return `q,${parts.join(",")}`;
}

/**
 * Checks a `BoundStore.control` command before anything is touched (`SluiceInputError` with
 * `option` `"command.op"`, `"command.override"`, `"command.ttlMs"` or `"command.durationMs"`;
 * durations from 0 (a ttl: until cleared) or 1 to 2^31 − 1 ms) and returns its op. `tag` names
 * the package in the message.
 *
 * @example
 * ```ts
 * control(key, command) {
 *   const op = assertStoreCommand(command, "my-store");
 *   // …
 * }
 * ```
 */
export function assertStoreCommand(command: StoreCommand, tag?: string): StoreCommand["op"] {
  const c = (typeof command === "object" && command !== null ? command : {}) as Record<string, unknown>;
  const op = c.op;
  const fail = (option: string, must: string, got: unknown): never => {
    throw new SluiceInputError(tagged(tag, `${option} must be ${must}; got ${describe(got)}`), { option });
  };
  if (op === "setOverride") {
    if (typeof c.override !== "string" || overrideFromText(c.override) === undefined) fail("command.override", `an override's body ("s,<scale>", "u" or "q,<name>=<quota>,…")`, c.override);
    const ttlMs = c.ttlMs;
    if (typeof ttlMs !== "number" || !Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > MAX_DURATION_MS) fail("command.ttlMs", `an integer from 0 (until cleared) to ${MAX_DURATION_MS}`, ttlMs);
  } else if (op === "block") {
    const ms = c.durationMs;
    if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 1 || ms > MAX_DURATION_MS) fail("command.durationMs", `an integer from 1 to ${MAX_DURATION_MS}`, ms);
  } else if (op !== "getOverride" && op !== "clearOverride" && op !== "unblock") {
    fail("command.op", `"getOverride", "setOverride", "clearOverride", "block" or "unblock"`, op);
  }
  return op as StoreCommand["op"];
}

/** The body of an override already checked (one a store reported): no validation. */
export function overrideBody(override: Override): string {
  if (Object.hasOwn(override, "unlimited")) return "u";
  if (Object.hasOwn(override, "scale")) return `s,${String((override as { scale: number }).scale)}`;
  const quotas = (override as { quotas: Readonly<Record<string, number>> }).quotas;
  // the names come from Object.keys: each is an own property, read as data whatever it is called
  const names = Object.keys(quotas).sort();
  return `q,${names.map((n) => `${n}=${quotas[n]}`).join(",")}`;
}

/** Whether `override` lets everything through uncounted. */
export function isUnlimited(override: Override | undefined): boolean {
  return override !== undefined && Object.hasOwn(override, "unlimited");
}

function assertQuota(policy: Policy, quota: number, option: string, got: string): void {
  const max = maxQuota(policy);
  const effective = quota <= max ? algorithmOf(policy).withQuota(policy, quota) : undefined;
  if (effective === undefined || !algorithmOf(policy).isValid(effective as unknown as Record<string, unknown>)) {
    throw new SluiceInputError(`${option} must keep policy ${JSON.stringify(policy.name)}'s quota at most ${max} (and within its algorithm's limits); got ${got}`, { option });
  }
}

/** Checks a duration argument (`ttl`, a block's duration) and gives it in ms. */
export function durationArg(value: unknown, option: string): number {
  try {
    return toMs(value as Duration, option);
  } catch (error) {
    throw new SluiceInputError((error as Error).message, { option });
  }
}

const parsed = new Map<string, Override>();

/**
 * The {@link Override} a body stands for (`"s,10"` → `{ scale: 10 }`), or `undefined` for a body
 * that is none. Frozen and shared: one object per body.
 *
 * @example
 * ```ts
 * overrideFromText("q,per-minute=500"); // { quotas: { "per-minute": 500 } }
 * ```
 */
export function overrideFromText(body: string): Override | undefined {
  let o = parsed.get(body);
  if (o !== undefined) return o;
  o = parse(body);
  if (o === undefined) return undefined;
  if (parsed.size >= 1024) parsed.clear();
  parsed.set(body, o);
  return o;
}

function parse(body: string): Override | undefined {
  if (body === "u") return Object.freeze({ unlimited: true as const });
  if (body.startsWith("s,")) {
    const scale = Number(body.slice(2));
    return Number.isFinite(scale) && scale > 0 ? Object.freeze({ scale }) : undefined;
  }
  if (body.startsWith("q,")) {
    const quotas: Record<string, number> = {};
    for (const part of body.slice(2).split(",")) {
      const eq = part.lastIndexOf("=");
      const quota = Number(part.slice(eq + 1));
      if (eq <= 0 || !Number.isSafeInteger(quota) || quota < 1) return undefined;
      // a name is data: defined as an own property, so that `__proto__` is a quota like any other
      // (an assignment would set the object's prototype and lose it)
      Object.defineProperty(quotas, part.slice(0, eq), { value: quota, enumerable: true, writable: true, configurable: true });
    }
    return Object.freeze({ quotas: Object.freeze(quotas) });
  }
  return undefined;
}

/** The value of a key's `|override` field for `body` lasting until `expiresAtUs` (0: never). */
export function overrideField(body: string, expiresAtUs: number): string {
  return `${expiresAtUs},${body}`;
}

/**
 * The live body of an `|override` field's value at `nowUs`, or `undefined` (none, expired or
 * malformed), with its end (µs; `Number.MAX_SAFE_INTEGER` when it never expires).
 */
export function liveOverride(value: unknown, nowUs: number): { body: string; expiresAtUs: number } | undefined {
  if (typeof value !== "string") return undefined;
  const comma = value.indexOf(",");
  if (comma <= 0) return undefined;
  const at = Number(value.slice(0, comma));
  if (!Number.isSafeInteger(at) || at < 0 || (at !== 0 && at <= nowUs)) return undefined;
  const body = value.slice(comma + 1);
  if (overrideFromText(body) === undefined) return undefined;
  return { body, expiresAtUs: at === 0 ? Number.MAX_SAFE_INTEGER : at };
}

const effective = new WeakMap<readonly Policy[], Map<string, readonly Policy[]>>();

/**
 * The policies a limiter applies to a key whose override has `body` (not `"u"`): each with its
 * effective quota (see the module notes). The same list object for the same policies and body.
 */
export function effectivePolicies(policies: readonly Policy[], body: string): readonly Policy[] {
  let byBody = effective.get(policies);
  if (byBody === undefined) {
    byBody = new Map();
    effective.set(policies, byBody);
  }
  let list = byBody.get(body);
  if (list === undefined) {
    const override = overrideFromText(body);
    list = Object.freeze(policies.map((p) => withEffectiveQuota(p, override)));
    if (byBody.size >= 256) byBody.clear();
    byBody.set(body, list);
  }
  return list;
}

function withEffectiveQuota(policy: Policy, override: Override | undefined): Policy {
  if (override === undefined || Object.hasOwn(override, "unlimited")) return policy;
  const base = quotaOf(policy);
  let quota: number;
  if (Object.hasOwn(override, "scale")) quota = Math.floor(base * (override as { scale: number }).scale);
  else {
    // only an entry of its own names a policy: `toString` must not find Object.prototype's
    const quotas = (override as { quotas: Readonly<Record<string, number>> }).quotas;
    if (!Object.hasOwn(quotas, policy.name)) return policy;
    quota = quotas[policy.name] as number;
  }
  const max = maxQuota(policy);
  quota = quota < 1 ? 1 : quota > max ? max : quota;
  return quota === base ? policy : algorithmOf(policy).withQuota(policy, quota);
}

/**
 * Every policy's answer when an unlimited override applies: allowed, nothing counted, the whole
 * (base) quota left.
 */
export function unlimitedResults(policies: readonly Policy[], nowMs: number): PolicyResult[] {
  return policies.map((p) => ({ policy: p.name, allowed: true, limit: quotaOf(p), remaining: quotaOf(p), resetAt: nowMs, retryAfterMs: 0, delayMs: 0, refillAt: nowMs }));
}

/**
 * Every policy's answer under an unlimited override while a manual block runs until `untilUs`:
 * blocked until the block's end, when the override lets everything through again.
 */
export function unlimitedBlockedResults(policies: readonly Policy[], nowUs: number, untilUs: number): PolicyResult[] {
  const results = unlimitedResults(policies, Math.floor(nowUs / 1000));
  for (const r of results) markBlocked(r, nowUs, Math.ceil((untilUs - nowUs) / 1000));
  return results;
}
