/**
 * Hostile replies, the Node part: random reply templates (fast-check) for a store whose replies are
 * lists (the Redis scripts') or objects (the Durable Object's), and the judgement of what a call
 * came to: a store failure handled as `onStoreError` says, or a decision that obeys the invariants
 * (allowed, remaining and headers consistent, `now` within the clock's range) — never an exception.
 *
 * @module
 */
import { type Decision, MAX_QUOTA, type Policy, type PolicyResult, setRateLimitHeaders } from "@sluice/core";
import { MAX_CLOCK_SKEW_MS } from "@sluice/core/store";
import fc from "fast-check";
import type { HostileCall, HostileOutcome, Template } from "./hostile-replies.js";
import { headersDisagree } from "./conformance/invariants.js";

/** Offsets (ms or µs) from now: near it, a day and more away, far ahead. */
const offset = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -3, max: 3 }) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 120_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(-(MAX_CLOCK_SKEW_MS + 1), MAX_CLOCK_SKEW_MS + 1, -1_000_000, 2 ** 42, 2 ** 52, -(2 ** 45)) },
);

/** A number of a reply: small counts, the edges of safe integers, integers no double holds, fractions, times near now. */
export const hostileNumber: fc.Arbitrary<Template> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -2, max: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 2 ** 52, 2 ** 53 - 1, 2 ** 53 - 57, -(2 ** 53)) },
  { weight: 1, arbitrary: fc.bigInt({ min: 2n ** 53n, max: 2n ** 80n }) },
  { weight: 1, arbitrary: fc.constantFrom(0.5, -1.5, 1e300, 2 ** 53 + 0.5) },
  { weight: 3, arbitrary: offset.map((o) => ({ nowMs: o })) },
  { weight: 2, arbitrary: offset.map((o) => ({ nowUs: o })) },
);

/** Anything a reply might hold, nested: numbers, strings, nulls, booleans, errors, maps, lists. */
export const hostileTree: fc.Arbitrary<Template> = fc.letrec<{ tree: Template }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { weight: 4, arbitrary: hostileNumber },
    { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("1", "OK", "s,2", "u", "[1,2]", "{}")) },
    { weight: 1, arbitrary: fc.constantFrom<Template>(null, true, false, { special: "NaN" }, { special: "Infinity" }, { simple: "OK" }, { error: "ERR hostile" }, { big: 2n ** 64n }) },
    { weight: 1, arbitrary: fc.array(fc.tuple(fc.string({ maxLength: 4 }), tie("tree")), { maxLength: 3 }).map((map) => ({ map }) as Template) },
    { weight: 2, arbitrary: fc.array(tie("tree"), { maxLength: 10 }) },
  ),
})).tree;

/** What a list reply must look like for a namespace: its lengths and the policies. */
export interface ListLayout {
  /** The full form's length (without an override's body). */
  readonly full: number;
  /** The compact form's length (without an override's body). */
  readonly compact: number;
  readonly policies: readonly Policy[];
}

/** An override's body, or something in its place. */
function bodyArbitrary(policies: readonly Policy[]): fc.Arbitrary<Template> {
  return fc.constantFrom<Template>("s,2", "s,0.5", "u", `q,${policies[0]?.name}=3`, "s,0", "x", "q,nope=1", "", 7, null);
}

/** `list`, once in a while with one element (or the body) replaced by anything. */
function mutated(list: fc.Arbitrary<Template[]>): fc.Arbitrary<Template> {
  return fc.tuple(list, fc.option(fc.tuple(fc.nat(), fc.oneof(hostileNumber, hostileTree)), { freq: 2 })).map(([items, change]) => {
    if (change === null || items.length === 0) return items;
    const copy = [...items];
    copy[change[0] % copy.length] = change[1];
    return copy;
  });
}

/** `items` with an override's body at the end, now and then. */
function withBody(items: fc.Arbitrary<Template[]>, policies: readonly Policy[]): fc.Arbitrary<Template[]> {
  return fc.tuple(items, fc.option(bodyArbitrary(policies), { freq: 3 })).map(([list, body]) => (body === null ? list : [...list, body]));
}

/** A full-form reply that is nearly right: per policy plausible numbers (allowed, remaining, times, retry, delay, block). */
function plausibleFull(layout: ListLayout): fc.Arbitrary<Template[]> {
  const perPolicy = (p: Policy) =>
    fc.tuple(
      fc.constantFrom(0, 1),
      fc.integer({ min: 0, max: p.limit + 1 }),
      fc.integer({ min: 0, max: 120_000 }).map((o) => ({ nowMs: o })),
      fc.oneof(fc.constant(0), fc.constant(-1), fc.integer({ min: 1, max: 120_000 })),
      fc.constantFrom(0, 0, 1, 250),
      fc.integer({ min: 0, max: 120_000 }).map((o) => ({ nowMs: o })),
      fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 120_000 }).map((o) => ({ nowMs: o }))),
    );
  const marks = layout.full - 1 - 7 * layout.policies.length;
  return fc
    .tuple(fc.tuple(...layout.policies.map(perPolicy)), fc.array(fc.constantFrom<Template>(0, 0, { nowUs: 5_000 }), { minLength: marks, maxLength: marks }))
    .map(([policies, m]) => [{ nowMs: 0 }, ...policies.flat(), ...m] as Template[]);
}

