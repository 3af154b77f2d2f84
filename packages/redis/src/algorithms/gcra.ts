/**
 * The generic cell rate algorithm both buckets run on, in Lua (core: `algorithms/gcra.ts`): per key
 * the theoretical arrival time `tat` (µs) and the refund shift (µs; 0 unless refunds happened).
 * With `T` the emission interval, a request of `c` units passes when `now - (tat + c*T - burst*T)
 * >= 0`, or, with a queue, `>= -queue*T` (served after a delay). Stored: `tat`, or `tat:shift`
 * when the shift is not 0.
 *
 * @module
 */
import type { LeakyBucketPolicy, TokenBucketPolicy } from "@sluice/core";
import { MAX_GCRA_SHIFT_US, policyField } from "@sluice/core/store";
import { type LuaAlgorithm, type LuaPart, type StateReply, int, str } from "./definition.js";

/** What the GCRA reads of a bucket policy. */
type GcraPolicy = TokenBucketPolicy | LeakyBucketPolicy;

/**
 * A bucket's names in its Lua: its per-key locals, which an override may change (see
 * {@link gcraQuota}): the emission interval `T`, burst*T, queue*T (only for a bucket with a queue:
 * one without keeps none whatever its quota) and the largest cost, burst + queue; and the
 * expressions its pieces share.
 */
interface Bucket {
  readonly policy: GcraPolicy;
  readonly p: string;
  /** Whether requests past the burst wait in a queue (served after a delay). */
  readonly queued: boolean;
  readonly T: string;
  readonly BT: string;
  readonly QT: string;
  readonly MAX: string;
  /** The whole units a credit (µs) holds. */
  units(credit: string): string;
  /** Statements: `out`, when (ms) the next unit drips back at `credit` (now if full). */
  refill(out: string, credit: string): string;
  /** The stored value: "tat", or "tat:shift" when the shift is not 0. */
  stored(tat: string, shift: string): string;
}

function bucketOf(policy: GcraPolicy, p: string): Bucket {
  const T = `${p}_t`;
  const BT = `${p}_bt`;
  const queued = policy.queue > 0;
  const QT = `${p}_qt`;
  // `credit` (µs) is now - tat + burst*T, a full bucket's being burst*T; a bucket deeper than
  // burst + queue (an override that ended) gains its first unit at a credit of T - queue*T
  const units = (credit: string) => `floor(${credit} / ${T})`;
  const first = queued ? `${T} - ${QT}` : T;
  return {
    policy,
    p,
    queued,
    T,
    BT,
    QT,
    MAX: `${p}_max`,
    units,
    refill: (out, credit) => `local ${out} = now_ms
if ${credit} < ${BT} then ${out} = now_ms + ceil((max((${units(credit)} + 1) * ${T}, ${first}) - ${credit}) / 1000) end`,
    stored: (tat, shift) => `${shift} > 0 and fmt('%.0f:%.0f', ${tat}, ${shift}) or fmt('%.0f', ${tat})`,
  };
}

/** The bucket's decision: a request of `c` units passes when the credit after it reaches 0 (with a queue, -queue*T). */
function gcraDecision(b: Bucket): Pick<LuaPart, "now" | "take" | "fits" | "allowed" | "values" | "denied"> {
  const { p, T, BT, QT, MAX, queued, units, refill } = b;
  return {
    now: `local tat = ${p}_tat
if tat == nil or tat < now_us then tat = now_us end`,
    take: (c) => `${p}_new_tat = tat + ${c} * ${T}`,
    fits: (c) => `${c} <= ${MAX} and now_us - (${p}_new_tat - ${BT}) >= ${queued ? `-${QT}` : "0"}`,
    // the credit after the request; with a queue, a request past the burst waits its turn
    allowed: `local ${p}_diff = now_us - (${p}_new_tat - ${BT})
${refill(`${p}_refill_at`, `${p}_diff`)}${
      !queued
        ? ""
        : `
-- within the queue: no unit left, served after a delay
local ${p}_remaining, ${p}_delay = 0, 0
if ${p}_diff >= 0 then ${p}_remaining = ${units(`${p}_diff`)} else ${p}_delay = ceil(-${p}_diff / 1000) end`
    }`,
    values: () =>
      !queued
        ? `1, ${units(`${p}_diff`)}, ceil(${p}_new_tat / 1000), 0, 0, ${p}_refill_at`
        : `1, ${p}_remaining, ceil(${p}_new_tat / 1000), 0, ${p}_delay, ${p}_refill_at`,
    denied: (c) => `-- denied: the credit now (µs) says what is left; the same cost passes once the credit after it
-- (now - (new_tat - burst*T)) reaches ${queued ? "-queue*T" : "0"}
local credit = now_us - tat + ${BT}
${refill("refill_at", "credit")}
if ${c} > ${MAX} then return 0, max(0, ${units("credit")}), ceil(tat / 1000), -1, 0, refill_at end
return 0, max(0, ${units("credit")}), ceil(tat / 1000), ceil((${p}_new_tat - ${BT} - now_us${queued ? ` - ${QT}` : ""}) / 1000), 0, refill_at`,
  };
}

/**
 * The refund: never more than the charge still weighs: the time until it finishes (its mark less
 * the shift now; without a charge named, the latest: the TAT now) less now, and never below now
 * (full); a refund of a charge other than the last grows the shift (core's `refund`).
 */
