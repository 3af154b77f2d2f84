/**
 * Reading the scripts' replies. A reply becomes a decision only when its shape (length, types) and
 * every value's range are what the script can produce; anything else is a `SluiceStoreError`, so
 * the limiter's `onStoreError` decides, whatever the server, proxy or client made of the reply.
 *
 * The decide script answers in one of two forms (see `decideScript` in `scripts.ts`):
 *
 * - the **full form**: `now_ms`, then 7 safe integers per policy (allowed 0 or 1, remaining,
 *   reset_at, retry_after: -1 for never, delay, refill_at, blocked_until: 0 for none), then one
 *   mark per bucket (0: the full form never answers a charge);
 * - the **compact form** of the fast path (an allowed consume only): `now_us`, then per policy its
 *   new state (each algorithm's `StateReply` checks it is one an allowed consume leaves) or the 4
 *   numbers of its answer, then the marks of the charge (each after now);
 *
 * either one followed, when the key has a live override, by its body, a string that must parse.
 * Then core's `storeResultProblem` checks every value's range and the clock: the time sent with the
 * call (a test clock, `clock: "client"`), exactly, or else within 24 hours of this process's clock.
 *
 * @module
 */
import { SluiceStoreError } from "@sluice/core";
import {
  type ControlResult,
  type Policy,
  type PolicyResult,
  type ReserveResult,
  type StoreResult,
  allowedFromState,
  effectivePolicies,
  overrideFromText,
  storeClockProblem,
  storeResultProblem,
} from "@sluice/core/store";
import { luaOf } from "./algorithms/index.js";
import type { StateReply } from "./algorithms/definition.js";

/** What the store sent with one call of the decide script: what its reply must answer. */
export interface DecideCall {
  /** `"c"` consume, `"p"` peek, `"r"` refund, `"x"` release. */
  readonly mode: "c" | "p" | "r" | "x";
  /** The cost sent (a consume's; 1 otherwise). */
  readonly cost: number;
  /** The time sent (µs), or `undefined` when the script reads Redis `TIME`. */
  readonly sentUs: number | undefined;
  /** A reservation's hold (µs): how much further than a consume's its state may reach. */
  readonly holdUs?: number;
}

/** A malformed reply of `script`: what is wrong with it, and a short rendering of it. */
function malformed(script: string, problem: string, reply: unknown): SluiceStoreError {
  return new SluiceStoreError(`[sluice] [redis] malformed reply from the ${script} script: ${problem}; got ${preview(reply)}`);
}

/**
 * The lengths of a namespace's two reply forms without the override's body (they differ by at
 * least 3n, more than the body's 1, which is how a reply's form is told), and the positions of the
 * policies whose marks end them (the buckets: see `LuaAlgorithm.marks`).
 */
export function replyLengths(policies: readonly Policy[]): { full: number; compact: number; marked: number[] } {
  const marked = policies.flatMap((p, i) => (luaOf(p).marks ? [i] : []));
  const widths = policies.reduce((sum, p) => sum + (luaOf(p).stateReply?.(p)?.width ?? 4), 0);
  return { full: 1 + 7 * policies.length + marked.length, compact: 1 + widths + marked.length, marked };
}

/** The reader of one namespace's replies (its policies' names, quotas, reply widths), built once per binding. */
export class ReplyReader {
  readonly #policies: readonly Policy[];
  /** The positions of the policies whose marks end the script's reply (the buckets: see `LuaAlgorithm.marks`). */
  readonly #marked: number[];
  /** Per policy, how the fast path sends its new state (`undefined`: it sends its answer's four numbers). */
  readonly #stateReplies: (StateReply | undefined)[];
  /** The lengths of the two forms (see {@link replyLengths}). */
  readonly #full: number;
  readonly #compact: number;

  constructor(policies: readonly Policy[]) {
    this.#policies = policies;
    this.#stateReplies = policies.map((p) => luaOf(p).stateReply?.(p));
    const { full, compact, marked } = replyLengths(policies);
    this.#full = full;
    this.#compact = compact;
    this.#marked = marked;
  }

