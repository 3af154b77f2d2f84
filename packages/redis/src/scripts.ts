/**
 * The Lua scripts. One `decide` script is generated per policy configuration when a store binds a
 * namespace: the policies' constants (limits, windows, emission intervals, field names) are
 * written into straight-line code, so each call sends only the cost, the mode and the test clock,
 * and Redis runs no generic dispatch. Each script comes with the SHA-1 `EVALSHA` names it by
 * (computed here in pure JavaScript; a test checks it against `node:crypto` for every generated
 * script). After a `SCRIPT FLUSH` the store sends the script once with `EVAL`.
 *
 * Every generated script mirrors `packages/core/src/engine.ts`; the conformance suite, the
 * property tests (many random configurations, so many generated scripts) and the recorded vectors
 * keep them identical. No script flags (`#!lua flags=...`), so they run on stock Redis 6.2+ and on
 * Upstash alike. Every number is an integer below 2^53, written with `%.0f` (Lua's `tostring`
 * would round to 14 digits); results are integers only (Redis truncates Lua numbers), with -1
 * standing for "never" (`retryAfterMs: Infinity`). Digits a pattern captured (`%d+`) and `TIME`'s
 * two fields become numbers by arithmetic (`window + 0`): the same conversion as `tonumber`, which
 * in Lua 5.1 converts twice (it checks, then converts). A value that may not be digits (a whole
 * field, an argument) still goes through `tonumber`, which answers nil where `+ 0` would raise.
 *
 * Layout in Redis: ONE hash per identifier, `KEYS[1]` = `{<storageKey>}` (see core's `storageKey`),
 * one field per policy (core's `policyField`, `<name>|<kind>`) holding `tat` (buckets),
 * `window:count` (fixed window), `window:previous:current` (sliding window) or the whole log
 * `time:cost,time:cost,...` (sliding log, µs, oldest first: its sum is recomputed from the entries,
 * so the two can never disagree) or the live leases `expires:id,expires:id,...` (concurrency cap,
 * µs; expired leases are dropped whenever the field is written, and never count), plus `@expires`
 * (when the hash's TTL runs out). Losing the key,
 * any field or `@expires` (eviction, `DEL`, `HDEL`) therefore only forgets state. A field that
 * does not parse reads as empty.
 *
 * Local names in the generated Lua: each policy is `<kind code><position>` (`tb1`, `sw2`,
 * `fw3`...), and its locals say what they hold (`fw3_window`, `fw3_count`, `tb1_tat`).
 *
 * Shape of a script, and why: a script runs inside Redis's single thread, so its cost is paid by
 * every other client too. Most calls are a consume that every policy allows, so that case gets a
 * fast path right after the reads: one `if pass then ... end` block per policy (flat, not nested,
 * so each block's locals die with it: Lua allows 200 locals per function and a script may hold 12
 * policies) deciding `decide(cost)`'s verdict inline, then one block that writes the state and
 * returns the reply as a single table constructor. It creates no closure and no table but the
 * reply; a `local function` costs an allocation per call, made or not, which is why the general
 * code's closures (`<p>_decide`, `answer`, ...) are only defined below the fast path. Everything
 * else (a denial, a peek, a refund, a release, a running penalty box) falls through to that
 * general code, which decides from scratch with the `decide` functions: those and the fast path
 * must agree (the conformance suite runs both; `<p>_decide` stays the readable statement of each
 * algorithm). Only integers below 2^53 are computed, so the fast path's regrouped sums (`L -
 * (count + c)` for `L - count - c`) are exact and give the same numbers.
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { CONCURRENCY_RETRY_MS, MAX_POLICIES, type Policy, blockField as blockFieldOf, policyField } from "@sluice/core/store";
import { sha1 } from "./sha1.js";

/** A Lua script and the SHA-1 that `EVALSHA` names it by. */
export interface Script {
  readonly script: string;
  readonly sha: string;
}

/** The hash field holding when (µs, script clock) the hash's TTL runs out; never a policy's field (those contain "|"). */
export const EXPIRES_FIELD = "@expires";
/** How far past the state's expiry the TTL is set, so a hot key needs a PEXPIRE about once a second, not per request. */
const TTL_SLACK_US = 1_000_000;

const KIND_CODE: Readonly<Record<Policy["kind"], string>> = {
  fixedWindow: "fw",
  slidingWindow: "sw",
  slidingLog: "sl",
  tokenBucket: "tb",
  leakyBucket: "lb",
  concurrency: "cc",
};

/** A Lua string literal (policy names are visible ASCII; JSON's escapes are valid Lua). */
const str = (s: string) => JSON.stringify(s);
/** An integer constant, written out in full (String() never uses exponents below 1e21). */
const int = (n: number) => {
  if (!Number.isSafeInteger(n)) throw new SluiceConfigError(`[sluice] [redis] not a safe integer in a script: ${n}`);
  return String(n);
};

