/**
 * What travels between a {@link DurableObjectStore} and the `SluiceLimiter` Durable Object: the
 * namespace (prefix and tier), the policies as plain data (their factory options, never derived
 * numbers), the key, the cost and — from a test store only — a fixed "now". The object rebuilds
 * each policy with the core factories, so a caller cannot hand it an emission interval or a window
 * that the factories would refuse.
 *
 * Replies: a `StoreResult` (its `override` as the override's body, core's stored form), a
 * `control` command's `{ now, override? }`, or — when the object refuses a call for bad
 * configuration or bad input — `{ error: { name, code, message, option } }`, a value rather than an
 * exception, because an error's class does not survive the RPC boundary. The store turns it back into a
 * `SluiceConfigError` or a `SluiceInputError` with the same `code`, `message` and `option`; anything
 * else that goes wrong is a store failure (`SluiceStoreError`).
 *
 * @module
 */
import { type Policy, type PolicyResult, SluiceConfigError, SluiceInputError, SluiceStoreError } from "@sluice/core";
import {
  type ControlResult,
  MAX_POLICIES,
  type ReplyExpectations,
  type StoreCommand,
  type ReserveResult,
  type StoreResult,
  isPolicyKind,
  namespaceKey,
  overrideFromText,
  policyData,
  policyFromData,
  storageKey,
  storeClockProblem,
  storeResultProblem,
} from "@sluice/core/store";

/**
 * A policy as plain data: its kind and name, the options its factory takes (durations in ms) and
 * its penalty box (core's `policyData`), e.g. `{ kind: "fixedWindow", name: "100-per-1m", limit:
 * 100, window: 60000 }`.
 */
export type PolicySpec = { kind: Policy["kind"]; name: string; block?: { base: number; factor: number; max: number } } & Record<string, unknown>;

/** The fields every call to the object carries. */
export interface LimiterCall {
  /** The namespace prefix (`RateLimiter`'s `prefix`). */
  prefix: string;
  /** The tier of a tiered guard's namespace; absent for a plain limiter. */
  tier?: string;
  /** The caller's key. */
  key: string;
  /** `JSON.stringify(PolicySpec[])`: also the object's cache key for the parsed policies. */
  policies: string;
  /** A fixed "now" in epoch ms, sent only by a test store; honoured only behind the test fence. */
  nowMs?: number;
}

/**
 * A `consume` call: `cost` units for every policy, all or nothing; `lease` (a positive safe integer,
 * when the policies include a concurrency cap) is the id an allowed request holds its slots under.
 */
export interface ConsumeCall extends LimiterCall {
  cost: number;
  lease?: number;
}

/** A `release` call: free the slot `lease` holds on every concurrency cap of the key (idempotent). */
export interface ReleaseCall extends LimiterCall {
  lease: number;
}

/**
 * A `refund` call: `cost` units back to every policy, for the request charged at `chargedAtMs`
 * with the marks `marks` and the unit prices `prices` (core's `RefundCharge`; all absent: the
 * latest charges, at the prices in force now).
 */
export interface RefundCall extends LimiterCall {
  cost: number;
  chargedAtMs?: number;
  marks?: number[];
  prices?: number[];
}

/**
 * A `reserve` call: up to `units` units charged to every policy at once, counted by a bucket as
 * used `holdMs` from now (core's `reserveState`).
 */
export interface ReserveCall extends LimiterCall {
  units: number;
  holdMs: number;
}

/**
 * A `control` call: an override or manual-block command on the key's record (core's
 * `StoreCommand`, run by `controlState` in the object; times count from the object's clock). The
 * policies travel too: `unblock` ends their penalty boxes.
 */
export interface ControlCall extends LimiterCall {
  command: StoreCommand;
}

/** A `reset` call: forget the key in the namespace. */
export interface ResetCall {
  prefix: string;
  tier?: string;
  key: string;
}

/** The error classes that keep their class across the RPC: the caller's mistakes, never outages. */
export type RefusalName = "SluiceConfigError" | "SluiceInputError";