  /** The decision a decide script's `reply` stands for; a `SluiceStoreError` when it is malformed. */
  decide(reply: unknown, call: DecideCall): StoreResult {
    const size = Array.isArray(reply) ? reply.length : -1;
    const compact = size === this.#compact || size === this.#compact + 1;
    const length = compact ? this.#compact : this.#full;
    if ((size !== length && size !== length + 1) || !numbersUpTo(reply as unknown[], length)) {
      throw malformed("decide", `expected ${this.#full} (or ${this.#compact}) integers and the override's body, if any`, reply);
    }
    const list = reply as number[];
    const body = size === length + 1 ? bodyOf(list[length], reply, "decide") : undefined;
    let result: StoreResult;
    if (compact) {
      if (call.mode !== "c") throw malformed("decide", "the fast path's form answers only a consume", reply);
      result = this.#fromCompact(list, body, call.sentUs, call.holdUs ?? 0);
    } else {
      result = this.#fromFull(list, body);
    }
    // the compact form's clock is checked already (its now then stands for the time expected: one
    // read of this process's clock per reply)
    const nowMs = compact ? result.now : call.sentUs === undefined ? undefined : Math.floor(call.sentUs / 1000);
    const problem = storeResultProblem(this.#policies, result, { nowMs, cost: call.mode === "c" ? call.cost : 1 });
    if (problem !== undefined) throw malformed("decide", problem, reply);
    return result;
  }

  /**
   * A reservation's `reply` (the reserve mode): the compact form with the units granted after the
   * marks (`{ now_us, states…, marks…, granted, override? }`), granted from 1 to the units asked;
   * or, when nothing was granted, a peek's full form. A `SluiceStoreError` when it is neither.
   */
  reserve(reply: unknown, call: { readonly units: number; readonly holdMs: number; readonly sentUs: number | undefined }): ReserveResult {
    const size = Array.isArray(reply) ? reply.length : -1;
    const granting = this.#compact + 1;
    if (size !== granting && size !== granting + 1) return { ...this.decide(reply, { mode: "p", cost: 1, sentUs: call.sentUs }), granted: 0 };
    const list = reply as unknown[];
    const granted = list[granting - 1];
    if (typeof granted !== "number" || !Number.isSafeInteger(granted) || granted < 1 || granted > call.units) {
      throw malformed("decide", `a reservation grants from 1 to the ${call.units} units asked`, reply);
    }
    // the compact form it extends (a consume of the units granted), with the override's body when there is one
    const compact = size === granting ? list.slice(0, this.#compact) : [...list.slice(0, this.#compact), list[granting]];
    return { ...this.decide(compact, { mode: "c", cost: granted, sentUs: call.sentUs, holdUs: call.holdMs * 1000 }), granted };
  }

  /** The full form: every policy's 7 numbers, the marks (all 0), the override. */
  #fromFull(reply: readonly number[], body: string | undefined): StoreResult {
    const policies = this.#policies;
    // under an override each limit is the policy's effective quota (an unlimited one keeps their own)
    const limits = body === undefined ? policies : effectivePolicies(policies, body);
    const results: PolicyResult[] = new Array(policies.length);
    for (let i = 0; i < policies.length; i++) {
      const b = 1 + i * 7;
      const allowed = reply[b] as number;
      if (allowed !== 0 && allowed !== 1) throw malformed("decide", `policies[${i}]'s allowed is ${allowed}, not 0 or 1`, reply);
      const retry = reply[b + 3] as number;
      const r: PolicyResult = {
        policy: (policies[i] as Policy).name,
        allowed: allowed === 1,
        limit: (limits[i] as Policy).limit,
        remaining: reply[b + 1] as number,
        resetAt: reply[b + 2] as number,
        retryAfterMs: retry === -1 ? Infinity : retry,
        delayMs: reply[b + 4] as number,
        refillAt: reply[b + 5] as number,
      };
      // 0: no block; anything else is a block's end, which core checks lies after now
      const blockedUntil = reply[b + 6] as number;
      if (blockedUntil !== 0) {
        r.blocked = true;
        r.blockedUntil = blockedUntil;
      }
      results[i] = r;
    }
    const result: StoreResult = { now: reply[0] as number, policies: results };
    if (body !== undefined) result.override = overrideFromText(body);
    const marks = this.#marksOf(reply, this.#full);
    if (marks !== undefined) {
      if (marks.some((m) => m !== 0)) throw malformed("decide", "a mark in a reply that charged nothing", reply);
      result.marks = marks;
    }
    return result;
  }

  /** The compact form: now in µs, each policy's new state or answer, the charge's marks, the override. */
  #fromCompact(reply: readonly number[], body: string | undefined, sentUs: number | undefined, holdUs: number): StoreResult {
    const nowUs = reply[0] as number;
    const now = Math.floor(nowUs / 1000);
    // the clock first, every answer below being computed from it: a time sent comes back to the µs
    const clock = sentUs === undefined ? storeClockProblem(now, undefined) : nowUs === sentUs ? undefined : `now is ${nowUs} µs, but the store sent ${sentUs}`;
    if (clock !== undefined) throw malformed("decide", clock, reply);
    const policies = this.#policies;
    // the policies in effect (an override's quotas): a state's answer is core's for them, and each limit theirs
    const effective = body === undefined ? policies : effectivePolicies(policies, body);
    const results: PolicyResult[] = new Array(policies.length);
    let b = 1;
    for (let i = 0; i < policies.length; i++) {
      const policy = effective[i] as Policy;
      const state = this.#stateReplies[i];
      const r = state === undefined ? answerOf(policy, reply, b) : stateAnswer(state, policy, reply, b, nowUs, holdUs);
      // an allowed consume charged at least one unit: never the whole quota left
      if (r === undefined || r.remaining >= policy.limit) throw malformed("decide", `policies[${i}]'s state is none an allowed consume leaves`, reply);
      results[i] = r;
      b += state === undefined ? 4 : state.width;
    }
    const result: StoreResult = { now, policies: results };
    if (body !== undefined) result.override = overrideFromText(body);
    const marks = this.#marksOf(reply, this.#compact);
    if (marks !== undefined) {
      // a charge's mark is its TAT after the charge (plus the refund shift): after now
      for (const j of this.#marked) if ((marks[j] as number) <= nowUs) throw malformed("decide", `the mark of policies[${j}] is not after now`, reply);
      result.marks = marks;
    }
    return result;
  }

  /** The marks at the end of a reply of `length` numbers, one per policy (0 for a policy without), or `undefined` when no policy has one. */
  #marksOf(reply: readonly number[], length: number): number[] | undefined {
    const marked = this.#marked;
    if (marked.length === 0) return undefined;
    const marks: number[] = new Array(this.#policies.length).fill(0);
    const at = length - marked.length;
    for (let j = 0; j < marked.length; j++) marks[marked[j] as number] = reply[at + j] as number;
    return marks;
  }

  /** The control script's reply: `[now_ms]`, or `[now_ms, body]` with the key's live override. */
  control(reply: unknown, sentUs: number | undefined): ControlResult {
    if (!Array.isArray(reply) || !Number.isSafeInteger(reply[0]) || !(reply.length === 1 || reply.length === 2)) {
      throw malformed("control", "expected now_ms and the override's body, if any", reply);
    }
    if (reply.length === 2) bodyOf(reply[1], reply, "control");
    const clock = storeClockProblem(reply[0], sentUs === undefined ? undefined : Math.floor(sentUs / 1000));
    if (clock !== undefined) throw malformed("control", clock, reply);
    return reply.length === 1 ? { now: reply[0] as number } : { now: reply[0] as number, override: reply[1] as string };
  }
}

/** A policy's answer sent as its 4 numbers (remaining, reset_at, delay, refill_at): allowed, no wait. */
function answerOf(policy: Policy, reply: readonly number[], at: number): PolicyResult {
  return {
    policy: policy.name,
    allowed: true,
    limit: policy.limit,
    remaining: reply[at] as number,
    resetAt: reply[at + 1] as number,
    retryAfterMs: 0,
    delayMs: reply[at + 2] as number,
    refillAt: reply[at + 3] as number,
  };
}

/** A policy's answer sent as its new state: core's answer from that state, or `undefined` when it is none an allowed consume leaves. */
function stateAnswer(state: StateReply, policy: Policy, reply: readonly number[], at: number, nowUs: number, holdUs: number): PolicyResult | undefined {
  const stored = state.stored(reply, at, nowUs, policy, holdUs);
  return stored === undefined ? undefined : allowedFromState(policy, stored, nowUs);
}

/** The override's body at the end of a reply: a string that parses (core's `overrideFromText`). */
function bodyOf(value: unknown, reply: unknown, script: string): string {
  if (typeof value !== "string" || overrideFromText(value) === undefined) throw malformed(script, `the override's body ${preview(value)} does not parse`, reply);
  return value;
}

/** Whether the first `length` entries of `reply` are safe integers. */
function numbersUpTo(reply: readonly unknown[], length: number): boolean {
  for (let i = 0; i < length; i++) if (!Number.isSafeInteger(reply[i])) return false;
  return true;
}

/** A short, safe rendering of a reply for an error message. */
export function preview(reply: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(reply, (_key, value: unknown) => (typeof value === "bigint" ? `${value}n` : value)) ?? String(reply);
  } catch {
    text = Object.prototype.toString.call(reply);
  }
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