/** A compact-form reply that is nearly right: now in µs, then small counts and times ahead. */
function plausibleCompact(layout: ListLayout): fc.Arbitrary<Template[]> {
  const item = fc.oneof(fc.integer({ min: 0, max: Math.max(...layout.policies.map((p) => p.limit)) + 1 }), fc.integer({ min: 1, max: 5_000_000 }).map((o) => ({ nowUs: o })));
  const n = layout.compact - 1;
  return fc.array(item, { minLength: n, maxLength: n }).map((items) => [{ nowUs: 0 }, ...items] as Template[]);
}

/**
 * Random replies for a store whose script answers a list (see {@link ListLayout}): anything at all,
 * lists of either form's length of random numbers, and replies of either form that are right but
 * for a value or two.
 */
export function listReplyArbitrary(layout: ListLayout): fc.Arbitrary<Template> {
  const { full, compact, policies } = layout;
  return fc.oneof(
    { weight: 2, arbitrary: hostileTree },
    { weight: 2, arbitrary: withBody(fc.array(hostileNumber, { minLength: full, maxLength: full }), policies) },
    { weight: 2, arbitrary: withBody(fc.array(hostileNumber, { minLength: compact, maxLength: compact }), policies) },
    { weight: 1, arbitrary: withBody(fc.array(hostileNumber, { minLength: 0, maxLength: full + 2 }), policies) },
    { weight: 4, arbitrary: mutated(withBody(plausibleFull(layout), policies)) },
    { weight: 3, arbitrary: mutated(withBody(plausibleCompact(layout), policies)) },
  );
}

/** A field's replacement in an object reply: any value, or (the special undefined) its absence. */
const replacement: fc.Arbitrary<Template> = fc.oneof(hostileNumber, hostileTree, fc.constant<Template>({ special: "undefined" }));

/** The entries of an object, once in a while with one of them replaced by {@link replacement}. */
function changedEntries(entries: fc.Arbitrary<[string, Template][]>): fc.Arbitrary<Template> {
  return fc.tuple(entries, fc.option(fc.tuple(fc.nat(), replacement), { freq: 3 })).map(([list, change]): Template => {
    if (change === null) return { map: list };
    const copy = [...list];
    const i = change[0] % copy.length;
    copy[i] = [(copy[i] as [string, Template])[0], change[1]];
    return { map: copy };
  });
}

/** One policy's result as an object, nearly right: plausible numbers, now and then a block. */
function plausibleResult(p: Policy): fc.Arbitrary<Template> {
  const later = fc.integer({ min: 0, max: 120_000 }).map((o) => ({ nowMs: o }));
  const result = fc
    .record({
      allowed: fc.boolean(),
      remaining: fc.integer({ min: 0, max: p.limit + 1 }),
      resetAt: later,
      retryAfterMs: fc.oneof(fc.constant<Template>(0), fc.integer({ min: 1, max: 120_000 }), fc.constant<Template>({ special: "Infinity" })),
      delayMs: fc.constantFrom<Template>(0, 0, 250),
      refillAt: later,
      block: fc.option(fc.integer({ min: 1, max: 120_000 }).map((o) => ({ nowMs: o })), { freq: 4, nil: undefined }),
    })
    .map(({ block, ...r }) => {
      const entries: [string, Template][] = [["policy", p.name], ["limit", p.limit], ...Object.entries(r)];
      if (block !== undefined) entries.push(["blocked", true], ["blockedUntil", block]);
      return entries;
    });
  return changedEntries(result);
}

/**
 * Random replies for a store whose object answers `{ now, policies, marks?, override? }` (the
 * Durable Object's): anything at all, and objects of that shape that are right but for a value or
 * two (a field replaced, or left out).
 */
export function objectReplyArbitrary(policies: readonly Policy[]): fc.Arbitrary<Template> {
  const plausible = fc
    .record({
      policies: fc.tuple(...policies.map(plausibleResult)),
      marks: fc.option(fc.array(fc.constantFrom<Template>(0, { nowUs: 5000 }), { minLength: policies.length, maxLength: policies.length }), { freq: 3, nil: undefined }),
      override: fc.option(bodyArbitrary(policies), { freq: 4, nil: undefined }),
    })
    .map(({ policies: results, marks, override }) => {
      const entries: [string, Template][] = [["now", { nowMs: 0 }], ["policies", results]];
      if (marks !== undefined) entries.push(["marks", marks]);
      if (override !== undefined) entries.push(["override", override]);
      return entries;
    });
  return fc.oneof({ weight: 1, arbitrary: hostileTree }, { weight: 4, arbitrary: changedEntries(plausible) });
}