/**
 * The object's answer to a call it refuses for bad configuration or bad input: the error's class
 * name, `code`, message and `option` (the option or argument path it is about).
 */
export interface Refusal {
  error: { name: RefusalName; code: "SLUICE_CONFIG" | "SLUICE_INPUT"; message: string; option: string };
}

/**
 * A decision as it crosses the RPC: a `StoreResult` whose `override` is the override's body
 * (`"s,10"`, `"u"`, `"q,login=5"`: core's stored form), which the store turns back into the
 * `Override` object with `overrideFromText`.
 */
export type WireResult = Omit<StoreResult, "override"> & { override?: string };

/** The object's answer to `consume`, `peek`, `refund` or `release`. */
export type DecisionReply = WireResult | Refusal;

/** The object's answer to `reserve`: a decision's reply and the units granted. */
export type ReserveReply = (WireResult & { granted: number }) | Refusal;

/** The object's answer to `control`: the object's clock and the key's live override body afterwards. */
export type ControlReply = ControlResult | Refusal;

/** The object's answer to `reset`: nothing, or a refusal. */
export type ResetReply = null | Refusal;

/** The plain-data form of a policy made by a core factory. */
export function specOf(policy: Policy): PolicySpec {
  return policyData(policy) as PolicySpec;
}

/**
 * Rebuilds policies from their JSON form with the core factories, which validate every field.
 * Throws `SluiceConfigError` for anything that is not a list of 1 to `MAX_POLICIES` (core's limit,
 * the same on every store) valid, distinctly named policies; its `option` is the path in the list
 * (`"policies"`, `"policies[1].kind"`, `"policies[0].limit"` for a field the factory refused).
 */
export function policiesFromJson(json: unknown): Policy[] {
  if (typeof json !== "string") {
    throw new SluiceConfigError(`[sluice] [cloudflare] policies must be a JSON string; got ${typeof json}`, { option: "policies" });
  }
  let specs: unknown;
  try {
    specs = JSON.parse(json);
  } catch {
    throw new SluiceConfigError("[sluice] [cloudflare] policies must be valid JSON; got text that does not parse", { option: "policies" });
  }
  if (!Array.isArray(specs) || specs.length === 0 || specs.length > MAX_POLICIES) {
    const got = Array.isArray(specs) ? `${specs.length}` : "something else";
    throw new SluiceConfigError(`[sluice] [cloudflare] policies must be a list of 1 to ${MAX_POLICIES} policies (the same limit on every store); got ${got}`, {
      option: "policies",
    });
  }
  const names = new Set<string>();
  return specs.map((spec: unknown, i) => {
    const at = `policies[${i}]`;
    if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
      throw new SluiceConfigError(`[sluice] [cloudflare] ${at} must be an object; got ${spec === null ? "null" : Array.isArray(spec) ? "an array" : typeof spec}`, {
        option: at,
      });
    }
    const s = spec as Record<string, unknown>;
    if (!isPolicyKind(s.kind)) {
      throw new SluiceConfigError(`[sluice] [cloudflare] ${at}.kind must be an algorithm's kind; got ${JSON.stringify(s.kind) ?? String(s.kind)}`, {
        option: `${at}.kind`,
      });
    }
    let policy: Policy;
    try {
      // the factory validates every field (and refuses any it does not take, such as a concurrency cap's block)
      policy = policyFromData(s);
    } catch (error) {
      throw underPolicy(error, at);
    }
    if (typeof s.name !== "string" || names.has(policy.name)) {
      throw new SluiceConfigError(`[sluice] [cloudflare] ${at}.name must differ from the other policies' names; got ${JSON.stringify(s.name) ?? String(s.name)}`, {
        option: `${at}.name`,
      });
    }
    names.add(policy.name);
    return policy;
  });
}

/**
 * A factory's `SluiceConfigError` for a policy of the list, put under the policy's path:
 * `limit must be …` becomes `policies[0].limit must be …` (`option` likewise), tagged `[cloudflare]`.
 */
