/**
 * The concurrency cap in Lua: at most `limit` requests of a key in flight, one slot per request
 * whatever its cost, each held under a lease id until it is released or expires. Stored: the live
 * leases, `"expires:id,expires:id,..."` (µs; expired leases are dropped whenever the field is
 * written, and never count).
 *
 * @module
 */
import type { ConcurrencyPolicy } from "@sluice/core";
import { CONCURRENCY_RETRY_MS, policyField } from "@sluice/core/store";
import { type LuaAlgorithm, int, limitLocal, str } from "./definition.js";

export const concurrencyLua: LuaAlgorithm<ConcurrencyPolicy> = {
  marks: false,
  leases: true,
  maxCost: () => Infinity, // one slot per request, whatever its cost
  part(policy, p, i) {
    const stored = `stored[${i}]`;
    // the limit is a per-key local: an override may change it
    const L = `${p}_limit`;
    const leaseUs = int(policy.leaseMs * 1000);
    const field = str(policyField(policy));
    // the earliest expiry of the leases, starting from `start`, in `out`
    const earliest = (out: string, start: string) => `local ${out} = ${start}
for j = 1, #${p}_expires do
  if ${p}_expires[j] < ${out} then ${out} = ${p}_expires[j] end
end`;
    // a slot may free at the earliest expiry `at`, or any time before (a release): the wait (ms) is at most CONCURRENCY_RETRY_MS
    const wait = (at: string) => `math.min(${int(CONCURRENCY_RETRY_MS)}, ceil((${at} - now_us) / 1000))`;
    return {
      describe: `-- ${p}: concurrency ${str(policy.name)}, limit ${int(policy.limit)} in flight, leases of ${leaseUs} µs; stored: the leases, "expires:id,expires:id,..." (µs)`,
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
      functions: "",
      now: "",
      take: () => "",
      // c = math.huge asks for the state now
      fits: (c) => `${c} ~= math.huge and #${p}_expires < ${L}`,
      // the earliest expiry, the new lease's included
      allowed: earliest(`${p}_earliest`, `now_us + ${leaseUs}`),
      values: () => `1, ${L} - #${p}_expires - 1, ceil(max(${p}_latest, now_us + ${leaseUs}) / 1000), 0, 0, now_ms + ${wait(`${p}_earliest`)}`,
      denied: () => `-- denied (or asked for the state now): a slot frees at the earliest expiry, or before it (a release);
-- with more leases held than the quota (an override that ended), once the surplus and one more have expired
if #${p}_expires == 0 then return 0, ${L}, now_ms, 0, 0, now_ms end
${earliest("earliest", "math.huge")}
if #${p}_expires > ${L} then
  local sorted = {}
  for j = 1, #${p}_expires do sorted[j] = ${p}_expires[j] end
  table.sort(sorted)
  earliest = sorted[#${p}_expires - ${L} + 1]
end
local wait = ${wait("earliest")}
return 0, max(0, ${L} - #${p}_expires), ceil(${p}_latest / 1000), wait, 0, now_ms + wait`,
      prepare: `do
  local parts = {}
  for j = 1, #${p}_expires do parts[j] = fmt('%.0f:%.0f', ${p}_expires[j], ${p}_ids[j]) end
  parts[#parts + 1] = fmt('%.0f:%.0f', now_us + ${leaseUs}, lease)
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
      expiresUs: `max(${p}_latest, now_us + ${leaseUs})`,
      ...limitLocal(policy, p),
    };
  },
};