/** The calls of a case: an operation, a cost (up to past the largest quota), what a store failure gives. */
export const hostileCallArbitrary: fc.Arbitrary<HostileCall> = fc.record({
  op: fc.constantFrom("limit", "limit", "peek", "refund"),
  cost: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 4 }) }, { weight: 1, arbitrary: fc.constantFrom(20, 1000) }),
  onStoreError: fc.constantFrom("fallback", "allow", "deny"),
});

/**
 * What is wrong with `outcome`, the result of `call` on a limiter over a hostile store with
 * `policies`, or `undefined`. `sentMs` is the clock the store sent (a test clock), else `undefined`.
 */
export async function unsoundOutcome(outcome: HostileOutcome, call: HostileCall, policies: readonly Policy[], sentMs: number | undefined): Promise<string | undefined> {
  const failures = outcome.failures;
  if (outcome.thrown !== undefined) {
    // a refund rejects when the store fails (a refund that did not happen must not look done), with a store failure only
    if (call.op === "refund" && outcome.thrown.storeError && failures.length === 0) return undefined;
    return `${call.op} threw ${outcome.thrown.name}: ${outcome.thrown.message}`;
  }
  const d = outcome.decision as Decision;
  if (d.reason === "store-error") {
    if (failures.length !== 1 || failures[0]?.storeError !== true) return `a store-error decision with onStoreFailure given ${JSON.stringify(failures)}`;
    if (call.onStoreError === "deny" && d.allowed) return "onStoreError deny, yet allowed";
    if (call.onStoreError === "allow" && !d.allowed) return "onStoreError allow, yet denied";
    return clockProblem(d.now, undefined);
  }
  if (failures.length !== 0) return `reason ${d.reason} with onStoreFailure given ${JSON.stringify(failures)}`;
  return clockProblem(d.now, sentMs) ?? decisionProblem(d, policies) ?? (await headersProblem(d, policies));
}

function clockProblem(now: number, sentMs: number | undefined): string | undefined {
  if (sentMs !== undefined) return now === sentMs ? undefined : `now ${now}, but the store was sent ${sentMs}`;
  return Math.abs(now - Date.now()) <= MAX_CLOCK_SKEW_MS ? undefined : `now ${now} is more than a day from the clock`;
}

const isCount = (x: unknown, min = 0): boolean => typeof x === "number" && Number.isSafeInteger(x) && x >= min;

/** A decision and its policies' results agree with each other, with whole numbers in their ranges. */
function decisionProblem(d: Decision, policies: readonly Policy[]): string | undefined {
  if (!["ok", "limit", "cost-exceeds-limit", "blocked"].includes(d.reason)) return `reason ${d.reason}`;
  if (d.policies.length !== policies.length) return `${d.policies.length} results for ${policies.length} policies`;
  if (d.allowed !== d.policies.every((r) => r.allowed)) return `allowed ${d.allowed} against the policies' ${d.policies.map((r) => r.allowed)}`;
  if (d.allowed !== (d.reason === "ok")) return `allowed ${d.allowed} with reason ${d.reason}`;
  if (d.allowed ? d.retryAfterMs !== 0 : !(d.retryAfterMs === Infinity || isCount(d.retryAfterMs, 1))) return `retryAfterMs ${d.retryAfterMs} on allowed ${d.allowed}`;
  for (let i = 0; i < policies.length; i++) {
    const problem = resultProblem(d.policies[i] as PolicyResult, policies[i] as Policy, d.now);
    if (problem !== undefined) return `policies[${i}]: ${problem}`;
  }
  return undefined;
}

function resultProblem(r: PolicyResult, policy: Policy, now: number): string | undefined {
  if (r.policy !== policy.name) return `named ${r.policy}`;
  if (!isCount(r.limit, 1) || r.limit > MAX_QUOTA) return `limit ${r.limit}`;
  if (!isCount(r.remaining) || r.remaining > r.limit) return `remaining ${r.remaining} of ${r.limit}`;
  if (!isCount(r.resetAt, now) || !isCount(r.refillAt, now)) return `resetAt ${r.resetAt} / refillAt ${r.refillAt} before now ${now}`;
  if (r.allowed ? r.retryAfterMs !== 0 : !(r.retryAfterMs === Infinity || isCount(r.retryAfterMs, 1))) return `retryAfterMs ${r.retryAfterMs}`;
  if (!isCount(r.delayMs)) return `delayMs ${r.delayMs}`;
  return undefined;
}

/** The headers of every style are written, in whole non-negative numbers; a denial's 429 agrees with its body. */
async function headersProblem(d: Decision, policies: readonly Policy[]): Promise<string | undefined> {
  const headers = new Headers();
  try {
    setRateLimitHeaders(headers, d, ["ietf", "draft-6", "legacy"], policies);
  } catch (error) {
    return `headers threw ${String(error)}`;
  }
  for (const name of ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Remaining", "X-RateLimit-Reset"]) {
    if (!/^\d+$/.test(headers.get(name) ?? "")) return `${name}: ${headers.get(name)}`;
  }
  for (const member of (headers.get("RateLimit") ?? "").split(", ")) {
    if (!/;r=\d+;t=\d+$/.test(member)) return `RateLimit member ${member}`;
  }
  return d.allowed ? undefined : headersDisagree(d, policies);
}
