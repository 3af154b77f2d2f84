/**
 * What the three window algorithms share: their options and their factory's parsing.
 *
 * @module
 */
import { type Duration, formatMs, toMs } from "../duration.js";
import { type AlgorithmDefinition, MAX_QUOTA, type PolicyCommon, type ReservationRule, ceilDiv, isDurationMs, quotaInt, requireObject, validateName } from "./definition.js";
import { type BlockOption, blockOf } from "./penalty-box.js";

/** Options of the three window algorithms. */
export interface WindowOptions {
  /** Requests (cost units) allowed per window: a positive integer of at most 2^52 (`MAX_QUOTA`). */
  limit: number;
  /** The window: milliseconds or a string like `"1m"`; at most 2^31-1 ms. */
  window: Duration;
  /** Name for headers and keys. Default `"<limit>-per-<window>"`, e.g. `"100-per-1m"`. */
  name?: string;
  /** Penalty box: when this policy denies, block the key for this long (see {@link BlockOption}). */
  block?: BlockOption;
}

/** A policy of a window algorithm: `limit` units per `windowMs`. */
export interface WindowPolicy<K extends string> extends PolicyCommon {
  readonly kind: K;
  readonly windowMs: number;
}

/** Parses the options of a window algorithm named `kind`. */
export function windowPolicy<K extends string>(kind: K, options: unknown): WindowPolicy<K> {
  requireObject(options, kind);
  const limit = quotaInt(options.limit, "limit");
  const windowMs = toMs(options.window, "window");
  const name = options.name === undefined ? `${limit}-per-${formatMs(windowMs)}` : validateName(options.name, "name");
  return Object.freeze({ kind, name, limit, windowMs, windowSeconds: ceilDiv(windowMs, 1000), ...blockOf(options.block) });
}

/**
 * The parts of a window algorithm's definition that come from its options alone: the factory, the
 * plain-data options, validation of a hand-made policy (beyond `isValid` of its own) and the
 * largest cost (`limit`).
 */
export function windowParts<P extends WindowPolicy<string>>(
  factory: (options: WindowOptions) => P,
  isValid: (policy: Record<string, unknown>) => boolean = () => true,
  maxQuota: (policy: P) => number = () => MAX_QUOTA,
): Pick<AlgorithmDefinition<P>, "leases" | "create" | "options" | "isValid" | "maxCost" | "maxQuota" | "withQuota"> {
  return {
    leases: false,
    create: (options) => factory(options as unknown as WindowOptions),
    options: (p) => ({ limit: p.limit, window: p.windowMs }),
    isValid: (p) => isDurationMs(p.windowMs) && isValid(p),
    maxCost: (p) => p.limit,
    maxQuota,
    // a window keeps its length: only the limit changes
    withQuota: (p, quota) => Object.freeze({ ...p, limit: quota }),
  };
}

/**
 * Reserved units of a fixed or sliding window serve only inside the window they were charged in:
 * there they are counted exactly as a request made at any moment of it (a sliding window weighs a
 * window's count the same wherever in it the requests came), so no window, and no weighted span,
 * holds more than it allows. A window's units do not lose value with time, so its hold is the
 * limiter's own bound on staleness.
 */
export const windowReservation: ReservationRule<WindowPolicy<string>> = {
  reservable: () => true,
  servesUntilMs: (p, nowMs) => (Math.floor(nowMs / p.windowMs) + 1) * p.windowMs,
  maxHoldMs: () => Infinity,
  // a sliding window weighs its previous window's count: unused units count until the next one ends
  countedUntilMs: (p, chargedAtMs) => (Math.floor(chargedAtMs / p.windowMs) + 2) * p.windowMs,
};

/** A fixed window's units count only in their window: once it ended, unused ones need not go back. */
export const fixedWindowReservation: ReservationRule<WindowPolicy<string>> = {
  ...windowReservation,
  countedUntilMs: (p, chargedAtMs) => (Math.floor(chargedAtMs / p.windowMs) + 1) * p.windowMs,
};
