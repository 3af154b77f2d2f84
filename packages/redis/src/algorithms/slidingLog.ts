/**
 * The sliding log in Lua: every admitted request's (time, cost) inside the last `window`; a request
 * passes when the costs in `(now - W, now]` plus its own stay within `limit`. Stored: the whole
 * log, `"time:cost,time:cost,..."` (µs, oldest first; its sum is recomputed from the entries, so
 * the two can never disagree).
 *
 * @module
 */
import type { SlidingLogPolicy } from "@sluice/core";
import { policyField } from "@sluice/core/store";
import { type LuaAlgorithm, int, limitLocal, str, windowLua } from "./definition.js";

/** A log's names in its Lua: its prefix, its limit (a per-key local: an override may change it; also the largest cost) and its window (µs). */
interface Log {
  readonly p: string;
  readonly L: string;
  readonly Wus: string;
}

/** The ms until an entry at `time` (µs) leaves the window. */
const leaves = ({ Wus }: Log, time: string) => `ceil((${time} + ${Wus} - now_us) / 1000)`;

/** Reads the log into its entries' times, costs and offsets in the stored text, and their sum. */
function logRead(p: string, stored: string): string {
  return `local ${p}_log = ${stored}
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
local ${p}_first_live, ${p}_used, ${p}_new_log`;
}

/** The answer to `c` units that do not fit: when the log is empty again, when its quota grows and when the same cost passes. */
function logDenied(log: Log, c: string): string {
  const { L, Wus } = log;
  return `-- denied: the log is empty again when its newest entry leaves the window, the quota grows when the
-- oldest entries holding more than limit - 1 units have (its oldest, unless the log holds more than
-- the quota: counts made under an override that ended), and the same cost passes once enough of the
-- oldest entries have left
local reset_at, refill_at = ceil(now_us / 1000), now_ms
if first <= n then
  reset_at = ceil((times[n] + ${Wus}) / 1000)
  local surplus, gone = max(1, used - ${L} + 1), 0
  for j = first, n do
    gone = gone + costs[j]
    if gone >= surplus then
      refill_at = now_ms + ${leaves(log, "times[j]")}
      break
    end
  end
end
if ${c} > ${L} then return 0, max(0, ${L} - used), reset_at, -1, 0, refill_at end
local need = used + ${c} - ${L}
local freed = 0
for j = first, n do
  freed = freed + costs[j]
  if freed >= need then return 0, max(0, ${L} - used), reset_at, ${leaves(log, "times[j]")}, 0, refill_at end
end
return 0, max(0, ${L} - used), reset_at, -1, 0, refill_at`;
}

/** The log to write after an allowed consume: the entries that left the window dropped; a request in the newest entry's microsecond merges into it. */
function logPrepare(p: string): string {
  return `do
  local n = #${p}_times
  local first = ${p}_first_live
  if first > n then
    ${p}_new_log = fmt('%.0f:%.0f', now_us, cost)
  elseif ${p}_times[n] == now_us then
    ${p}_new_log = sub(${p}_log, ${p}_offsets[first], ${p}_offsets[n] - 1) .. fmt('%.0f:%.0f', now_us, ${p}_costs[n] + cost)
  else
    ${p}_new_log = sub(${p}_log, ${p}_offsets[first]) .. fmt(',%.0f:%.0f', now_us, cost)
  end
end`;
}

/** The refund: newest entries first, that request's (its millisecond), or the latest ones (charged_ms -1). */
function logRefund({ p, Wus }: Log, field: string): string {
  return `do
  local times, costs = ${p}_times, ${p}_costs
  local cutoff = now_us - ${Wus}
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
    if #parts == 0 then emptied(${field}) else changed(${field}, table.concat(parts, ',')) end
  end
end`;
}

export const slidingLogLua: LuaAlgorithm<SlidingLogPolicy> = {
  ...windowLua,
  part(policy, p, i) {
    const log: Log = { p, L: `${p}_limit`, Wus: int(policy.windowMs * 1000) };
    const { L, Wus } = log;
    return {
      describe: `-- ${p}: slidingLog ${str(policy.name)}, limit ${int(policy.limit)} per ${Wus} µs; stored: the whole log, "time:cost,time:cost,..." (µs, oldest first)`,
      read: logRead(p, `stored[${i}]`),
      functions: "",
      // first: the first entry still in the window; used: the units of the entries from there on
      now: `local times, costs = ${p}_times, ${p}_costs
local n = #times
local cutoff = now_us - ${Wus}
local used = ${p}_total
local first = 1
while first <= n and times[first] <= cutoff do
  used = used - costs[first]
  first = first + 1
end`,
      take: () => `${p}_first_live, ${p}_used = first, used`,
      fits: (c) => `${c} <= ${L} - used`,
      // the oldest entry in the window (none: now) sets when the quota next grows
      allowed: `local ${p}_refill_at = now_ms + ${leaves(log, `(${p}_times[${p}_first_live] or now_us)`)}`,
      values: (c) => `1, ${L} - ${p}_used - ${c}, ceil((now_us + ${Wus}) / 1000), 0, 0, ${p}_refill_at`,
      denied: (c) => logDenied(log, c),
      prepare: logPrepare(p),
      refund: logRefund(log, str(policyField(policy))),
      release: "",
      value: `${p}_new_log`,
      expiresUs: `now_us + ${Wus}`,
      ...limitLocal(policy, p),
    };
  },
};
