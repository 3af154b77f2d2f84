/**
 * What every algorithm gives the script generator (`scripts.ts`): the Lua of one policy, in pieces
 * ({@link LuaPart}), and the small helpers the algorithm modules share.
 *
 * Each algorithm states its decision once, as pieces of Lua: the state now ({@link LuaPart.now}),
 * whether `c` units fit ({@link LuaPart.fits}), the state after them ({@link LuaPart.take}), the
 * answer of an allowed request ({@link LuaPart.allowed}, {@link LuaPart.values}) and of a denied
 * one ({@link LuaPart.denied}). The generator assembles both uses of them from the same text:
 *
 * - the general code's `local function <p>_decide(c)` (a denial, a peek, a refund, a release, a
 *   running penalty box):
 *   ```lua
 *   local function fw1_decide(c)
 *     <now>
 *     <take(c)>
 *     if <fits(c)> then
 *       <allowed>
 *       return <values(c)>
 *     end
 *     <denied(c)>
 *   end
 *   ```
 * - the consume fast path (every policy allowing), straight-line code with no closure: per policy
 *   `if pass then <now> <take(cost)> pass = <fits(cost)> end`, then, once every policy passed,
 *   each policy's `<allowed>` and a reply of its `<values(cost)>`.
 *
 * `take` only assigns the state to write (`<p>_new_*`), which the fast path's write alone reads:
 * running it before `fits` (or for a request that is then denied) writes nothing. So `allowed` and
 * `values` read what an allowed request leaves (`<p>_new_*`), never the locals of `now` (gone by
 * the time the fast path answers). `denied` may read them.
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import type { Policy } from "@sluice/core/store";

/** The Lua of one policy in a generated script; `p` is its local-name prefix (`fw1`), see {@link LuaAlgorithm.part}. */
export interface LuaPart {
  /** A comment line describing the policy and its stored value. */
  readonly describe: string;
  /** Reads the state from the HMGET reply (`stored[i]`) into `<p>_*` locals, and declares the state to write (`<p>_new_*`). */
  readonly read: string;
  /**
   * `local function`s the decide function calls (written once, above it, in the general code;
   * where the fast path needs the same computation it inlines the same text). Empty if none.
   */
  readonly functions: string;
  /** Statements: the state now, in plain locals (`window`, `count`, `tat`, ...), from the read locals. */
  readonly now: string;
  /** Statements: the state after admitting `c` units (`c` a Lua expression), assigned to `<p>_new_*`. Empty if none. */
  take(c: string): string;
  /** An expression: whether `c` units pass now (after {@link LuaPart.now} and {@link LuaPart.take}); false for `math.huge`. */
  fits(c: string): string;
  /** Statements run once `c` units were admitted: the locals {@link LuaPart.values} reads (from `<p>_new_*`). Empty if none. */
  readonly allowed: string;
  /** The six numbers of an allowed request: 1, remaining, reset_at, 0, delay, refill_at. */
  values(c: string): string;
  /**
   * Statements answering a request of `c` units that does not fit (`c` may be `math.huge`, which
   * asks for the state now): each path ends in `return 0, remaining, reset_at, retry_after (-1:
   * never), 0, refill_at`.
   */
  denied(c: string): string;
  /** Statements run before the HSET of an allowed consume, building what {@link LuaPart.value} writes. Empty if none. */
  readonly prepare: string;
  /**
   * Refund mode: gives `refund_cost` units back for a charge at `charged_ms` (-1: the latest),
   * updating the read locals (so the peek that follows sees it) and queueing the field's new value
   * with `changed(field, value)` (or `emptied(field)`) when it changed. Empty if the algorithm
   * refunds nothing.
   */
  readonly refund: string;
  /**
   * Release mode (an algorithm with {@link LuaAlgorithm.leases}, else empty): frees lease `lease`
   * (and every expired one), updating the read locals (so the peek that follows sees it) and
   * writing the field.
   */
  readonly release: string;
  /**
   * Reserve mode, for an algorithm whose held units would lose value with time (a bucket):
   * statements run right after `take(units)` of a reservation, counting its units as used `hold`
   * (a Lua expression, µs) from now, the last moment they may serve (core's `ReservationRule.hold`).
   * Absent when where a unit sits in time does not matter (a window).
   */
  hold?(units: string, hold: string): string;
  /** The HSET value expression after an allowed consume. */
  readonly value: string;
  /**
   * The mark of an allowed charge (a bucket's TAT right after it plus its refund shift, µs: what a refund of that charge
   * needs), appended to the reply after every policy's 7 numbers; present exactly when the
   * algorithm {@link LuaAlgorithm.marks}.
   */
  readonly mark?: string;
  /** When (µs) the written state is empty again. */
  readonly expiresUs: string;
  /**
   * Statements declaring the policy's quota-derived locals (`<p>_limit`; a bucket's `<p>_t`,
   * `<p>_bt`, ...) with the policy's own values. Every other piece reads them instead of constants,
   * so that an override can change them per key (see {@link LuaPart.requota}).
   */
  readonly quota: string;
  /**
   * Statements giving those locals the values of the policy with quota `q` (a Lua expression: an
   * integer in [1, maxQuota] other than the policy's own), with the same IEEE operations in the
   * same order as core's `withQuota`.
   */
  requota(q: string): string;
}

/**
 * The Lua side of one algorithm. The registry (`algorithms/index.ts`) maps every policy kind to
 * one, so the compiler refuses a kind without its Lua.
 */