function underPolicy(error: unknown, at: string): unknown {
  if (!(error instanceof SluiceConfigError)) return error;
  const option = error.option === "" ? at : `${at}.${error.option}`;
  const rest = error.message.replace(/^\[sluice\] (\[[^\]]+\] )?/, "");
  const message = rest.startsWith(error.option) && error.option !== "" ? option + rest.slice(error.option.length) : `${at}: ${rest}`;
  return new SluiceConfigError(`[sluice] [cloudflare] ${message}`, { option, cause: error });
}

/** 32-bit FNV-1a over the UTF-16 code units of `text`: a stable shard number for a key. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The name of the object that holds `key` of the namespace (`idFromName` hashes it): core's
 * `storageKey`, the identifier every store uses, so distinct (prefix, tier, key) never share an
 * object. With `shards`, keys hash onto `shards` objects per namespace, named
 * `<prefix>:<tier>::shard:<n>:<shards>` — one `:` more than any storage key has, so a shard's name
 * is never a key's.
 */
export function objectName(namespace: { readonly prefix: string; readonly tier?: string | undefined }, key: string, shards: number): string {
  if (shards === 0) return storageKey(namespace, key);
  return `${namespaceKey(namespace)}:shard:${fnv1a(key) % shards}:${shards}`;
}

const REFUSALS: ReadonlySet<string> = new Set<RefusalName>(["SluiceConfigError", "SluiceInputError"]);

/**
 * Runs a call inside the object: a `SluiceConfigError` or `SluiceInputError` becomes a
 * {@link Refusal} (a value, which crosses the RPC intact); anything else is thrown.
 */
export function refusing<T>(run: () => T): T | Refusal {
  try {
    return run();
  } catch (error) {
    if (error instanceof SluiceConfigError || error instanceof SluiceInputError) {
      return { error: { name: error.name, code: error.code, message: error.message, option: error.option } };
    }
    throw error;
  }
}

/**
 * Throws the caller's error for a {@link Refusal}, with its message and `option` (`""` from an
 * object of an earlier version, which sent none); returns `false` when `reply` is not one.
 */
function rethrowRefusal(reply: unknown): false {
  if (typeof reply !== "object" || reply === null || !("error" in reply)) return false;
  const error = (reply as { error: unknown }).error as { name?: unknown; message?: unknown; option?: unknown } | null;
  if (
    typeof error !== "object" ||
    error === null ||
    typeof error.name !== "string" ||
    !REFUSALS.has(error.name) ||
    typeof error.message !== "string" ||
    (error.option !== undefined && typeof error.option !== "string")
  ) {
    throw new SluiceStoreError("[sluice] [cloudflare] SluiceLimiter answered with a malformed error");
  }
  const options = { option: error.option ?? "" };
  throw error.name === "SluiceConfigError" ? new SluiceConfigError(error.message, options) : new SluiceInputError(error.message, options);
}

/** The message of a malformed decision: what is wrong with it. */
function malformedDecision(problem: string): SluiceStoreError {
  return new SluiceStoreError(`[sluice] [cloudflare] SluiceLimiter answered with a malformed decision: ${problem}`);
}

/**
 * One policy's result as it crossed the RPC, rebuilt with the fields a result has and nothing
 * else (core's `storeResultProblem` then checks each); `undefined` for something not an object.
 */
function resultOf(value: unknown): PolicyResult | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const r = value as Record<keyof PolicyResult, unknown>;
  const result = {
    policy: r.policy,
    allowed: r.allowed,
    limit: r.limit,
    remaining: r.remaining,
    resetAt: r.resetAt,
    retryAfterMs: r.retryAfterMs,
    delayMs: r.delayMs,
    refillAt: r.refillAt,
  } as PolicyResult;
  if (r.blocked !== undefined || r.blockedUntil !== undefined) {
    result.blocked = r.blocked as true;
    result.blockedUntil = r.blockedUntil as number;
  }
  return result;
}

/**
 * The store's reading of a `consume`/`peek`/`refund`/`release` reply: the `StoreResult` (one
 * result per policy, in order), a refusal rethrown as its class, or a `SluiceStoreError` for
 * anything malformed — a shape, a type or a value no algorithm produces (core's
 * `storeResultProblem`: ranges, and the clock, the time `expected.nowMs` sent or else within a day
 * of this Worker's).
 */
