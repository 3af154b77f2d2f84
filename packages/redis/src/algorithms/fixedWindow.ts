/**
 * The fixed window in Lua: at most `limit` units per window `floor(now / window)`. Stored:
 * `"window:count"` (the window's index and its count).
 *
 * @module
 */
import type { FixedWindowPolicy } from "@sluice/core";
import { policyField } from "@sluice/core/store";
import { type LuaAlgorithm, digits, int, limitLocal, str, windowLua } from "./definition.js";

export const fixedWindowLua: LuaAlgorithm<FixedWindowPolicy> = {
  ...windowLua,
  // a window's units serve inside their window: the limiter bounds that, the charge is an ordinary one
  reservable: () => true,
  // the fast path sends the new count; the window is now's (core's stored form: [expires, window, count])
  stateReply: (policy) => ({
    width: 1,
    lua: (p) => [`${p}_new_count`],
    stored: (reply, at, nowUs, effective) => {
      // an allowed consume leaves 1 to limit units counted
      const count = reply[at] as number;
      return count >= 1 && count <= effective.limit ? [0, Math.floor(Math.floor(nowUs / 1000) / policy.windowMs), count] : undefined;
    },
  }),
  part(policy, p, i) {
    const stored = `stored[${i}]`;
    // the limit is a per-key local: an override may change it (it is also the largest cost)
    const L = `${p}_limit`;
    const W = int(policy.windowMs);
    // the end of window `index` (ms): when its count is gone
    const endOf = (index: string) => `(${index} + 1) * ${W}`;
    return {
      describe: `-- ${p}: fixedWindow ${str(policy.name)}, limit ${int(policy.limit)} per ${W} ms; stored: "window:count"`,
      read: `local ${p}_window, ${p}_count
if ${stored} then
  local window, count = match(${stored}, '^(%d+):(%d+)$')
  if window then ${p}_window, ${p}_count = window + 0, count + 0 end
end
local ${p}_new_window, ${p}_new_count`,
      functions: "",
      // a count of an earlier window is gone
      now: `local window = floor(now_ms / ${W})
local count = 0
if ${p}_window == window then count = ${p}_count end`,
      take: (c) => `${p}_new_window = window
${p}_new_count = count + ${c}`,
      fits: (c) => `${c} <= ${L} - count`,
      allowed: "",
      values: () => `1, ${L} - ${p}_new_count, ${endOf(`${p}_new_window`)}, 0, 0, ${endOf(`${p}_new_window`)}`,
      denied: (c) => `-- denied: the same cost passes when the window ends, unless it is more than the limit
local reset_at = ${endOf("window")}
if ${c} <= ${L} then return 0, max(0, ${L} - count), reset_at, reset_at - now_ms, 0, reset_at end
return 0, max(0, ${L} - count), reset_at, -1, 0, reset_at`,
      prepare: "",
      // only a charge of the current window is still counted
      refund: `if ${p}_window ~= nil and ${p}_window == floor(charged_window_ms / ${W}) and ${p}_count > 0 then
  ${p}_count = max(0, ${p}_count - refund_cost)
  changed(${str(policyField(policy))}, ${digits(`${p}_window`, `${p}_count`)})
end`,
      release: "",
      value: digits(`${p}_new_window`, `${p}_new_count`),
      expiresUs: `(${p}_new_window + 1) * ${int(policy.windowMs * 1000)}`,
      ...limitLocal(policy, p),
    };
  },
};
