/**
 * The penalty box, which any rate policy may carry (`block`): its option, its durations, and how a
 * decision honours it — a running block denies (`reason: "blocked"`) until its end, a denial starts
 * one, repeated offences escalate. Its state sits after every policy's own, two numbers per policy
 * with a box: `[blocked until (µs), offences]`.
 *
 * @module
 */
import { type Duration, MAX_DURATION_MS, toMs } from "../duration.js";
import { SluiceConfigError, describe } from "../errors.js";
import type { PolicyResult } from "../results.js";
import { type BlockSpec, type PolicyCommon, isCount, positiveInt } from "./definition.js";
import { stateLayout } from "./state.js";

export type { BlockSpec };

/**
 * The `block` option of every policy: a duration (`"15m"`: every offence blocks for 15 minutes),
 * or `{ base, factor, max }` to escalate repeated offences (`{ base: "1m", factor: 2, max: "1h" }`:
 * 1, 2, 4, ... minutes, at most an hour). An offence within `max` of the end of the previous block
 * counts as a repeat; after that the key starts again at `base`.
 */
export type BlockOption = Duration | { base: Duration; factor?: number; max?: Duration };

/** Parses the `block` option: `{}` when absent, else `{ block }`. Errors name `block` or `block.<field>`. */
export function blockOf(option: unknown): { block?: BlockSpec } {
  if (option === undefined) return {};
  if (typeof option === "number" || typeof option === "string") {
    const baseMs = toMs(option, "block");
    return { block: Object.freeze({ baseMs, factor: 1, maxMs: baseMs }) };
  }
  if (typeof option !== "object" || option === null || Array.isArray(option)) {
    throw new SluiceConfigError(`block must be a duration like "15m" or { base, factor?, max? }; got ${describe(option)}`, { option: "block" });
  }
  const o = option as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== "base" && k !== "factor" && k !== "max") {
      throw new SluiceConfigError(`block.${k} is not an option: block takes base, factor and max`, { option: `block.${k}` });
    }
  }
  const baseMs = toMs(o.base, "block.base");
  const factor = o.factor === undefined ? 1 : positiveInt(o.factor, "block.factor");
  const maxMs = o.max === undefined ? (factor === 1 ? baseMs : MAX_DURATION_MS) : toMs(o.max, "block.max");
  if (maxMs < baseMs) {
    throw new SluiceConfigError(`block.max must be at least block.base (${baseMs} ms); got ${maxMs} ms`, { option: "block.max" });
  }
  return { block: Object.freeze({ baseMs, factor, maxMs }) };
}

/** Whether a hand-made policy's `block` is absent or a valid parsed penalty box. */
export function isBlockSpec(value: unknown): boolean {
  if (value === undefined) return true;
  const b = value as Record<string, unknown> | null;
  if (typeof b !== "object" || b === null || !isCount(b.baseMs) || !isCount(b.factor) || !isCount(b.maxMs)) return false;
  return b.maxMs >= b.baseMs && b.maxMs <= MAX_DURATION_MS;
}

/** How long the n-th offence (1-based) blocks, in ms: `baseMs × factor^(n-1)`, at most `maxMs`. */
export function blockDurationMs(block: BlockSpec, offences: number): number {
  let ms = block.baseMs;
  for (let i = 1; i < offences && ms < block.maxMs; i++) ms = Math.min(block.maxMs, ms * block.factor);
  return Math.min(ms, block.maxMs);
}

/** How many offences of a key are counted at most (the block stops growing long before). */
const MAX_OFFENCES = 64;

/** A policy's penalty box: when the running block ends (µs; 0: none yet) and the offences counted. */
const BOX = stateLayout(["until", "offences"]);
const NO_LISTS: unknown[] = [];

/** The penalty box at `bo` in the key's numbers at `base`. */
const boxAt = (num: Float64Array, base: number, bo: number) => BOX.at(num, base + bo, NO_LISTS, 0);

/** Where the penalty boxes of a key's policies sit (a part of the engine's `Layout`). */
export interface BlockLayout {
  readonly policies: readonly PolicyCommon[];
  /** Per policy, the offset of `[blocked until (µs), offences]` in the key's numbers, or -1 without `block`. */
  readonly blockOffsets: readonly number[];
}

