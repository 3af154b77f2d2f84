/**
 * The generic cell rate algorithm both buckets run on: per key the theoretical arrival time (TAT,
 * µs) and the refund shift (µs, see {@link refund}; 0 unless refunds happened). A request of `cost`
 * passes when `now >= TAT + cost × T − burst × T` (`T` the emission interval); with a queue, up to
 * `queue × T` later still passes with a delay.
 *
 * @module
 */
import { SluiceConfigError } from "../errors.js";
import type { PolicyResult } from "../results.js";
import { type AlgorithmDefinition, type PolicyCommon, type ReservationRule, ceilDiv, isCount, result } from "./definition.js";
import { type State, stateLayout } from "./state.js";

/** The largest span (µs) a GCRA bucket may cover, `(burst + queue) * emissionInterval`: 2^50 µs, about 35 years. */
export const MAX_GCRA_SPAN_US = 2 ** 50;

/**
 * The largest burst an override may give a bucket (2^40): with `T' >= 1` and the span of the
 * base policy at most 2^50 µs, every time the algorithm computes stays an exact integer.
 */
export const MAX_GCRA_QUOTA = 2 ** 40;

/**
 * The largest refund shift a bucket keeps (2^50 µs, about 35 years): a refund that would take it
 * further gives back only what fits (never more than it may), so that every mark stays an exact
 * integer. A store in another language mirrors it.
 *
 * @example
 * ```ts
 * import { MAX_GCRA_SHIFT_US } from "@sluice/core/store";
 * const valid = (shift: number) => Number.isSafeInteger(shift) && shift >= 0 && shift <= MAX_GCRA_SHIFT_US;
 * ```
 */
export const MAX_GCRA_SHIFT_US = 2 ** 50;

/** What a bucket policy holds for the GCRA. */
export interface GcraPolicy extends PolicyCommon {
  readonly kind: string;
  readonly burst: number;
  readonly queue: number;
  /** The emission interval in µs. */
  readonly emissionIntervalUs: number;
}

/** A bucket's state: its theoretical arrival time (`tat`, µs) and the refund shift (`shift`, µs). */
export type GcraState = State<"tat" | "shift">;

/**
 * The emission interval (µs) of `amount` units per `spanMs`; throws when the bucket would take
 * longer than 2^50 µs to drain, naming `option` (the bucket's size: `"capacity"`, `"burst"`).
 */
export function gcraTiming(amount: number, spanMs: number, burst: number, queue: number, option: string): number {
  const emissionIntervalUs = Math.max(1, ceilDiv(spanMs * 1000, amount));
  if ((burst + queue) * emissionIntervalUs > MAX_GCRA_SPAN_US) {
    throw new SluiceConfigError(
      `${option} must be small enough for the bucket to drain within 2^50 µs (about 35 years) at its rate; lower it or raise the rate; got ${burst + queue} units at ${emissionIntervalUs} µs each`,
      { option },
    );
  }
  return emissionIntervalUs;
}

/** `ceil(count * spanMs / amount / 1000)`: the seconds an empty bucket takes to refill `count`. */
export function ceilRatioSeconds(count: number, spanMs: number, amount: number): number {
  const numerator = count * spanMs;
  const denominator = amount * 1000;
  if (Number.isSafeInteger(numerator) && Number.isSafeInteger(denominator)) return ceilDiv(numerator, denominator);
  return Math.ceil(numerator / denominator);
}

/**
 * When the next unit drips back. `credit` (µs) is `now - tat + burst × T` for the state after the
 * request: a unit (a token, or a place in the queue) is added each time it reaches the next
 * multiple of `T`; at `burst × T` the bucket is full and nothing more comes (`now`). A bucket
 * deeper than its burst and queue (filled under a larger quota: an override that ended) gains its
 * first unit only when the credit is back to `T - queue × T`, not at the next multiple of `T`.
 */
function refillAt(nowUs: number, credit: number, full: number, T: number, queueT: number): number {
  const nowMs = Math.floor(nowUs / 1000);
  if (credit >= full) return nowMs;
  return nowMs + Math.ceil((Math.max((Math.floor(credit / T) + 1) * T, T - queueT) - credit) / 1000);
}