/** The Lua code of one policy, `p` being its local-name prefix (`fw1`). */
interface Part {
  /** A comment line describing the policy and its stored value. */
  describe: string;
  /** Reads the state from the HMGET reply (`stored[i]`) into locals, and declares the state to write. */
  read: string;
  /** `local function <p>_decide(c)`: returns allowed, remaining, resetAt, retryAfterMs, delayMs, refillAt. */
  decide: string;
  /**
   * The consume fast path's test, run only while every earlier policy passed: `decide(cost)`'s
   * verdict, inlined. Sets `pass` and the state to write (`<p>_new_*`, as `decide` does; when
   * `pass` ends false nothing written here is used, the slow path decides again from scratch).
   */
  pass: string;
  /**
   * The fast path once every policy passed: statements computing what the reply needs, then
   * `values`, the 7 reply numbers `decide(cost)` would have returned (allowed, so 1, ..., 0 blocked).
   */
  allowed: string;
  values: string;
  /** Statements run before the HSET of an allowed request (empty if none). */
  prepare: string;
  /**
   * Refund mode: gives `refund_cost` units back for a charge at `charged_ms` (-1: the latest),
   * updating the read locals (so the peek that follows sees it) and queueing the field's new value
   * with `changed(field, value)` (or `emptied(field)`) when it changed.
   */
  refund: string;
  /**
   * Release mode (concurrency caps only, else empty): frees lease `lease` (and every expired one),
   * updating the read locals (so the peek that follows sees it) and writing the field.
   */
  release: string;
  /** The HSET value expression after an allowed request. */
  value: string;
  /**
   * A bucket's mark of an allowed charge (its TAT right after it, µs: what a refund of that charge
   * needs), appended to the reply after every policy's 7 numbers; `undefined` for the others.
   */
  mark?: string;
  /** When (µs) the written state is empty again. */
  expiresUs: string;
}

/**
 * A sliding log's scan of its entries (Lua, each line indented by `indent`): `first`, the first entry
 * still in the window, and `used`, the units of the entries from there on. Shared by the decide
 * function and the allowed fast path.
 */
function logWindow(p: string, Wus: number, indent: string): string {
  return [
    `local times, costs = ${p}_times, ${p}_costs`,
    "local n = #times",
    `local cutoff = now_us - ${int(Wus)}`,
    `local used = ${p}_total`,
    "local first = 1",
    "while first <= n and times[first] <= cutoff do",
    "  used = used - costs[first]",
    "  first = first + 1",
    "end",
  ]
    .map((line) => indent + line)
    .join("\n");
}

