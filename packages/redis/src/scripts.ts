/**
 * The Lua scripts, as constants with their SHA-1 (tested against the text). One script set serves
 * every transport: `@upstash/redis` over HTTP and ioredis / node-redis over TCP.
 *
 * `decide` runs one decision for one identifier over all its policies atomically, with the
 * server's clock (`TIME`). It mirrors `packages/core/src/engine.ts`; the conformance suite and the
 * recorded vectors keep the two identical. It uses no script flags (`#!lua flags=...`), so it runs
 * on stock Redis 6.2+ and on Upstash alike.
 *
 * @module
 */

/** A Lua script and the SHA-1 that `EVALSHA` names it by. */
export interface Script {
  readonly script: string;
  readonly sha: string;
}

const decide = `-- Sluice: one decision for one identifier over all its policies, atomically.
-- Mirrors packages/core/src/engine.ts; the conformance suite and the recorded vectors keep the two
-- identical. Every number is an integer below 2^53 (Lua numbers are doubles) and is written with
-- %.0f, never with tostring (which would round to 14 digits).
--
-- KEYS[1]   the identifier's hash: one field per policy, "<name>|<kind>" -> state
--             fw "window:count"   sw "window:previous:current"   sl "sum"   tb/lb "tat"
-- KEYS[2..] one list per sliding log, in policy order: flat time_us, cost, ... oldest first
-- ARGV[1]   cost ; ARGV[2] mode: "c" consume, "p" peek
-- ARGV[3]   "" (use the server's TIME) or a fixed now in microseconds (test stores only)
-- ARGV[4]   n, then 5 per policy: kind, field, a, b, c
--             fw/sw/sl: a = limit, b = window ms ; tb/lb: a = emission interval us, b = burst, c = queue
-- Returns   { now_ms, then per policy: allowed (1/0), remaining, resetAt ms, retryAfterMs (-1 = never), delayMs }

local floor, ceil, max = math.floor, math.ceil, math.max
local find, sub, fmt = string.find, string.sub, string.format
local cost = tonumber(ARGV[1])
local now_us
if ARGV[3] ~= '' then
  now_us = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local now_ms = floor(now_us / 1000)
local n = tonumber(ARGV[4])

local K, F, A, B, C = {}, {}, {}, {}, {}
for i = 1, n do
  local b = 5 * i
  K[i] = ARGV[b]
  F[i] = ARGV[b + 1]
  A[i] = tonumber(ARGV[b + 2])
  B[i] = tonumber(ARGV[b + 3])
  C[i] = tonumber(ARGV[b + 4])
end

-- state now (nil = empty) and, for logs, their entries
local S1, S2, S3, E, LK = {}, {}, {}, {}, {}
local values = redis.call('HMGET', KEYS[1], unpack(F))
local logs = 1
for i = 1, n do
  local k, v = K[i], values[i]
  if k == 'sl' then
    logs = logs + 1
    LK[i] = KEYS[logs]
    S1[i] = tonumber(v) or 0
    local raw = redis.call('LRANGE', LK[i], 0, -1)
    local e = {}
    for j = 1, #raw do e[j] = tonumber(raw[j]) end
    E[i] = e
  elseif v then
    if k == 'tb' or k == 'lb' then
      S1[i] = tonumber(v)
    else
      local p = find(v, ':', 1, true)
      S1[i] = tonumber(sub(v, 1, p - 1))
      if k == 'fw' then
        S2[i] = tonumber(sub(v, p + 1))
      else
        local q = find(v, ':', p + 1, true)
        S2[i] = tonumber(sub(v, p + 1, q - 1))
        S3[i] = tonumber(sub(v, q + 1))
      end
    end
  end
end

-- The new state of an allowed evaluation, for the write.
local W1, W2, W3 = {}, {}, {}

-- Policy i for cost c: allowed (1/0), remaining, resetAt, retryAfterMs (-1 = never), delayMs.
-- An infinite cost takes every denial path, which reports the state now.
local function evaluate(i, c)
  local k, a, b = K[i], A[i], B[i]
  if k == 'tb' or k == 'lb' then
    local T, queue = a, C[i]
    local tat = S1[i]
    if tat == nil or tat < now_us then tat = now_us end
    if c <= b + queue then
      local new_tat = tat + c * T
      local diff = now_us - (new_tat - b * T)
      if diff >= 0 then
        W1[i] = new_tat
        return 1, floor(diff / T), ceil(new_tat / 1000), 0, 0
      end
      if diff >= -queue * T then
        W1[i] = new_tat
        return 1, 0, ceil(new_tat / 1000), 0, ceil(-diff / 1000)
      end
      return 0, max(0, floor((now_us - tat + b * T) / T)), ceil(tat / 1000), ceil((-diff - queue * T) / 1000), 0
    end
    return 0, max(0, floor((now_us - tat + b * T) / T)), ceil(tat / 1000), -1, 0
  elseif k == 'fw' then
    local idx = floor(now_ms / b)
    local count = 0
    if S1[i] == idx then count = S2[i] end
    local reset = (idx + 1) * b
    if c <= a - count then
      W1[i] = idx
      W2[i] = count + c
      return 1, a - count - c, reset, 0, 0
    end
    if c <= a then return 0, a - count, reset, reset - now_ms, 0 end
    return 0, a - count, reset, -1, 0
  elseif k == 'sw' then
    local idx = floor(now_ms / b)
    local r = now_ms - idx * b
    local prev, cur = 0, 0
    if S1[i] == idx then
      prev = S2[i]
      cur = S3[i]
    elseif S1[i] == idx - 1 then
      prev = S3[i]
    end
    local weighted = prev * (b - r)
    local left = floor((a * b - weighted) / b)
    if c <= a - cur and weighted <= (a - cur - c) * b then
      W1[i] = idx
      W2[i] = prev
      W3[i] = cur + c
      return 1, max(0, left - cur - c), (idx + 2) * b, 0, 0
    end
    local reset = now_ms
    if cur > 0 then reset = (idx + 2) * b elseif prev > 0 then reset = (idx + 1) * b end
    local retry = -1
    if c <= a then
      retry = nil
      local k2 = a - cur - c
      if k2 >= 0 and prev > 0 then
        local m = floor((k2 * b) / prev)
        if m > 0 then retry = b - r - m end
      end
      if retry == nil then
        retry = b - r
        if cur > 0 then retry = retry + max(0, b - floor(((a - c) * b) / cur)) end
      end
    end
    return 0, max(0, left - cur), reset, retry, 0
  end
  -- sliding log
  local window_us = b * 1000
  local cutoff = now_us - window_us
  local e = E[i]
  local len = #e
  local sum = S1[i]
  local start = 1
  while start <= len and e[start] <= cutoff do
    sum = sum - e[start + 1]
    start = start + 2
  end
  if c <= a - sum then
    W1[i] = start
    W2[i] = sum + c
    return 1, a - sum - c, ceil((now_us + window_us) / 1000), 0, 0
  end
  local reset = ceil(now_us / 1000)
  if start <= len then reset = ceil((e[len - 1] + window_us) / 1000) end
  local retry = -1
  if c <= a then
    local need = sum + c - a
    local freed = 0
    local j = start
    while j <= len do
      freed = freed + e[j + 1]
      if freed >= need then
        retry = ceil((e[j] + window_us - now_us) / 1000)
        break
      end
      j = j + 2
    end
  end
  return 0, a - sum, reset, retry, 0
end

local out = { now_ms }
local INF = math.huge
if ARGV[2] == 'p' then
  for i = 1, n do
    local ok, rem, reset, retry, delay = evaluate(i, 1)
    if ok == 1 then
      local _, r2, reset2 = evaluate(i, INF)
      rem, reset = r2, reset2
    end
    local o = 5 * i - 3
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, rem, reset, retry, delay
  end
  return out
end

local all = true
for i = 1, n do
  local o = 5 * i - 3
  out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = evaluate(i, cost)
  if out[o] == 0 then all = false end
end
if not all then
  -- nothing is written; a policy that would have allowed reports its state unchanged
  for i = 1, n do
    local o = 5 * i - 3
    if out[o] == 1 then
      local _, rem, reset = evaluate(i, INF)
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = rem, reset, 0, 0
    end
  end
  return out
end

local hset = {}
local expires = 0
for i = 1, n do
  local k, exp = K[i], 0
  hset[2 * i - 1] = F[i]
  if k == 'tb' or k == 'lb' then
    hset[2 * i] = fmt('%.0f', W1[i])
    exp = W1[i]
  elseif k == 'fw' then
    hset[2 * i] = fmt('%.0f:%.0f', W1[i], W2[i])
    exp = (W1[i] + 1) * B[i] * 1000
  elseif k == 'sw' then
    hset[2 * i] = fmt('%.0f:%.0f:%.0f', W1[i], W2[i], W3[i])
    exp = (W1[i] + 2) * B[i] * 1000
  else
    local key, e, start = LK[i], E[i], W1[i]
    local len = #e
    if start > 1 then redis.call('LTRIM', key, start - 1, -1) end
    if start <= len and e[len - 1] == now_us then
      redis.call('LSET', key, -1, fmt('%.0f', e[len] + cost))
    else
      redis.call('RPUSH', key, fmt('%.0f', now_us), fmt('%.0f', cost))
    end
    hset[2 * i] = fmt('%.0f', W2[i])
    exp = now_us + B[i] * 1000
  end
  if exp > expires then expires = exp end
end
redis.call('HSET', KEYS[1], unpack(hset))
local ttl = max(1, ceil((expires - now_us) / 1000))
redis.call('PEXPIRE', KEYS[1], ttl)
for i = 1, n do
  if LK[i] then redis.call('PEXPIRE', LK[i], ttl) end
end
return out
`;

/** Every script Sluice runs. */
export const SCRIPTS = {
  decide: { script: decide, sha: "74d0500fbf6a07fbd9754756efb65ea486d5eef1" },
} as const satisfies Record<string, Script>;