/**
 * Stores a charge: the new TAT, and the shift less the time the bucket has been full (`now −
 * stored`, when positive). The shift only ever says how much earlier the charges still queued
 * finish than their marks say; a full bucket queues none, and forgetting the shift at the pace the
 * time passes keeps every older mark's finish (mark − shift) at or before now.
 */
function charge(state: GcraState, stored: number, nowUs: number, newTat: number): void {
  state.tat = newTat;
  if (stored < nowUs) {
    const shift = state.shift - (nowUs - stored);
    state.shift = shift > 0 ? shift : 0;
  }
}

/** The TAT plus the shift: a charge's mark, read right after it, and the state's expiry. */
const tatPlusShift = (_p: GcraPolicy, state: GcraState): number => state.tat + state.shift;

function evaluate(policy: GcraPolicy, state: GcraState, nowUs: number, cost: number, write: boolean): PolicyResult {
  const T = policy.emissionIntervalUs;
  const burst = policy.burst;
  const queue = policy.queue;
  const stored = state.tat;
  const tat = stored > nowUs ? stored : nowUs;
  if (cost <= burst + queue) {
    const newTat = tat + cost * T;
    const diff = nowUs - (newTat - burst * T);
    if (diff >= 0) {
      if (write) charge(state, stored, nowUs, newTat);
      return result(policy, true, Math.floor(diff / T), Math.ceil(newTat / 1000), 0, 0, refillAt(nowUs, diff, burst * T, T, queue * T));
    }
    if (diff >= -queue * T) {
      if (write) charge(state, stored, nowUs, newTat);
      return result(policy, true, 0, Math.ceil(newTat / 1000), 0, Math.ceil(-diff / 1000), refillAt(nowUs, diff, burst * T, T, queue * T));
    }
    const credit = nowUs - tat + burst * T;
    const remaining = Math.max(0, Math.floor(credit / T));
    return result(policy, false, remaining, Math.ceil(tat / 1000), Math.ceil((-diff - queue * T) / 1000), 0, refillAt(nowUs, credit, burst * T, T, queue * T));
  }
  const credit = nowUs - tat + burst * T;
  const remaining = Math.max(0, Math.floor(credit / T));
  return result(policy, false, remaining, Math.ceil(tat / 1000), Infinity, 0, refillAt(nowUs, credit, burst * T, T, queue * T));
}

/**
 * A bucket gives back at most what the charge still weighs, from the time its units finish in the
 * queue, each unit at the price it was charged at (`priceUs`, its emission interval then; 0: the
 * policy's own): `markUs` is the TAT right after the charge plus the shift then (-1: the current TAT, i.e.
 * the latest charge; 0: unknown, nothing back), and the charge finishes at `markUs − shift now` at
 * the latest (see below). The refund moves the TAT back by `min(cost × T, finish − now, TAT −
 * now)`: the part of the charge still ahead, and the later charges queued behind it move up by as
 * much. A charge whose units are past (`finish <= now`: the refill has erased it) refunds nothing.
 *
 * The shift: a refund of a charge that is not the last in the queue (`finish < TAT`) moves every
 * later charge's finish earlier, so their marks would overstate it. It adds what it gave back to
 * the shift (a refund of the last charge moves no other charge and adds nothing). A mark carries
 * the shift at its charge, so `mark − shift now` is the finish less every refund since that moved
 * any charge, which is at most the true finish: a refund never gives back more than it may.
 * Refunds of the latest charges (newest first), of the oldest charge first, or of any one charge
 * are exact; in other orders a later refund may give back less (never more). The shift fades as
 * the bucket stays full (see `charge`), and the state lives until `TAT + shift`, so that a state
 * lost or forgotten never lets an older mark give back what is not its own.
 */
function refund(policy: GcraPolicy, state: GcraState, nowUs: number, cost: number, _chargedAtUs: number, markUs: number, priceUs: number): boolean {
  const tat = state.tat;
  if (markUs === 0 || tat <= nowUs) return false;
  const shift = state.shift;
  const finish = markUs < 0 ? tat : markUs - shift;
  const last = finish >= tat;
  // each unit at the emission interval it was charged at: an override set or cleared since changes
  // the bucket's rate, not what that charge took from it
  const unitUs = priceUs > 0 ? priceUs : policy.emissionIntervalUs;
  const back = Math.min(cost * unitUs, finish - nowUs, tat - nowUs, last ? Infinity : MAX_GCRA_SHIFT_US - shift);
  if (back <= 0) return false;
  state.tat = tat - back;
  if (!last) state.shift = shift + back;
  return true;
}