function part(policy: Policy, i: number): Part {
  const p = `${KIND_CODE[policy.kind]}${i}`;
  const stored = `stored[${i}]`;
  const about = `-- ${p}: ${policy.kind} ${str(policy.name)}`;
  switch (policy.kind) {
    case "tokenBucket":
    case "leakyBucket": {
      const T = policy.emissionIntervalUs;
      const BT = policy.burst * T;
      const QT = policy.queue * T;
      // with no queue, a request either passes outright or is denied: the shaping branch is left out
      const shaping =
        QT === 0
          ? ""
          : `
    if diff >= -${int(QT)} then
      ${p}_new_tat = new_tat
      return 1, 0, ceil(new_tat / 1000), 0, ceil(-diff / 1000), next_unit_at(diff, ${int(BT)}, ${int(T)})
    end`;
      const retryUs = QT === 0 ? "-diff" : `-diff - ${int(QT)}`;
      const sizes = policy.kind === "tokenBucket" ? `capacity ${int(policy.burst)}` : `burst ${int(policy.burst)}, queue ${int(policy.queue)}`;
      return {
        describe: `${about}, ${sizes}, one unit per ${int(T)} µs; stored: the theoretical arrival time "tat" (µs)`,
        read: `local ${p}_tat = tonumber(${stored})
local ${p}_new_tat`,
        decide: `local function ${p}_decide(c)
  local tat = ${p}_tat
  if tat == nil or tat < now_us then tat = now_us end
  if c <= ${int(policy.burst + policy.queue)} then
    local new_tat = tat + c * ${int(T)}
    local diff = now_us - (new_tat - ${int(BT)})
    if diff >= 0 then
      ${p}_new_tat = new_tat
      return 1, floor(diff / ${int(T)}), ceil(new_tat / 1000), 0, 0, next_unit_at(diff, ${int(BT)}, ${int(T)})
    end${shaping}
    local credit = now_us - tat + ${int(BT)}
    return 0, max(0, floor(credit / ${int(T)})), ceil(tat / 1000), ceil((${retryUs}) / 1000), 0, next_unit_at(credit, ${int(BT)}, ${int(T)})
  end
  local credit = now_us - tat + ${int(BT)}
  return 0, max(0, floor(credit / ${int(T)})), ceil(tat / 1000), -1, 0, next_unit_at(credit, ${int(BT)}, ${int(T)})
end`,
        pass: `local tat = ${p}_tat
if tat == nil or tat < now_us then tat = now_us end
${p}_new_tat = tat + cost * ${int(T)}
pass = cost <= ${int(policy.burst + policy.queue)} and now_us - (${p}_new_tat - ${int(BT)}) >= ${QT === 0 ? "0" : `-${int(QT)}`}`,
        // next_unit_at(diff, BT, T), inlined
        allowed: `local ${p}_diff = now_us - (${p}_new_tat - ${int(BT)})
local ${p}_refill_at = now_ms
if ${p}_diff < ${int(BT)} then ${p}_refill_at = now_ms + ceil(((floor(${p}_diff / ${int(T)}) + 1) * ${int(T)} - ${p}_diff) / 1000) end${
          QT === 0
            ? ""
            : `
-- within the queue: no unit left, served after a delay
local ${p}_remaining, ${p}_delay = 0, 0
if ${p}_diff >= 0 then ${p}_remaining = floor(${p}_diff / ${int(T)}) else ${p}_delay = ceil(-${p}_diff / 1000) end`
        }`,
        values:
          QT === 0
            ? `1, floor(${p}_diff / ${int(T)}), ceil(${p}_new_tat / 1000), 0, 0, ${p}_refill_at, 0`
            : `1, ${p}_remaining, ceil(${p}_new_tat / 1000), 0, ${p}_delay, ${p}_refill_at, 0`,
        prepare: "",
        // never more than the charge still weighs: its mark (the TAT right after it; without a
        // charge named, the latest: the TAT now) less now, and never below now (full)
        refund: `if ${p}_tat ~= nil and ${p}_tat > now_us then
  local mark = ${p}_tat
  if charged_ms >= 0 then mark = tonumber(ARGV[${4 + i}]) or 0 end
  local back = math.min(refund_cost * ${int(T)}, mark - now_us, ${p}_tat - now_us)
  if back > 0 then
    ${p}_tat = ${p}_tat - back
    changed(${str(policyField(policy))}, fmt('%.0f', ${p}_tat))
  end
end`,
        release: "",
        value: `fmt('%.0f', ${p}_new_tat)`,
        expiresUs: `${p}_new_tat`,
        mark: `${p}_new_tat`,
      };
    }
    case "fixedWindow": {
      const L = policy.limit;
      const W = policy.windowMs;
      return {
        describe: `${about}, limit ${int(L)} per ${int(W)} ms; stored: "window:count"`,
        read: `local ${p}_window, ${p}_count
if ${stored} then
  local window, count = match(${stored}, '^(%d+):(%d+)$')
  if window then ${p}_window, ${p}_count = window + 0, count + 0 end
end
local ${p}_new_window, ${p}_new_count`,
        decide: `local function ${p}_decide(c)
  local window = floor(now_ms / ${int(W)})
  local count = 0
  if ${p}_window == window then count = ${p}_count end
  local reset_at = (window + 1) * ${int(W)}
  if c <= ${int(L)} - count then
    ${p}_new_window = window
    ${p}_new_count = count + c
    return 1, ${int(L)} - count - c, reset_at, 0, 0, reset_at
  end
  if c <= ${int(L)} then return 0, ${int(L)} - count, reset_at, reset_at - now_ms, 0, reset_at end
  return 0, ${int(L)} - count, reset_at, -1, 0, reset_at
end`,
        pass: `local window = floor(now_ms / ${int(W)})
local count = 0
if ${p}_window == window then count = ${p}_count end
${p}_new_window = window
${p}_new_count = count + cost
pass = cost <= ${int(L)} - count`,
        allowed: "",
        values: `1, ${int(L)} - ${p}_new_count, (${p}_new_window + 1) * ${int(W)}, 0, 0, (${p}_new_window + 1) * ${int(W)}, 0`,
        prepare: "",
        refund: `if ${p}_window ~= nil and ${p}_window == floor(charged_window_ms / ${int(W)}) and ${p}_count > 0 then
  ${p}_count = max(0, ${p}_count - refund_cost)
  changed(${str(policyField(policy))}, fmt('%.0f:%.0f', ${p}_window, ${p}_count))
end`,
        release: "",
        value: `fmt('%.0f:%.0f', ${p}_new_window, ${p}_new_count)`,
        expiresUs: `(${p}_new_window + 1) * ${int(W * 1000)}`,
      };
    }
    case "slidingWindow": {
      const L = policy.limit;
      const W = policy.windowMs;
      return {
        describe: `${about}, limit ${int(L)} per ${int(W)} ms; stored: "window:previous:current"`,
        read: `local ${p}_window, ${p}_previous, ${p}_current
if ${stored} then
  local window, previous, current = match(${stored}, '^(%d+):(%d+):(%d+)$')
  if window then ${p}_window, ${p}_previous, ${p}_current = window + 0, previous + 0, current + 0 end
end
local ${p}_new_window, ${p}_new_previous, ${p}_new_current`,
        decide: `-- the least wait (ms) after which c units pass with the state unchanged
local function ${p}_retry(into, previous, current, c)
  local spare = ${int(L)} - current - c
  if spare >= 0 and previous > 0 then
    local slid = floor((spare * ${int(W)}) / previous)
    if slid > 0 then return ${int(W)} - into - slid end
  end
  local retry = ${int(W)} - into
  if current > 0 then retry = retry + max(0, ${int(W)} - floor(((${int(L)} - c) * ${int(W)}) / current)) end
  return retry
end
local function ${p}_decide(c)
  local window = floor(now_ms / ${int(W)})
  local into = now_ms - window * ${int(W)}
  local previous, current = 0, 0
  if ${p}_window == window then
    previous = ${p}_previous
    current = ${p}_current
  elseif ${p}_window == window - 1 then
    previous = ${p}_current
  end
  local weighted = previous * (${int(W)} - into)
  local left = floor((${int(L * W)} - weighted) / ${int(W)})
  if c <= ${int(L)} - current and weighted <= (${int(L)} - current - c) * ${int(W)} then
    ${p}_new_window = window
    ${p}_new_previous = previous
    ${p}_new_current = current + c
    local remaining = max(0, left - current - c)
    local refill_at = now_ms
    if remaining < ${int(L)} then refill_at = now_ms + ${p}_retry(into, previous, current + c, remaining + 1) end
    return 1, remaining, (window + 2) * ${int(W)}, 0, 0, refill_at
  end
  local reset_at = now_ms
  if current > 0 then reset_at = (window + 2) * ${int(W)} elseif previous > 0 then reset_at = (window + 1) * ${int(W)} end
  local remaining = max(0, left - current)
  local refill_at = now_ms
  if remaining < ${int(L)} then refill_at = now_ms + ${p}_retry(into, previous, current, remaining + 1) end
  if c > ${int(L)} then return 0, remaining, reset_at, -1, 0, refill_at end
  return 0, remaining, reset_at, ${p}_retry(into, previous, current, c), 0, refill_at
end`,
        pass: `local window = floor(now_ms / ${int(W)})
local previous, current = 0, 0
if ${p}_window == window then
  previous = ${p}_previous
  current = ${p}_current
elseif ${p}_window == window - 1 then
  previous = ${p}_current
end
${p}_new_window, ${p}_new_previous, ${p}_new_current = window, previous, current + cost
pass = cost <= ${int(L)} - current and previous * (${int(W)} - (now_ms - window * ${int(W)})) <= (${int(L)} - current - cost) * ${int(W)}`,
        // decide's allowed branch, with <p>_retry(into, previous, current + c, remaining + 1) inlined
        allowed: `local ${p}_into = now_ms - ${p}_new_window * ${int(W)}
local ${p}_remaining = max(0, floor((${int(L * W)} - ${p}_new_previous * (${int(W)} - ${p}_into)) / ${int(W)}) - ${p}_new_current)
local ${p}_refill_at = now_ms
if ${p}_remaining < ${int(L)} then
  local spare = ${int(L)} - ${p}_new_current - (${p}_remaining + 1)
  local slid = 0
  if spare >= 0 and ${p}_new_previous > 0 then slid = floor((spare * ${int(W)}) / ${p}_new_previous) end
  if slid > 0 then
    ${p}_refill_at = now_ms + (${int(W)} - ${p}_into - slid)
  else
    local retry = ${int(W)} - ${p}_into
    if ${p}_new_current > 0 then retry = retry + max(0, ${int(W)} - floor(((${int(L)} - (${p}_remaining + 1)) * ${int(W)}) / ${p}_new_current)) end
    ${p}_refill_at = now_ms + retry
  end
end`,
        values: `1, ${p}_remaining, (${p}_new_window + 2) * ${int(W)}, 0, 0, ${p}_refill_at, 0`,
        prepare: "",
        // the charge is in its window's current count, or in the previous count once the next window began
        refund: `if ${p}_window ~= nil then
  local charged_window = floor(charged_window_ms / ${int(W)})
  local done = false
  if ${p}_window == charged_window and ${p}_current > 0 then
    ${p}_current = max(0, ${p}_current - refund_cost)
    done = true
  elseif ${p}_window == charged_window + 1 and ${p}_previous > 0 then
    ${p}_previous = max(0, ${p}_previous - refund_cost)
    done = true
  end
  if done then changed(${str(policyField(policy))}, fmt('%.0f:%.0f:%.0f', ${p}_window, ${p}_previous, ${p}_current)) end
end`,
        release: "",
        value: `fmt('%.0f:%.0f:%.0f', ${p}_new_window, ${p}_new_previous, ${p}_new_current)`,
        expiresUs: `(${p}_new_window + 2) * ${int(W * 1000)}`,
      };
    }
    case "slidingLog": {
      const L = policy.limit;
      const Wus = policy.windowMs * 1000;
      return {
        describe: `${about}, limit ${int(L)} per ${int(Wus)} µs; stored: the whole log, "time:cost,time:cost,..." (µs, oldest first)`,
        read: `local ${p}_log = ${stored}
local ${p}_times, ${p}_costs, ${p}_offsets = {}, {}, {}
local ${p}_total = 0
if ${p}_log then
  local n = 0
  for offset, time, units in gmatch(${p}_log, '()(%d+):(%d+)') do
    n = n + 1
    ${p}_offsets[n] = offset
    ${p}_times[n] = time + 0
    ${p}_costs[n] = units + 0
    ${p}_total = ${p}_total + ${p}_costs[n]
  end
end
local ${p}_first_live, ${p}_used, ${p}_new_log`,
        decide: `local function ${p}_decide(c)
${logWindow(p, Wus, "  ")}
  -- the quota next grows when the oldest entry in the window leaves it
  local oldest = now_us
  if first <= n then oldest = times[first] end
  local refill_at = now_ms + ceil((oldest + ${int(Wus)} - now_us) / 1000)
  if c <= ${int(L)} - used then
    ${p}_first_live = first
    return 1, ${int(L)} - used - c, ceil((now_us + ${int(Wus)}) / 1000), 0, 0, refill_at
  end
  if first > n then refill_at = now_ms end
  local reset_at = ceil(now_us / 1000)
  if first <= n then reset_at = ceil((times[n] + ${int(Wus)}) / 1000) end
  if c > ${int(L)} then return 0, ${int(L)} - used, reset_at, -1, 0, refill_at end
  local need = used + c - ${int(L)}
  local freed = 0
  for j = first, n do
    freed = freed + costs[j]
    if freed >= need then return 0, ${int(L)} - used, reset_at, ceil((times[j] + ${int(Wus)} - now_us) / 1000), 0, refill_at end
  end
  return 0, ${int(L)} - used, reset_at, -1, 0, refill_at
end`,
        pass: `${logWindow(p, Wus, "")}
${p}_first_live, ${p}_used = first, used
pass = cost <= ${int(L)} - used`,
        // the oldest entry in the window (none: now) sets when the quota next grows
        allowed: `local ${p}_refill_at = now_ms + ceil(((${p}_times[${p}_first_live] or now_us) + ${int(Wus)} - now_us) / 1000)`,
        values: `1, ${int(L)} - ${p}_used - cost, ceil((now_us + ${int(Wus)}) / 1000), 0, 0, ${p}_refill_at, 0`,
        // drop the entries that left the window; a request in the newest entry's microsecond merges into it
        prepare: `  do
    local n = #${p}_times
    local first = ${p}_first_live
    if first > n then
      ${p}_new_log = fmt('%.0f:%.0f', now_us, cost)
    elseif ${p}_times[n] == now_us then
      ${p}_new_log = sub(${p}_log, ${p}_offsets[first], ${p}_offsets[n] - 1) .. fmt('%.0f:%.0f', now_us, ${p}_costs[n] + cost)
    else
      ${p}_new_log = sub(${p}_log, ${p}_offsets[first]) .. fmt(',%.0f:%.0f', now_us, cost)
    end
  end`,
        // newest entries first: that request's (its millisecond), or the latest ones (charged_ms -1)
        refund: `do
  local times, costs = ${p}_times, ${p}_costs
  local cutoff = now_us - ${int(Wus)}
  local left = refund_cost
  local done = false
  for j = #times, 1, -1 do
    if left <= 0 or times[j] <= cutoff then break end
    if charged_ms < 0 or floor(times[j] / 1000) == charged_ms then
      local take = math.min(left, costs[j])
      costs[j] = costs[j] - take
      ${p}_total = ${p}_total - take
      left = left - take
      done = true
    end
  end
  if done then
    local kept_times, kept_costs, parts = {}, {}, {}
    for j = 1, #times do
      if costs[j] > 0 then
        kept_times[#kept_times + 1] = times[j]
        kept_costs[#kept_costs + 1] = costs[j]
        parts[#parts + 1] = fmt('%.0f:%.0f', times[j], costs[j])
      end
    end
    ${p}_times, ${p}_costs = kept_times, kept_costs
    if #parts == 0 then emptied(${str(policyField(policy))}) else changed(${str(policyField(policy))}, table.concat(parts, ',')) end
  end
end`,
        release: "",
        value: `${p}_new_log`,
        expiresUs: `now_us + ${int(Wus)}`,
      };
    }
    case "concurrency": {
      const L = policy.limit;
      const leaseUs = policy.leaseMs * 1000;
      const field = str(policyField(policy));
      return {
        describe: `${about}, limit ${int(L)} in flight, leases of ${int(leaseUs)} µs; stored: the leases, "expires:id,expires:id,..." (µs)`,
        // expired leases are dropped as they are read: they hold no slot
        read: `local ${p}_expires, ${p}_ids = {}, {}
local ${p}_latest = 0
if ${stored} then
  for expires, id in gmatch(${stored}, '(%d+):(%d+)') do
    local at = expires + 0
    if at > now_us then
      ${p}_expires[#${p}_expires + 1] = at
      ${p}_ids[#${p}_ids + 1] = id + 0
      if at > ${p}_latest then ${p}_latest = at end
    end
  end
end
local ${p}_new_leases`,
        // one slot per request, whatever c; c = math.huge asks for the state now. A slot may free at
        // the earliest expiry, or any time before (a release): the wait is at most 1000 ms
        decide: `local function ${p}_decide(c)
  local n = #${p}_expires
  local earliest
  for j = 1, n do
    if earliest == nil or ${p}_expires[j] < earliest then earliest = ${p}_expires[j] end
  end
  if c ~= math.huge and n < ${int(L)} then
    local expires = now_us + ${int(leaseUs)}
    if earliest == nil or expires < earliest then earliest = expires end
    return 1, ${int(L)} - n - 1, ceil(max(${p}_latest, expires) / 1000), 0, 0, now_ms + math.min(${int(CONCURRENCY_RETRY_MS)}, ceil((earliest - now_us) / 1000))
  end
  if n == 0 then return 0, ${int(L)}, now_ms, 0, 0, now_ms end
  local wait = math.min(${int(CONCURRENCY_RETRY_MS)}, ceil((earliest - now_us) / 1000))
  return 0, max(0, ${int(L)} - n), ceil(${p}_latest / 1000), wait, 0, now_ms + wait
end`,
        pass: `pass = cost ~= math.huge and #${p}_expires < ${int(L)}`,
        // the earliest expiry, the new lease's included
        allowed: `local ${p}_earliest = now_us + ${int(leaseUs)}
for j = 1, #${p}_expires do
  if ${p}_expires[j] < ${p}_earliest then ${p}_earliest = ${p}_expires[j] end
end`,
        values: `1, ${int(L)} - #${p}_expires - 1, ceil(max(${p}_latest, now_us + ${int(leaseUs)}) / 1000), 0, 0, now_ms + math.min(${int(CONCURRENCY_RETRY_MS)}, ceil((${p}_earliest - now_us) / 1000)), 0`,
        prepare: `  do
    local parts = {}
    for j = 1, #${p}_expires do parts[j] = fmt('%.0f:%.0f', ${p}_expires[j], ${p}_ids[j]) end
    parts[#parts + 1] = fmt('%.0f:%.0f', now_us + ${int(leaseUs)}, lease)
    ${p}_new_leases = table.concat(parts, ',')
  end`,
        refund: "",
        release: `do
  local kept_expires, kept_ids, parts = {}, {}, {}
  local latest = 0
  for j = 1, #${p}_expires do
    if ${p}_ids[j] ~= lease then
      kept_expires[#kept_expires + 1] = ${p}_expires[j]
      kept_ids[#kept_ids + 1] = ${p}_ids[j]
      parts[#parts + 1] = fmt('%.0f:%.0f', ${p}_expires[j], ${p}_ids[j])
      if ${p}_expires[j] > latest then latest = ${p}_expires[j] end
    end
  end
  if #parts > 0 then
    redis.call('HSET', KEYS[1], ${field}, table.concat(parts, ','))
  elseif ${stored} then
    redis.call('HDEL', KEYS[1], ${field})
  end
  ${p}_expires, ${p}_ids, ${p}_latest = kept_expires, kept_ids, latest
end`,
        value: `${p}_new_leases`,
        expiresUs: `max(${p}_latest, now_us + ${int(leaseUs)})`,
      };
    }
  }
}