export interface LuaAlgorithm<P extends Policy> {
  /**
   * Whether an allowed consume's reply carries a mark for this policy after every policy's
   * numbers (core's definition of the kind has `mark`): the buckets' TAT after the charge.
   */
  readonly marks: boolean;
  /** Whether an allowed request holds a lease (a concurrency cap): the script then has a release mode (`'x'`) and reads a lease id. */
  readonly leases: boolean;
  /** The largest cost the policy can ever admit (beyond it: `cost-exceeds-limit`, retry -1), as core's definition says. */
  maxCost(policy: P): number;
  /** The Lua of `policy` at position `i` (1-based: `stored[i]`, `ARGV[4 + i]`), its locals prefixed with `p` (`fw1`). */
  part(policy: P, p: string, i: number): LuaPart;
  /**
   * Whether `policy` may hand out units ahead of their use (core's `ReservationRule.reservable`):
   * the script's reserve mode then charges them; absent or false, it grants none. A policy that
   * reserves has a {@link StateReply} too: a reservation answers with the state it left.
   */
  reservable?(policy: P): boolean;
  /**
   * How the consume fast path answers for `policy` with its new state instead of its answer
   * (see {@link StateReply}); absent, or `undefined` for this policy: with the four numbers of its
   * answer (remaining, reset_at, delay, refill_at).
   */
  stateReply?(policy: P): StateReply | undefined;
}

/**
 * The fast path's reply of one policy as the state an allowed consume leaves, from which the store
 * computes the answer with core's `allowedFromState`: the same TypeScript every other store runs,
 * and fewer numbers for Redis to compute and convert (each number of a reply is a conversion in
 * the script, and the answer's arithmetic costs more: a sliding window's `refill_at`). Only for an algorithm
 * whose answer core gives exactly from that state (a queue's `delay` it does not: the leaky bucket
 * keeps its four numbers).
 */
export interface StateReply {
  /** How many numbers {@link StateReply.lua} sends. */
  readonly width: number;
  /** The Lua expressions sent (from `<p>_new_*`, after `take`; `allowed` is not run), given the policy's local prefix `p`. */
  lua(p: string): readonly string[];
  /**
   * The policy's state in core's stored form (`[expiresUs, ...numbers]`, the expiry unread: 0)
   * from the numbers at `reply[at]` and on (checked to be safe integers) and the script's now (µs),
   * or `undefined` when they are no state an allowed consume can leave under `policy` (the policy
   * in effect for the key: its own, or an override's): nothing charged, or more than its quota.
   * `holdUs`: the hold of a reservation (its reserve mode), whose state may reach that much further.
   */
  stored(reply: readonly unknown[], at: number, nowUs: number, policy: Policy, holdUs?: number): number[] | undefined;
}

/** A Lua string literal (policy names are visible ASCII; JSON's escapes are valid Lua). */
export const str = (s: string): string => JSON.stringify(s);

/** An integer constant, written out in full (String() never uses exponents below 1e21). */
export const int = (n: number): string => {
  // the factories allow only safe integers: this guards a policy made by hand
  if (!Number.isSafeInteger(n)) throw new SluiceConfigError(`[sluice] [redis] policies must hold safe integers only; got ${n} in a script`, { option: "policies" });
  return String(n);
};

/**
 * Lua: the integers `values` (each at least 0 and below 2^53), joined by ':', in decimal exactly as
 * `fmt('%.0f:%.0f', …)` writes them, for values that are mostly small (a window's index, a count).
 * Where each is below 2^31 it formats with `%d`, which costs half as much: glibc formats `%f`
 * through multi-precision arithmetic (two numbers, on a pinned redis-server: 0.22 µs against
 * 0.41). Otherwise `%.0f`, because Lua 5.1's `%d` goes through a C `long`, 32 bits on 64-bit
 * Windows, where Redis-compatible servers run too. A timestamp in µs is always above 2^31: write
 * it with `%.0f`.
 *
 * @example
 * ```ts
 * digits("fw1_new_window", "fw1_new_count");
 * // (fw1_new_window < 2147483648 and fw1_new_count < 2147483648 and fmt('%d:%d', fw1_new_window, fw1_new_count) or fmt('%.0f:%.0f', fw1_new_window, fw1_new_count))
 * ```
 */
export function digits(...values: string[]): string {
  const list = values.join(", ");
  const small = values.map((v) => `${v} < 2147483648`).join(" and ");
  return `(${small} and fmt('${values.map(() => "%d").join(":")}', ${list}) or fmt('${values.map(() => "%.0f").join(":")}', ${list}))`;
}

/** Lua text with every line indented by `by`. */
export const indent = (text: string, by: string): string => text.replace(/^/gm, by);

/** What the three window kinds' Lua share: no marks, no leases, and `limit` as the largest cost. */
export const windowLua = {
  marks: false,
  leases: false,
  maxCost: (policy: { readonly limit: number }): number => policy.limit,
} as const;

/** The quota-derived local of a policy whose only such value is its limit (`<p>_limit`): {@link LuaPart.quota} and {@link LuaPart.requota}. */
export function limitLocal(policy: { readonly limit: number }, p: string): Pick<LuaPart, "quota" | "requota"> {
  return {
    quota: `local ${p}_limit = ${int(policy.limit)}`,
    requota: (q) => `${p}_limit = ${q}`,
  };
}