/**
 * Reserved units of a bucket are charged as if used at the last moment they may serve (the end of
 * the reservation's hold): the TAT moves to `max(tat, now + hold) + units × T` rather than
 * `max(tat, now) + units × T`. Checked now (the units fit now), counted then: whenever a held unit
 * is used, the store's TAT is at least as late as had it been charged at that moment, so the bucket
 * never refills beneath units held elsewhere, and held units keep their value for the whole hold
 * (where charging them now would have them lose one per T). The price is paid by the other
 * instances, and only while the bucket is fuller than the hold: during it they see at most
 * `hold / T` units fewer, which is why a hold is at most a quarter of the time the bucket takes to
 * fill.
 */
export const gcraReservation: ReservationRule<GcraPolicy, GcraState> = {
  reservable: (p) => p.queue === 0,
  servesUntilMs: () => Infinity,
  maxHoldMs: (p) => Math.floor((p.burst * p.emissionIntervalUs) / 4000),
  hold(p, state, nowUs, holdUs, units) {
    const tat = state.tat;
    // the TAT the charge started from: max(stored, now)
    const from = tat - units * p.emissionIntervalUs;
    const latest = nowUs + holdUs;
    if (latest > from) state.tat = tat + (latest - from);
  },
};

/** The parts of a bucket's definition that are the GCRA's: state, evaluation, refunds, marks. */
export const gcraParts = {
  state: stateLayout(["tat", "shift"]),
  leases: false,
  isGcraValid: (p: Record<string, unknown>): boolean =>
    isCount(p.emissionIntervalUs) &&
    isCount(p.burst) &&
    isCount(p.queue, 0) &&
    p.limit === p.burst &&
    (p.burst + p.queue) * p.emissionIntervalUs <= MAX_GCRA_SPAN_US,
  maxCost: (p: GcraPolicy): number => p.burst + p.queue,
  maxQuota: (): number => MAX_GCRA_QUOTA,
  /**
   * A bucket with `quota` units of burst: the queue scales alike (`floor(queue × quota / burst)`)
   * and so does the rate (`T' = max(1, ceil(T × burst / quota))`), so that it still fills in about
   * the same time. The same arithmetic in Lua.
   */
  withQuota: <P extends GcraPolicy>(p: P, quota: number): P =>
    Object.freeze({
      ...p,
      limit: quota,
      burst: quota,
      ...("capacity" in p ? { capacity: quota } : {}),
      queue: Math.floor((p.queue * quota) / p.burst),
      emissionIntervalUs: Math.max(1, Math.ceil((p.emissionIntervalUs * p.burst) / quota)),
    }),
  evaluate,
  refund,
  reservation: gcraReservation,
  /** The TAT right after the charge, plus the shift then. */
  mark: tatPlusShift,
  /** A unit of a charge weighs one emission interval of the policy in force when it was made. */
  unitPrice: (p: GcraPolicy): number => p.emissionIntervalUs,
  /** Refunded units move the mark back by their emission intervals. */
  refundedMark: (p: GcraPolicy, mark: number, units: number): number => (mark > 0 ? mark - units * p.emissionIntervalUs : mark),
  /** The TAT plus the shift: until then an older mark could still overstate a charge's finish. */
  expiresAtUs: tatPlusShift,
  /** Stored: `[tat]`, or `[tat, shift]` when the shift is not 0. */
  encode(_p: GcraPolicy, state: GcraState, _nowUs: number, out: number[]): boolean {
    out.push(state.tat);
    if (state.shift > 0) out.push(state.shift);
    return true;
  },
  decode(_p: GcraPolicy, value: readonly number[], state: GcraState): boolean {
    if (value.length !== 2 && value.length !== 3) return false;
    const shift = value.length === 3 ? (value[2] as number) : 0;
    if (!(shift >= 0 && shift <= MAX_GCRA_SHIFT_US)) return false;
    state.tat = value[1] as number;
    state.shift = shift;
    return true;
  },
} satisfies Partial<AlgorithmDefinition<GcraPolicy, GcraState>> & Record<string, unknown>;