export function decisionFromReply(reply: unknown, policies: readonly Policy[], expected: ReplyExpectations): StoreResult {
  rethrowRefusal(reply);
  if (typeof reply !== "object" || reply === null || Array.isArray(reply)) throw malformedDecision(`expected an object; got ${describeValue(reply)}`);
  const { now, policies: list, marks, override: body } = reply as Record<string, unknown>;
  if (!Array.isArray(list)) throw malformedDecision(`policies is ${describeValue(list)}, not a list`);
  const results: PolicyResult[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const r = resultOf(list[i]);
    if (r === undefined) throw malformedDecision(`policies[${i}] is ${describeValue(list[i])}, not a result`);
    results[i] = r;
  }
  const result: StoreResult = { now: now as number, policies: results };
  if (marks !== undefined) result.marks = Array.isArray(marks) ? [...(marks as number[])] : (marks as number[]);
  if (body !== undefined) {
    const override = typeof body === "string" ? overrideFromText(body) : undefined;
    if (override === undefined) throw new SluiceStoreError("[sluice] [cloudflare] SluiceLimiter answered with a malformed override");
    result.override = override;
  }
  const problem = storeResultProblem(policies, result, expected);
  if (problem !== undefined) throw malformedDecision(problem);
  return result;
}

/**
 * The store's reading of a `reserve` reply: a decision's (see {@link decisionFromReply}) and the
 * units granted, a whole number from 0 to those asked; anything else is a `SluiceStoreError`.
 */
export function reservationFromReply(reply: unknown, policies: readonly Policy[], units: number, expected: ReplyExpectations): ReserveResult {
  const result = decisionFromReply(reply, policies, expected);
  const granted = (reply as { granted?: unknown }).granted;
  if (typeof granted !== "number" || !Number.isSafeInteger(granted) || granted < 0 || granted > units || (granted === 0 && result.marks !== undefined)) {
    throw new SluiceStoreError("[sluice] [cloudflare] SluiceLimiter answered a reservation with a malformed grant");
  }
  return { ...result, granted };
}

/**
 * The store's reading of a `control` reply: `{ now, override? }` (the body of the key's live
 * override), a refusal rethrown as its class, or a `SluiceStoreError` for anything malformed (the
 * clock as for a decision: `sentMs`, the time sent, or else within a day of this Worker's).
 */
export function controlFromReply(reply: unknown, sentMs: number | undefined): ControlResult {
  rethrowRefusal(reply);
  const result = reply as Partial<ControlResult> | null;
  if (
    typeof result !== "object" ||
    result === null ||
    (result.override !== undefined && (typeof result.override !== "string" || overrideFromText(result.override) === undefined))
  ) {
    throw new SluiceStoreError("[sluice] [cloudflare] SluiceLimiter answered a control command with something unexpected");
  }
  const clock = storeClockProblem(result.now, sentMs);
  if (clock !== undefined) throw new SluiceStoreError(`[sluice] [cloudflare] SluiceLimiter answered a control command with something unexpected: ${clock}`);
  return result.override === undefined ? { now: result.now as number } : { now: result.now as number, override: result.override };
}

/** A value's kind for an error message (never its contents: they come from outside). */
function describeValue(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "a list" : typeof value;
}

/**
 * The `now` (epoch ms) a decision made at the test time `nowMs` reports: the object's
 * `Math.floor(nowMs * 1000)` µs, in whole ms. `undefined` (no time sent): the object's own clock.
 */
export function sentNowMs(nowMs: number | undefined): number | undefined {
  return nowMs === undefined ? undefined : Math.floor(Math.floor(nowMs * 1000) / 1000);
}

/** The store's reading of a `reset` reply. */
export function resetFromReply(reply: unknown): void {
  rethrowRefusal(reply);
  if (reply !== null && reply !== undefined) throw new SluiceStoreError("[sluice] [cloudflare] SluiceLimiter answered a reset with something unexpected");
}
