/**
 * The sliding window counter in Lua: the previous window's count weighted by its overlap with the
 * last `window`, plus the current count, compared in integers (`previous * (W - into) + (current +
 * c) * W <= limit * W`). Stored: `"window:previous:current"`.
 *
 * @module
 */
import type { SlidingWindowPolicy } from "@sluice/core";
import { policyField } from "@sluice/core/store";
import { type LuaAlgorithm, digits, indent, int, str, windowLua } from "./definition.js";

export const slidingWindowLua: LuaAlgorithm<SlidingWindowPolicy> = {
  ...windowLua,
  // a window's units serve inside their window: the limiter bounds that, the charge is an ordinary one
  reservable: () => true,
  // the fast path sends the new counts; the window is now's (core's stored form: [expires, window, previous, current])
  stateReply: (policy) => ({
    width: 2,
    lua: (p) => [`${p}_new_previous`, `${p}_new_current`],
    stored: (reply, at, nowUs, effective) => {
      const previous = reply[at] as number;
      const current = reply[at + 1] as number;
      const W = policy.windowMs;
      const nowMs = Math.floor(nowUs / 1000);
      const window = Math.floor(nowMs / W);
      // an allowed consume counted 1 to limit units now, and the weighted sum is within the quota:
      // previous × (W − into) + current × W <= limit × W (the products of a state beyond it only grow)
      const fits = current >= 1 && current <= effective.limit && previous >= 0 && previous * (W - (nowMs - window * W)) <= (effective.limit - current) * W;
      return fits ? [0, window, previous, current] : undefined;
    },
  }),
  part(policy, p, i) {
    const stored = `stored[${i}]`;
    // per-key locals, which an override may change: the limit (also the largest cost) and limit × window
    const L = `${p}_limit`;
    const W = int(policy.windowMs);
    const LW = `${p}_lw`;
    // the whole units left (ms `into` the window), before any beyond `current`
    const remaining = (previous: string, current: string, into: string) => `max(0, floor((${LW} - ${previous} * (${W} - ${into})) / ${W}) - ${current})`;
    // The least wait (ms) after which `units` pass with the state unchanged (the window may roll
    // over meanwhile: then previous = current, current = 0), in `wait`. The decide function calls
    // it as <p>_retry; the fast path, where a closure would cost an allocation per call, binds its
    // parameters and runs the same text.
    const retry = `local spare = ${L} - current - units
local slid = 0
if spare >= 0 and previous > 0 then slid = floor((spare * ${W}) / previous) end
local wait = ${W} - into
if slid > 0 then
  wait = wait - slid
elseif current > 0 then
  wait = wait + max(0, ${W} - floor(((${L} - units) * ${W}) / current))
end`;
    return {
      describe: `-- ${p}: slidingWindow ${str(policy.name)}, limit ${int(policy.limit)} per ${W} ms; stored: "window:previous:current"`,
      read: `local ${p}_window, ${p}_previous, ${p}_current
if ${stored} then
  local window, previous, current = match(${stored}, '^(%d+):(%d+):(%d+)$')
  if window then ${p}_window, ${p}_previous, ${p}_current = window + 0, previous + 0, current + 0 end
end
local ${p}_new_window, ${p}_new_previous, ${p}_new_current`,
      functions: `-- the least wait (ms) after which 'units' pass with the state unchanged
local function ${p}_retry(into, previous, current, units)
${indent(retry, "  ")}
  return wait
end`,
      // the counts of this window and the previous one; older ones are gone
      now: `local window = floor(now_ms / ${W})
local previous, current = 0, 0
if ${p}_window == window then
  previous = ${p}_previous
  current = ${p}_current
elseif ${p}_window == window - 1 then
  previous = ${p}_current
end`,
      take: (c) => `${p}_new_window, ${p}_new_previous, ${p}_new_current = window, previous, current + ${c}`,
      fits: (c) => `${c} <= ${L} - current and previous * (${W} - (now_ms - window * ${W})) <= (${L} - current - ${c}) * ${W}`,
      // the quota next grows when one more unit than is left would pass: <p>_retry, inlined
      allowed: `local ${p}_into = now_ms - ${p}_new_window * ${W}
local ${p}_remaining = ${remaining(`${p}_new_previous`, `${p}_new_current`, `${p}_into`)}
local ${p}_refill_at = now_ms
if ${p}_remaining < ${L} then
  local into, previous, current, units = ${p}_into, ${p}_new_previous, ${p}_new_current, ${p}_remaining + 1
${indent(retry, "  ")}
  ${p}_refill_at = now_ms + wait
end`,
      values: () => `1, ${p}_remaining, (${p}_new_window + 2) * ${W}, 0, 0, ${p}_refill_at`,
      denied: (c) => `-- denied: back to the full quota once the current count (else the previous one) has slid out
local into = now_ms - window * ${W}
local remaining = ${remaining("previous", "current", "into")}
local reset_at = now_ms
if current > 0 then reset_at = (window + 2) * ${W} elseif previous > 0 then reset_at = (window + 1) * ${W} end
local refill_at = now_ms
if remaining < ${L} then refill_at = now_ms + ${p}_retry(into, previous, current, remaining + 1) end
if ${c} > ${L} then return 0, remaining, reset_at, -1, 0, refill_at end
return 0, remaining, reset_at, ${p}_retry(into, previous, current, ${c}), 0, refill_at`,
      prepare: "",
      // the charge is in its window's current count, or in the previous count once the next window began
      refund: `if ${p}_window ~= nil then
  local charged_window = floor(charged_window_ms / ${W})
  local done = false
  if ${p}_window == charged_window and ${p}_current > 0 then
    ${p}_current = max(0, ${p}_current - refund_cost)
    done = true
  elseif ${p}_window == charged_window + 1 and ${p}_previous > 0 then
    ${p}_previous = max(0, ${p}_previous - refund_cost)
    done = true
  end
  if done then changed(${str(policyField(policy))}, ${digits(`${p}_window`, `${p}_previous`, `${p}_current`)}) end
end`,
      release: "",
      value: digits(`${p}_new_window`, `${p}_new_previous`, `${p}_new_current`),
      expiresUs: `(${p}_new_window + 2) * ${int(policy.windowMs * 1000)}`,
      quota: `local ${L}, ${LW} = ${int(policy.limit)}, ${int(policy.limit * policy.windowMs)}`,
      requota: (q) => `${L}, ${LW} = ${q}, ${q} * ${W}`,
    };
  },
};