function gcraRefund(b: Bucket, i: number): string {
  const { p, T } = b;
  return `if ${p}_tat ~= nil and ${p}_tat > now_us then
  local finish = ${p}_tat
  if charged_ms >= 0 then finish = (tonumber(ARGV[${4 + i}]) or 0) - ${p}_shift end
  local last = finish >= ${p}_tat
  -- each unit at the emission interval it was charged at (an override set or cleared since changes T, not the charge)
  local unit = refund_price(${i})
  if unit <= 0 then unit = ${T} end
  local back = math.min(refund_cost * unit, finish - now_us, ${p}_tat - now_us)
  if not last then back = math.min(back, ${int(MAX_GCRA_SHIFT_US)} - ${p}_shift) end
  if back > 0 then
    ${p}_tat = ${p}_tat - back
    if not last then ${p}_shift = ${p}_shift + back end
    changed(${str(policyField(b.policy))}, ${b.stored(`${p}_tat`, `${p}_shift`)})
  end
end`;
}

/** The per-key locals with the policy's own values, and with quota `q` (core's `withQuota`). */
function gcraQuota(b: Bucket): Pick<LuaPart, "quota" | "requota"> {
  const { policy, T, BT, QT, MAX, queued } = b;
  return {
    quota: queued
      ? `local ${T}, ${BT}, ${QT}, ${MAX} = ${int(policy.emissionIntervalUs)}, ${int(policy.burst * policy.emissionIntervalUs)}, ${int(policy.queue * policy.emissionIntervalUs)}, ${int(policy.burst + policy.queue)}`
      : `local ${T}, ${BT}, ${MAX} = ${int(policy.emissionIntervalUs)}, ${int(policy.burst * policy.emissionIntervalUs)}, ${int(policy.burst)}`,
    // core's withQuota: burst q, queue floor(queue * q / burst), T' = max(1, ceil(T * burst / q))
    requota: (q) =>
      queued
        ? `local queue = floor(${int(policy.queue)} * ${q} / ${int(policy.burst)})
${T} = max(1, ceil(${int(policy.emissionIntervalUs)} * ${int(policy.burst)} / ${q}))
${BT}, ${QT}, ${MAX} = ${q} * ${T}, queue * ${T}, ${q} + queue`
        : `${T} = max(1, ceil(${int(policy.emissionIntervalUs)} * ${int(policy.burst)} / ${q}))
${BT}, ${MAX} = ${q} * ${T}, ${q}`,
  };
}

/** The Lua of one bucket policy at position `i`; `sizes` describes it in the script's comment. */
function gcraPart(policy: GcraPolicy, p: string, i: number, sizes: string): LuaPart {
  const stored = `stored[${i}]`;
  const b = bucketOf(policy, p);
  return {
    describe: `-- ${p}: ${policy.kind} ${str(policy.name)}, ${sizes}, one unit per ${int(policy.emissionIntervalUs)} µs; stored: the theoretical arrival time "tat" (µs), or "tat:shift" after refunds`,
    read: `local ${p}_tat, ${p}_shift = tonumber(${stored}), 0
if not ${p}_tat and ${stored} then
  local tat, shift = match(${stored}, '^(%d+):(%d+)$')
  if tat then ${p}_tat, ${p}_shift = tat + 0, shift + 0 end
end
local ${p}_new_tat, ${p}_new_shift`,
    functions: "",
    ...gcraDecision(b),
    // a charge: the shift fades by the time the bucket has been full (core's `charge`)
    prepare: `${p}_new_shift = ${p}_shift
if ${p}_shift > 0 and ${p}_tat < now_us then ${p}_new_shift = max(0, ${p}_shift - (now_us - ${p}_tat)) end`,
    refund: gcraRefund(b, i),
    release: "",
    // core's gcraReservation.hold: the charge counts from max(tat, now + hold), not max(tat, now)
    hold: (units, hold) => `${p}_new_tat = ${p}_new_tat + max(0, now_us + ${hold} - (${p}_new_tat - ${units} * ${b.T}))`,
    value: b.stored(`${p}_new_tat`, `${p}_new_shift`),
    mark: `${p}_new_tat + ${p}_new_shift`,
    expiresUs: `${p}_new_tat + ${p}_new_shift`,
    ...gcraQuota(b),
  };
}

/** The GCRA's Lua, shared by {@link tokenBucketLua} and {@link leakyBucketLua}; `sizes` describes the bucket in the script's comment. */
export function gcraLua<P extends GcraPolicy>(sizes: (policy: P) => string): LuaAlgorithm<P> {
  // a bucket without a queue: the fast path sends the new TAT (core's stored form: [expires, tat];
  // the shift, which the answer does not read, goes in the mark); with a queue, the answer (its delay)
  const stateReply: StateReply = {
    width: 1,
    lua: (p) => [`${p}_new_tat`],
    stored: (reply, at, nowUs, effective, holdUs = 0) => {
      // an allowed charge puts the TAT after now, by at most the burst's span (burst × T), and a
      // reservation's by its hold more
      const tat = reply[at] as number;
      const { burst, emissionIntervalUs } = effective as GcraPolicy;
      return tat > nowUs && tat <= nowUs + holdUs + burst * emissionIntervalUs ? [0, tat] : undefined;
    },
  };
  return {
    marks: true,
    leases: false,
    stateReply: (policy) => (policy.queue > 0 ? undefined : stateReply),
    // a queue's delays are per request: only a bucket without one reserves
    reservable: (policy) => policy.queue === 0,
    maxCost: (policy) => policy.burst + policy.queue,
    part: (policy, p, i) => gcraPart(policy, p, i, sizes(policy)),
  };
}