/**
 * Generates the `decide` script for a list of policies (in order). `KEYS[1]` is the identifier's
 * hash. ARGV: cost; then, optionally, the mode (`"c"` consume, the default, `"p"` peek, `"r"` refund
 * or `"x"` release), a fixed now in µs (test stores and `clock: "client"`; `''` or absent: `TIME`)
 * and the mode's own argument: for a refund, when the refunded request was charged (ms); for a
 * consume or a release, the lease id (a positive integer) under which an allowed request holds its
 * slot of every concurrency cap, or the lease to free. Returns `{ now_ms, then per policy: allowed
 * (1/0), remaining, resetAt, retryAfterMs (-1 = never), delayMs, refillAt, blocked (1/0) }`.
 *
 * @example
 * ```ts
 * const { script, sha } = decideScript([tokenBucket({ capacity: 10, refillRate: 1 })]);
 * ```
 */
export function decideScript(policies: readonly Policy[]): Script {
  if (policies.length === 0 || policies.length > MAX_POLICIES) {
    throw new SluiceConfigError(`[sluice] [redis] a limiter takes 1 to ${MAX_POLICIES} limits; got ${policies.length}`);
  }
  const names = policies.map((policy, k) => `${KIND_CODE[policy.kind]}${k + 1}`);
  const parts = policies.map((policy, k) => part(policy, k + 1));
  const fields = policies.map((policy, k) => `${str(policyField(policy))}, ${parts[k]!.value}`).join(", ");
  // penalty boxes: a field of their own per policy, read after '@expires'
  const blocked = policies.flatMap((policy, k) => (policy.block === undefined ? [] : [{ p: names[k]!, block: policy.block, field: blockFieldOf(policy) }]));
  const answer = (results: string[]) => `answer(${results.join(", ")})`;
  // the buckets' marks of an allowed consume, appended to the reply (0 in every other reply)
  const marks = parts.flatMap((x, k) => (x.mark === undefined ? [] : [{ p: names[k]!, mark: x.mark }]));
  const noMarks = marks.map(() => "0").join(", ");
  const concurrent = policies.some((policy) => policy.kind === "concurrency");
  // the write of an allowed consume. The hash's TTL is pushed past the state's expiry with some
  // slack, and only when the state would outlive it: a hot key is not sent a PEXPIRE on every request.
  const write = [
    `local expires = max(${parts.map((x) => x.expiresUs).join(", ")})`,
    "if expires_at and expires_at >= expires then",
    `  redis.call('HSET', KEYS[1], ${fields})`,
    "else",
    `  expires_at = expires + ${int(TTL_SLACK_US)}`,
    `  redis.call('HSET', KEYS[1], ${fields}, '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
    "  redis.call('PEXPIRE', KEYS[1], max(1, ceil((expires_at - now_us) / 1000)))",
    "end",
  ];
  const lines = [
    `-- Sluice decide: ${policies.map((policy) => `${policy.kind} ${str(policy.name)}${policy.block === undefined ? "" : " with a penalty box"}`).join(", ")}`,
    "-- KEYS[1]: the identifier's hash, one field per policy (and per penalty box) plus '@expires'.",
    `-- ARGV: cost; optionally the mode ('c' consume, 'p' peek, 'r' refund${concurrent ? ", 'x' release" : ""}), now in µs (test stores and`,
    `-- clock 'client'; '' or absent: TIME) and, for a refund, when the request was charged (ms) then one mark per policy${concurrent ? "; for a consume" : "."}`,
    ...(concurrent ? ["-- or a release, the lease id (the slot an allowed request holds on each concurrency cap, or the one to free)."] : []),
    "-- Returns now_ms, then per policy: allowed (1/0), remaining, reset_at (ms), retry_after (ms, -1: never), delay (ms),",
    "-- refill_at (ms: when the available quota next grows), blocked_until (ms: its penalty box denies until then; 0: none),",
    `-- then ${marks.length === 0 ? "nothing more" : `one mark per bucket (${marks.map((m) => m.p).join(", ")}: its TAT right after an allowed consume, µs; 0 otherwise)`}.`,
    "local floor, ceil, max = math.floor, math.ceil, math.max",
    "local match, gmatch, sub, fmt = string.match, string.gmatch, string.sub, string.format",
    // the usual cost, 1, is recognized without a conversion (interned strings compare by pointer)
    "local cost = ARGV[1] == '1' and 1 or tonumber(ARGV[1])",
    "local now_us",
    "if ARGV[3] and ARGV[3] ~= '' then",
    "  now_us = tonumber(ARGV[3])",
    "else",
    "  local time = redis.call('TIME')",
    "  now_us = time[1] * 1000000 + time[2]",
    "end",
    "local now_ms = floor(now_us / 1000)",
    ...(concurrent ? ["local lease = 0", "if ARGV[2] ~= 'r' then lease = tonumber(ARGV[4]) or 0 end"] : []),
    `local stored = redis.call('HMGET', KEYS[1], ${[...policies.map((policy) => str(policyField(policy))), `'${EXPIRES_FIELD}'`, ...blocked.map((b) => str(b.field))].join(", ")})`,
    `local expires_at = tonumber(stored[${policies.length + 1}])`,
    ...blocked.flatMap((b, m) => [
      `-- ${b.p}'s penalty box: "blocked until (µs):offences"`,
      `local ${b.p}_block_until, ${b.p}_block_offences`,
      "do",
      `  local till, offences = match(stored[${policies.length + 2 + m}] or '', '^(%d+):(%d+)$')`,
      `  if till then ${b.p}_block_until, ${b.p}_block_offences = till + 0, offences + 0 end`,
      "end",
    ]),
    "",
    ...parts.flatMap((x) => [x.describe, x.read, ""]),
    // The fast path: a consume that every policy allows (most calls) runs as straight-line code,
    // with no closure, no table of its own but the reply, and nothing a denial alone would need. A
    // denial, a peek, a refund, a release and a running penalty box fall through to the general
    // code below. The modes are told apart exactly as there: without a concurrency cap there is no
    // release mode, and 'x' is a consume.
    "-- consume, every policy allowing: decided, written and answered right here",
    `local pass = ARGV[2] ~= 'p' and ARGV[2] ~= 'r'${concurrent ? " and ARGV[2] ~= 'x'" : ""}${blocked.map((b) => ` and (${b.p}_block_until or 0) <= now_us`).join("")}`,
    ...parts.flatMap((x, k) => [`if pass then -- ${names[k]}`, x.pass.replace(/^/gm, "  "), "end"]),
    "if pass then",
    ...parts.map((x) => x.prepare).filter((x) => x !== ""),
    ...write.map((line) => `  ${line}`),
    ...parts.map((x) => x.allowed.replace(/^/gm, "  ")).filter((x) => x.trim() !== ""),
    `  return { now_ms, ${[...parts.map((x) => x.values), ...marks.map((m) => m.mark)].join(", ")} }`,
    "end",
    "",
    "-- the general code: each policy's decide(c) returns its 6 numbers; the reply is assembled from tables",
    ...(policies.some((policy) => policy.kind === "tokenBucket" || policy.kind === "leakyBucket")
      ? [
          "-- buckets: when (ms) the next unit drips back, 'credit' (µs) being now - tat + burst * T; now if full",
          "local function next_unit_at(credit, full, step)",
          "  if credit >= full then return now_ms end",
          "  return now_ms + ceil(((floor(credit / step) + 1) * step - credit) / 1000)",
          "end",
        ]
      : []),
    "-- the reply: now_ms, then 7 numbers per policy (each policy's result is a table), then the marks (none charged here)",
    "local function answer(...)",
    "  local out = { now_ms }",
    "  for _, r in ipairs({ ... }) do",
    "    for j = 1, 7 do out[#out + 1] = r[j] or 0 end",
    "  end",
    ...marks.map(() => "  out[#out + 1] = 0"),
    "  return out",
    "end",
    ...parts.flatMap((x, k) => [`-- ${names[k]}`, x.decide]),
    "",
    "if ARGV[2] == 'r' then",
    "  -- refund: give ARGV[1] units back for a charge at ARGV[4] ms with its marks in ARGV[5..] (absent: the latest),",
    "  -- then answer as a peek",
    "  local refund_cost = cost",
    "  local charged_ms = tonumber(ARGV[4]) or -1",
    "  -- the windows: the one charged in (without a time, the current one)",
    "  local charged_window_ms = charged_ms",
    "  if charged_window_ms < 0 then charged_window_ms = now_ms end",
    "  local writes, deletes = {}, {}",
    "  local function changed(field, value) writes[#writes + 1] = field; writes[#writes + 1] = value end",
    "  local function emptied(field) deletes[#deletes + 1] = field end",
    ...parts.filter((x) => x.refund !== "").map((x) => x.refund.replace(/^/gm, "  ")),
    "  if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end",
    "  if #deletes > 0 then redis.call('HDEL', KEYS[1], unpack(deletes)) end",
    "end",
    ...(concurrent
      ? [
          "if ARGV[2] == 'x' then",
          "  -- release: free lease ARGV[4] on every concurrency cap (expired leases go too), then answer as a peek",
          ...parts.filter((x) => x.release !== "").map((x) => x.release.replace(/^/gm, "  ")),
          "end",
        ]
      : []),
    ...(blocked.length === 0
      ? []
      : [
          `if (${blocked.map((b) => `(${b.p}_block_until or 0) > now_us`).join(" or ")}) then`,
          "  -- a penalty box runs: a blocked policy denies until the later of the block's end and its own retry time for",
          "  -- the request; the others decide it as they would (their state now if they would allow it). Nothing is",
          "  -- written, no offence counted: a retry at the largest retry_after passes. A peek, refund or release asks for 1.",
          `  local asked = cost`,
          `  if ARGV[2] == 'p' or ARGV[2] == 'r'${concurrent ? " or ARGV[2] == 'x'" : ""} then asked = 1 end`,
          "  local function while_blocked(decide, till)",
          "    local r = { decide(asked) }",
          "    if r[1] == 1 then",
          "      r = { decide(math.huge) }",
          "      r[1], r[4], r[5] = 1, 0, 0",
          "    end",
          "    r[7] = 0",
          "    if till and till > now_us then",
          "      local ms = ceil((till - now_us) / 1000)",
          "      local wait = ms",
          "      if r[1] == 0 and (r[4] == -1 or r[4] > ms) then wait = r[4] end",
          "      r[1], r[2], r[4], r[5] = 0, 0, wait, 0",
          "      if wait == -1 then r[6] = now_ms + ms else r[6] = now_ms + wait end",
          "      if r[3] < r[6] then r[3] = r[6] end",
          "      r[7] = now_ms + ms",
          "    end",
          "    return r",
          "  end",
          `  return ${answer(names.map((p) => `while_blocked(${p}_decide, ${blocked.some((b) => b.p === p) ? `${p}_block_until` : "nil"})`))}`,
          "end",
        ]),
    `if ARGV[2] == 'p' or ARGV[2] == 'r'${concurrent ? " or ARGV[2] == 'x'" : ""} then`,
    "  -- peek: whether a cost-1 request would pass, with remaining, reset_at and refill_at of the state now",
    "  local function peeked(decide)",
    "    local r = { decide(1) }",
    "    if r[1] == 1 then",
    "      local now = { decide(math.huge) }",
    "      r[2], r[3], r[6] = now[2], now[3], now[6]",
    "    end",
    "    return r",
    "  end",
    `  return ${answer(names.map((p) => `peeked(${p}_decide)`))}`,
    "end",
    "",
    // A consume gets here only when the fast path found a policy denying (these decide the same),
    // so nothing is written but a penalty box.
    "-- consume, some policy denying (the fast path answered every other consume)",
    ...names.map((p) => `local ${p}_result = { ${p}_decide(cost) }`),
  ];
  if (policies.length > 1) {
    // nothing was written; a policy that would have allowed reports its state unchanged
    lines.push(
      "-- denied: nothing was written; a policy that would have allowed reports its state unchanged",
      ...names.map(
        (p) => `if ${p}_result[1] == 1 then
  local now = { ${p}_decide(math.huge) }
  ${p}_result[2], ${p}_result[3], ${p}_result[6] = now[2], now[3], now[6]
  ${p}_result[4], ${p}_result[5] = 0, 0
end`,
      ),
    );
  }
  for (const { p, block, field } of blocked) {
    const maxUs = block.maxMs * 1000;
    lines.push(
      `-- ${p} denied (a cost that can never pass is no offence): its penalty box starts, longer for a repeat within ${int(block.maxMs)} ms`,
      `if ${p}_result[1] == 0 and ${p}_result[4] ~= -1 then`,
      "  local offences = 1",
      `  if ${p}_block_until and now_us <= ${p}_block_until + ${int(maxUs)} then offences = math.min(64, (${p}_block_offences or 0) + 1) end`,
      `  local ms = ${int(block.baseMs)}`,
      "  for _ = 2, offences do",
      `    if ms >= ${int(block.maxMs)} then break end`,
      `    ms = math.min(${int(block.maxMs)}, ms * ${int(block.factor)})`,
      "  end",
      "  local till = now_us + ms * 1000",
      `  redis.call('HSET', KEYS[1], ${str(field)}, fmt('%.0f:%.0f', till, offences))`,
      `  local keep = till + ${int(maxUs)}`,
      "  if not expires_at or expires_at < keep then",
      `    expires_at = keep + ${int(TTL_SLACK_US)}`,
      `    redis.call('HSET', KEYS[1], '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
      "    redis.call('PEXPIRE', KEYS[1], max(1, ceil((expires_at - now_us) / 1000)))",
      "  end",
      "  -- retry at the later of the block's end and the policy's own retry time, so that the retry passes",
      `  local wait = max(ms, ${p}_result[4])`,
      `  ${p}_result[1], ${p}_result[2], ${p}_result[4], ${p}_result[5], ${p}_result[6], ${p}_result[7] = 0, 0, wait, 0, now_ms + wait, now_ms + ms`,
      `  if ${p}_result[3] < ${p}_result[6] then ${p}_result[3] = ${p}_result[6] end`,
      "end",
    );
  }
  lines.push(`return ${answer(names.map((p) => `${p}_result`))}`, "");
  const script = lines.join("\n");
  return { script, sha: sha1(script) };
}
