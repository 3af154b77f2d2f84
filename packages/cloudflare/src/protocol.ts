/**
 * What travels between a {@link DurableObjectStore} and the `SluiceLimiter` Durable Object: the
 * policies as plain data (their factory options, never derived numbers), the key, the cost and —
 * from a test store only — a fixed "now". The object rebuilds each policy with the core factories,
 * so a caller cannot hand it an emission interval or a window that the factories would refuse.
 *
 * @module
 */
import {
  type Policy,
  SluiceConfigError,
  SluiceInputError,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";

/** A policy as plain data: the options its factory takes. */
export type PolicySpec =
  | { kind: "fixedWindow" | "slidingWindow" | "slidingLog"; name: string; limit: number; windowMs: number }
  | { kind: "tokenBucket"; name: string; capacity: number; refillRate: number; intervalMs: number }
  | { kind: "leakyBucket"; name: string; rate: number; periodMs: number; burst: number; queue: number };

/** The fields every call to the object carries. */
export interface LimiterCall {
  /** The namespace prefix (`RateLimiter`'s `prefix`, `sluice:pro` for a tier). */
  prefix: string;
  /** The caller's key. */
  key: string;
  /** `JSON.stringify(PolicySpec[])`: also the object's cache key for the parsed layout. */
  policies: string;
  /** A fixed "now" in epoch ms, sent only by a test store; honoured only behind the test fence. */
  nowMs?: number;
}

/** A `consume` call: `cost` units for every policy, all or nothing. */
export interface ConsumeCall extends LimiterCall {
  cost: number;
}

/** A `reset` call: forget the key in the namespace. */
export interface ResetCall {
  prefix: string;
  key: string;
}

/** The most policies one namespace may send (a guard against absurd payloads). */
export const MAX_POLICIES = 32;
/** The longest prefix or key the object accepts, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 4096;

/** The plain-data form of a policy made by a core factory. */
export function specOf(policy: Policy): PolicySpec {
  switch (policy.kind) {
    case "fixedWindow":
    case "slidingWindow":
    case "slidingLog":
      return { kind: policy.kind, name: policy.name, limit: policy.limit, windowMs: policy.windowMs };
    case "tokenBucket":
      return { kind: "tokenBucket", name: policy.name, capacity: policy.capacity, refillRate: policy.refillRate, intervalMs: policy.intervalMs };
    case "leakyBucket":
      return {
        kind: "leakyBucket",
        name: policy.name,
        rate: policy.rate,
        periodMs: policy.periodMs,
        burst: policy.burst,
        queue: policy.queue,
      };
  }
}

/**
 * Rebuilds policies from their JSON form with the core factories, which validate every field.
 * Throws `SluiceConfigError` for anything that is not a list of valid, distinctly named policies.
 */
export function policiesFromJson(json: unknown): Policy[] {
  if (typeof json !== "string") throw new SluiceConfigError("[sluice] [cloudflare] policies must be a JSON string");
  let specs: unknown;
  try {
    specs = JSON.parse(json);
  } catch {
    throw new SluiceConfigError("[sluice] [cloudflare] policies is not valid JSON");
  }
  if (!Array.isArray(specs) || specs.length === 0 || specs.length > MAX_POLICIES) {
    throw new SluiceConfigError(`[sluice] [cloudflare] policies must be a list of 1 to ${MAX_POLICIES} policies`);
  }
  const names = new Set<string>();
  return specs.map((spec: unknown, i) => {
    if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
      throw new SluiceConfigError(`[sluice] [cloudflare] policies[${i}] must be an object`);
    }
    const s = spec as Record<string, unknown>;
    let policy: Policy;
    // the factories validate every field; numbers that are not numbers fail there
    switch (s.kind) {
      case "fixedWindow":
        policy = fixedWindow({ name: s.name as string, limit: s.limit as number, window: s.windowMs as number });
        break;
      case "slidingWindow":
        policy = slidingWindow({ name: s.name as string, limit: s.limit as number, window: s.windowMs as number });
        break;
      case "slidingLog":
        policy = slidingLog({ name: s.name as string, limit: s.limit as number, window: s.windowMs as number });
        break;
      case "tokenBucket":
        policy = tokenBucket({
          name: s.name as string,
          capacity: s.capacity as number,
          refillRate: s.refillRate as number,
          interval: s.intervalMs as number,
        });
        break;
      case "leakyBucket":
        policy = leakyBucket({
          name: s.name as string,
          rate: s.rate as number,
          period: s.periodMs as number,
          burst: s.burst as number,
          queue: s.queue as number,
        });
        break;
      default:
        throw new SluiceConfigError(`[sluice] [cloudflare] policies[${i}].kind is not an algorithm`);
    }
    if (typeof s.name !== "string" || names.has(policy.name)) {
      throw new SluiceConfigError(`[sluice] [cloudflare] policies[${i}] needs a name distinct from the others`);
    }
    names.add(policy.name);
    return policy;
  });
}

/** Throws `SluiceInputError` unless `value` is a non-empty string of at most {@link MAX_KEY_LENGTH}. */
export function checkKeyPart(value: unknown, what: "prefix" | "key"): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_KEY_LENGTH) {
    throw new SluiceInputError(`[sluice] [cloudflare] ${what} must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`);
  }
  return value;
}

/** Throws `SluiceInputError` unless `cost` is a positive safe integer. */
export function checkCost(cost: unknown): number {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    throw new SluiceInputError("[sluice] [cloudflare] cost must be a positive safe integer");
  }
  return cost;
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
 * The name of the object that holds `key` of namespace `prefix` (`idFromName` hashes it).
 * A prefix never contains `\u0000` (core validates it), so distinct (prefix, key) pairs never share
 * a name. With `shards`, keys hash onto `shards` objects per prefix.
 */
export function objectName(prefix: string, key: string, shards: number): string {
  if (shards === 0) return `${prefix}\u0000${key}`;
  return `${prefix}\u0000#shard-${fnv1a(key) % shards}-of-${shards}`;
}
