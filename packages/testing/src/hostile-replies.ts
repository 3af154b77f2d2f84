/**
 * Hostile replies, the part that runs anywhere (Node and workerd: it imports core only): a reply
 * template, turned into what a misbehaving store sends at the moment it answers (a Redis reply in
 * RESP, an Upstash result as JSON text, a Durable Object's RPC value), and the call of a limiter
 * whose store got it, recorded as plain data for the test to judge (see `hostile-checks.ts`).
 *
 * A template's numbers may be relative to the `now` of the answer (`{ nowMs: 5 }`: five ms after
 * it; `{ nowUs: -1 }`), so that a random reply can be right in every way but one.
 *
 * @module
 */
import { type Decision, type Policy, RateLimiter, SluiceStoreError, type Store, type StoreErrorMode } from "@sluice/core";
import type { RespValue } from "./hostile-redis.js";

/** A reply with holes for the time it is sent at; see the module notes. */
export type Template =
  | number
  | bigint
  | string
  | boolean
  | null
  | { readonly nowMs: number }
  | { readonly nowUs: number }
  /** `undefined`, `Infinity`, `-Infinity`, `NaN`: values JSON cannot carry (an RPC value can). */
  | { readonly special: "undefined" | "Infinity" | "-Infinity" | "NaN" }
  | { readonly simple: string }
  | { readonly error: string }
  | { readonly big: bigint }
  | { readonly map: readonly (readonly [string, Template])[] }
  | readonly Template[];

/** The objects a template may be (every case but a primitive and a list). */
type TemplateObject = Exclude<Template, number | bigint | string | boolean | null | readonly Template[]>;

/** A template as a primitive, a list or one of its objects (`Array.isArray` does not narrow a readonly list). */
function kindOf(t: Template): { list: readonly Template[] } | { object: TemplateObject } | { primitive: number | bigint | string | boolean | null } {
  if (Array.isArray(t)) return { list: t as readonly Template[] };
  if (typeof t === "object" && t !== null) return { object: t as TemplateObject };
  return { primitive: t as number | bigint | string | boolean | null };
}

/** A template's number relative to now, in the unit it names. */
function relative(t: TemplateObject, nowMs: number): number | undefined {
  if ("nowMs" in t) return nowMs + t.nowMs;
  if ("nowUs" in t) return nowMs * 1000 + t.nowUs;
  return undefined;
}

const SPECIALS = { undefined: undefined, Infinity: Infinity, "-Infinity": -Infinity, NaN: Number.NaN } as const;

/** The template as a Redis server sends it at `nowMs` (see `hostile-redis.ts` for the types). */
export function toResp(t: Template, nowMs: number): RespValue {
  const k = kindOf(t);
  if ("list" in k) return k.list.map((x) => toResp(x, nowMs));
  if ("primitive" in k) return typeof k.primitive === "boolean" ? { bool: k.primitive } : k.primitive;
  const o = k.object;
  const at = relative(o, nowMs);
  if (at !== undefined) return at;
  if ("special" in o) return o.special === "undefined" ? null : SPECIALS[o.special];
  if ("map" in o) return { map: o.map.map(([key, v]) => [key, toResp(v, nowMs)] as const) };
  if ("simple" in o || "error" in o || "big" in o) return o;
  return null;
}

/**
 * The template as the JSON text of an Upstash result at `nowMs`: integers of any size written out
 * in digits (the client's `JSON.parse` rounds them as it would a real one), strings in base64 when
 * the client asked for it (`Upstash-Encoding: base64`, as the REST API encodes them), an error as
 * the `{ error }` a REST call fails with.
 */
export function toJsonText(t: Template, nowMs: number, base64: boolean): { result: string } | { error: string } {
  const k = kindOf(t);
  if ("object" in k && "error" in k.object) return { error: k.object.error };
  return { result: json(t, nowMs, base64) };
}

function json(t: Template, nowMs: number, base64: boolean): string {
  const k = kindOf(t);
  if ("list" in k) return `[${k.list.map((x) => json(x, nowMs, base64)).join(",")}]`;
  if ("primitive" in k) {
    const p = k.primitive;
    if (typeof p === "string") return JSON.stringify(base64 ? btoa(String.fromCharCode(...new TextEncoder().encode(p))) : p);
    if (typeof p === "bigint") return String(p);
    if (typeof p === "number") return Number.isFinite(p) ? String(p) : "null";
    return JSON.stringify(p);
  }
  const o = k.object;
  const at = relative(o, nowMs);
  if (at !== undefined) return String(at);
  if ("simple" in o) return json(o.simple, nowMs, base64);
  if ("error" in o) return json(o.error, nowMs, base64);
  if ("big" in o) return String(o.big);
  if ("map" in o) return `{${o.map.map(([key, v]) => `${JSON.stringify(key)}:${json(v, nowMs, base64)}`).join(",")}}`;
  return "null";
}

/** The template as a JavaScript value at `nowMs` (what a Durable Object's RPC method returns). */
export function toValue(t: Template, nowMs: number): unknown {
  const k = kindOf(t);
  if ("list" in k) return k.list.map((x) => toValue(x, nowMs));
  if ("primitive" in k) return k.primitive;
  const o = k.object;
  const at = relative(o, nowMs);
  if (at !== undefined) return at;
  if ("special" in o) return SPECIALS[o.special];
  if ("simple" in o) return o.simple;
  if ("error" in o) return { error: o.error };
  if ("big" in o) return o.big;
  if (!("map" in o)) return null;
  const out: Record<string, unknown> = {};
  // an entry whose value is the special undefined is left out, as a missing field
  for (const [key, v] of o.map) if (!(typeof v === "object" && v !== null && "special" in v && v.special === "undefined")) out[key] = toValue(v, nowMs);
  return out;
}

/** What a case asks of a limiter over the hostile store. */
export interface HostileCall {
  readonly op: "limit" | "peek" | "refund";
  /** The cost of a `limit` or `refund`. */
  readonly cost: number;
  readonly onStoreError: StoreErrorMode;
}

/** An error as plain data: its name, message, and whether it is a `SluiceStoreError`. */
export interface PlainError {
  readonly name: string;
  readonly message: string;
  readonly storeError: boolean;
}

/** What a call came to: its decision, or what it threw; and what `onStoreFailure` was handed. */
export interface HostileOutcome {
  readonly decision?: Decision;
  readonly thrown?: PlainError;
  readonly failures: readonly PlainError[];
}

function plainError(error: unknown): PlainError {
  const e = error as { name?: unknown; message?: unknown } | null;
  return { name: String(e?.name ?? typeof error), message: String(e?.message ?? error), storeError: error instanceof SluiceStoreError };
}

/**
 * Runs `call` on a fresh limiter over `store` with `policies` (no deny cache: every call reaches the
 * store) and records what came of it. Whatever the store answers, the call never throws here.
 */
export async function runHostileCall(store: Store, policies: Policy[], call: HostileCall, prefix = "hostile"): Promise<HostileOutcome> {
  const failures: PlainError[] = [];
  const limiter = new RateLimiter({
    store,
    limits: policies,
    prefix,
    onStoreError: call.onStoreError,
    onStoreFailure: (error) => failures.push(plainError(error)),
    denyCache: false,
    timeoutMs: 10_000,
  });
  try {
    const decision =
      call.op === "limit" ? await limiter.limit("k", { cost: call.cost }) : call.op === "peek" ? await limiter.peek("k") : await limiter.refund("k", { cost: call.cost });
    return { decision: { ...decision, pending: Promise.resolve() }, failures };
  } catch (error) {
    return { thrown: plainError(error), failures };
  }
}