/** Whether a penalty box of the key is running at `nowUs`. */
export function isBlocked(layout: BlockLayout, num: Float64Array, base: number, nowUs: number): boolean {
  const { blockOffsets } = layout;
  for (let i = 0; i < blockOffsets.length; i++) {
    const bo = blockOffsets[i] as number;
    if (bo >= 0 && boxAt(num, base, bo).until > nowUs) return true;
  }
  return false;
}

/**
 * Turns the results of a request made while a block runs into the block's answer: the blocked
 * policies deny (`reason: "blocked"`) until the later of the block's end and their own retry time
 * for the request; the others keep their own answer. A request made at `now + retryAfterMs` (the
 * largest of them) is therefore allowed when nothing else consumed meanwhile: an obedient client is
 * never denied twice for one wait, nor escalated.
 */
export function applyBlocks(layout: BlockLayout, results: PolicyResult[], num: Float64Array, base: number, nowUs: number): void {
  const { blockOffsets } = layout;
  for (let i = 0; i < blockOffsets.length; i++) {
    const bo = blockOffsets[i] as number;
    const until = bo >= 0 ? boxAt(num, base, bo).until : 0;
    if (until > nowUs) markBlocked(results[i] as PolicyResult, nowUs, Math.ceil((until - nowUs) / 1000));
  }
}

/**
 * Turns a result into a penalty-box denial: blocked for `ms` more milliseconds, and told to retry
 * at the later of the block's end and the policy's own retry time for the request (a denial's
 * `retryAfterMs`; 0 for a policy that would have allowed it), so that the retry passes.
 */
export function markBlocked(r: PolicyResult, nowUs: number, ms: number): void {
  const nowMs = Math.floor(nowUs / 1000);
  const own = r.allowed ? 0 : r.retryAfterMs;
  const wait = own > ms ? own : ms;
  r.allowed = false;
  r.remaining = 0;
  r.retryAfterMs = wait;
  r.delayMs = 0;
  r.refillAt = nowMs + (wait === Infinity ? ms : wait);
  if (r.resetAt < r.refillAt) r.resetAt = r.refillAt;
  r.blocked = true;
  r.blockedUntil = nowMs + ms;
}

/**
 * After a denial: each denying policy with a penalty box blocks the key (a cost that can never
 * pass is not an offence). Escalates when the previous block ended at most `maxMs` ago. Returns
 * whether a block started (the denial must then be written).
 */
export function startBlocks(layout: BlockLayout, results: PolicyResult[], num: Float64Array, base: number, nowUs: number): boolean {
  const { policies, blockOffsets } = layout;
  let started = false;
  for (let i = 0; i < policies.length; i++) {
    const bo = blockOffsets[i] as number;
    const r = results[i] as PolicyResult;
    const block = (policies[i] as PolicyCommon).block;
    if (bo < 0 || block === undefined || r.allowed || r.retryAfterMs === Infinity) continue;
    const box = boxAt(num, base, bo);
    const previousUntil = box.until;
    const offences = previousUntil > 0 && nowUs <= previousUntil + block.maxMs * 1000 ? Math.min(MAX_OFFENCES, box.offences + 1) : 1;
    const ms = blockDurationMs(block, offences);
    box.until = nowUs + ms * 1000;
    box.offences = offences;
    markBlocked(r, nowUs, ms);
    started = true;
  }
  return started;
}

/** When (µs) the running block of policy `i` ends (0: it has no penalty box, or never blocked). */
export function blockedUntilUs(layout: BlockLayout, i: number, num: Float64Array, base: number): number {
  const bo = layout.blockOffsets[i] as number;
  return bo >= 0 ? boxAt(num, base, bo).until : 0;
}

/**
 * When (µs) a policy's penalty box is forgotten (0: none kept): the first µs past `maxMs` after
 * the block ends. A denial at exactly `maxMs` after is still a repeat ({@link startBlocks}), and a
 * state is empty only from its expiry on, so the box must outlive that instant.
 */
export function blockExpiresAtUs(layout: BlockLayout, i: number, num: Float64Array, base: number): number {
  const bo = layout.blockOffsets[i] as number;
  const block = (layout.policies[i] as PolicyCommon).block;
  if (bo < 0 || block === undefined) return 0;
  const until = boxAt(num, base, bo).until;
  return until > 0 ? until + block.maxMs * 1000 + 1 : 0;
}
