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
-- Mirrors packages/core/src/engine.ts line by line; the conformance suite and the recorded vectors
-- keep the two identical. Every number is an integer below 2^53 (Lua numbers are doubles).
--
-- KEYS[1]   the identifier's hash: one field per number of state ("<name>|<kind>|<field>")
-- KEYS[2..] one list per sliding log: flat [time_us, cost, time_us, cost, ...], oldest first
-- ARGV[1]   cost (consume) ; ARGV[2] mode: "c" consume, "p" peek
-- ARGV[3]   "" (use the server's TIME) or a fixed now in µs (test stores only)
-- ARGV[4]   number of policies, then 6 per policy: kind, name, a, b, c, key index
--           fw/sw/sl: a = limit, b = window ms ; tb/lb: a = emission interval µs, b = burst, c = queue
-- Returns   { now_ms, then per policy: allowed (1/0), remaining, resetAt ms, retryAfterMs (-1 = never), delayMs }

local cost = tonumber(ARGV[1])
local mode = ARGV[2]
local now_us
if ARGV[3] ~= '' then
  now_us = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local INF = math.huge

local function num(x) return string.format('%.0f', x) end
local function ceil_ms(us) return math.ceil(us / 1000) end

local n = tonumber(ARGV[4])
local hash = KEYS[1]
local P = {}
local fields = {}
local WIDTH = { fw = { 'i', 'c' }, sw = { 'i', 'p', 'c' }, sl = { 's' }, tb = { 't' }, lb = { 't' } }
for i = 1, n do
  local b = 4 + (i - 1) * 6
  local p = { kind = ARGV[b + 1], a = tonumber(ARGV[b + 3]), b = tonumber(ARGV[b + 4]), c = tonumber(ARGV[b + 5]), key = tonumber(ARGV[b + 6]) }
  p.f = {}
  for _, f in ipairs(WIDTH[p.kind]) do
    local name = ARGV[b + 2] .. '|' .. p.kind .. '|' .. f
    p.f[f] = name
    fields[#fields + 1] = name
  end
  P[i] = p
end
local values = redis.call('HMGET', hash, unpack(fields))
local k = 1
for i = 1, n do
  local p = P[i]
  p.s = {}
  for _, f in ipairs(WIDTH[p.kind]) do
    p.s[f] = tonumber(values[k])
    k = k + 1
  end
  if p.kind == 'sl' then
    local raw = redis.call('LRANGE', KEYS[p.key], 0, -1)
    local e = {}
    for j = 1, #raw do e[j] = tonumber(raw[j]) end
    p.e = e
  end
end

-- Each returns allowed, remaining, resetAt, retryAfterMs (-1 = never), delayMs, and the new state (allowed only).

local function fixed(p, c)
  local limit, W = p.a, p.b
  local now_ms = math.floor(now_us / 1000)
  local idx = math.floor(now_ms / W)
  local count = 0
  if p.s.i == idx then count = p.s.c or 0 end
  local reset = (idx + 1) * W
  if c <= limit - count then
    return true, limit - count - c, reset, 0, 0, { i = idx, c = count + c }
  end
  local retry = -1
  if c <= limit then retry = reset - now_ms end
  return false, limit - count, reset, retry, 0
end

local function sliding_retry(W, limit, r, prev, cur, c)
  local k2 = limit - cur - c
  if k2 >= 0 and prev > 0 then
    local m = math.floor((k2 * W) / prev)
    if m > 0 then return W - r - m end
  end
  local to_next = W - r
  if cur == 0 then return to_next end
  return to_next + math.max(0, W - math.floor(((limit - c) * W) / cur))
end

local function sliding(p, c)
  local limit, W = p.a, p.b
  local now_ms = math.floor(now_us / 1000)
  local idx = math.floor(now_ms / W)
  local r = now_ms - idx * W
  local prev, cur = 0, 0
  if p.s.i == idx then
    prev = p.s.p or 0
    cur = p.s.c or 0
  elseif p.s.i == idx - 1 then
    prev = p.s.c or 0
  end
  local weighted = prev * (W - r)
  local left = math.floor((limit * W - weighted) / W)
  if c <= limit - cur and weighted <= (limit - cur - c) * W then
    local after = cur + c
    return true, math.max(0, left - after), (idx + 2) * W, 0, 0, { i = idx, p = prev, c = after }
  end
  local reset = now_ms
  if cur > 0 then reset = (idx + 2) * W elseif prev > 0 then reset = (idx + 1) * W end
  local retry = -1
  if c <= limit then retry = sliding_retry(W, limit, r, prev, cur, c) end
  return false, math.max(0, left - cur), reset, retry, 0
end

local function log(p, c)
  local limit = p.a
  local window_us = p.b * 1000
  local cutoff = now_us - window_us
  local e = p.e
  local len = #e
  local sum = p.s.s or 0
  local start = 1
  while start <= len and e[start] <= cutoff do
    sum = sum - e[start + 1]
    start = start + 2
  end
  if c <= limit - sum then
    return true, limit - sum - c, ceil_ms(now_us + window_us), 0, 0, { start = start, s = sum + c }
  end
  local reset = ceil_ms(now_us)
  if start <= len then reset = ceil_ms(e[len - 1] + window_us) end
  local retry = -1
  if c <= limit then
    local need = sum + c - limit
    local freed = 0
    local j = start
    while j <= len do
      freed = freed + e[j + 1]
      if freed >= need then
        retry = math.ceil((e[j] + window_us - now_us) / 1000)
        break
      end
      j = j + 2
    end
  end
  return false, limit - sum, reset, retry, 0
end

local function gcra(p, c)
  local T, burst, queue = p.a, p.b, p.c
  local tat = now_us
  if p.s.t ~= nil and p.s.t > now_us then tat = p.s.t end
  local remaining_now = math.max(0, math.floor((now_us - tat + burst * T) / T))
  if c <= burst + queue then
    local new_tat = tat + c * T
    local diff = now_us - (new_tat - burst * T)
    if diff >= 0 then
      return true, math.floor(diff / T), ceil_ms(new_tat), 0, 0, { t = new_tat }
    end
    if diff >= -queue * T then
      return true, 0, ceil_ms(new_tat), 0, math.ceil(-diff / 1000), { t = new_tat }
    end
    return false, remaining_now, ceil_ms(tat), math.ceil((-diff - queue * T) / 1000), 0
  end
  return false, remaining_now, ceil_ms(tat), -1, 0
end

local EVAL = { fw = fixed, sw = sliding, sl = log, tb = gcra, lb = gcra }
local function evaluate(p, c) return { EVAL[p.kind](p, c) } end
-- the state now, reported as allowed: an infinite cost takes every algorithm's denial path
local function state_now(p)
  local r = evaluate(p, INF)
  r[1] = true
  r[4] = 0
  return r
end

local results = {}
if mode == 'c' then
  local all = true
  for i = 1, n do
    results[i] = evaluate(P[i], cost)
    if not results[i][1] then all = false end
  end
  if all then
    local hset = {}
    local expires = 0
    for i = 1, n do
      local p, st = P[i], results[i][6]
      local exp
      if p.kind == 'fw' then
        hset[#hset + 1] = p.f.i; hset[#hset + 1] = num(st.i)
        hset[#hset + 1] = p.f.c; hset[#hset + 1] = num(st.c)
        exp = (st.i + 1) * p.b * 1000
      elseif p.kind == 'sw' then
        hset[#hset + 1] = p.f.i; hset[#hset + 1] = num(st.i)
        hset[#hset + 1] = p.f.p; hset[#hset + 1] = num(st.p)
        hset[#hset + 1] = p.f.c; hset[#hset + 1] = num(st.c)
        exp = (st.i + 2) * p.b * 1000
      elseif p.kind == 'sl' then
        local key, e = KEYS[p.key], p.e
        if st.start > 1 then redis.call('LTRIM', key, st.start - 1, -1) end
        local len = #e
        if st.start <= len and e[len - 1] == now_us then
          redis.call('LSET', key, -1, num(e[len] + cost))
        else
          redis.call('RPUSH', key, num(now_us), num(cost))
        end
        hset[#hset + 1] = p.f.s; hset[#hset + 1] = num(st.s)
        exp = now_us + p.b * 1000
      else
        hset[#hset + 1] = p.f.t; hset[#hset + 1] = num(st.t)
        exp = st.t
      end
      if exp > expires then expires = exp end
    end
    redis.call('HSET', hash, unpack(hset))
    local ttl = math.max(1, ceil_ms(expires - now_us))
    redis.call('PEXPIRE', hash, ttl)
    for i = 1, n do
      if P[i].kind == 'sl' then redis.call('PEXPIRE', KEYS[P[i].key], ttl) end
    end
  else
    for i = 1, n do
      if results[i][1] then results[i] = state_now(P[i]) end
    end
  end
else
  for i = 1, n do
    local r = evaluate(P[i], 1)
    if r[1] then
      local s = state_now(P[i])
      r[2] = s[2]
      r[3] = s[3]
    end
    results[i] = r
  end
end

local out = { math.floor(now_us / 1000) }
for i = 1, n do
  local r = results[i]
  local allowed = 0
  if r[1] then allowed = 1 end
  out[#out + 1] = allowed
  out[#out + 1] = r[2]
  out[#out + 1] = r[3]
  out[#out + 1] = r[4]
  out[#out + 1] = r[5]
end
return out
`;

/** Every script Sluice runs. */
export const SCRIPTS = {
  decide: { script: decide, sha: "0338379880826ed513e520b3629a71b40f697e8e" },
} as const satisfies Record<string, Script>;
