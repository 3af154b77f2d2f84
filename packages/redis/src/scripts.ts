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
 * standing for "never" (`retryAfterMs: Infinity`).
 *
 * Layout in Redis: one hash per identifier, `KEYS[1]` = `{prefix:key}`, one field per policy
 * (`<name>|<kind>`) holding `tat` (buckets), `window:count` (fixed window),
 * `window:previous:current` (sliding window) or `sum` (sliding log); plus one list per sliding
 * log (`KEYS[2..]`, flat `time_us, cost, ...`, oldest first).
 *
 * @module
 */
import { type Policy, SluiceConfigError } from "@sluice/core";
import { sha1 } from "./sha1.js";

/** A Lua script and the SHA-1 that `EVALSHA` names it by. */
export interface Script {
  readonly script: string;
  readonly sha: string;
}

/** The hash field holding when (µs, script clock) the hash's TTL runs out; never a policy's field (those contain "|"). */
const EXPIRES_FIELD = "@expires";
/** How far past the state's expiry the TTL is set, so a hot key needs a PEXPIRE about once a second, not per request. */
const TTL_SLACK_US = 1_000_000;

/** The most policies one Redis limiter may have (Lua allows 200 locals per function). */
export const MAX_REDIS_POLICIES = 12;

const KIND_CODE: Readonly<Record<Policy["kind"], string>> = {
  fixedWindow: "fw",
  slidingWindow: "sw",
  slidingLog: "sl",
  tokenBucket: "tb",
  leakyBucket: "lb",
};

/** The hash field of a policy: its name and its kind, so a change of algorithm starts empty. */
export function fieldOf(policy: Policy): string {
  return `${policy.name}|${KIND_CODE[policy.kind]}`;
}

/** A Lua string literal (policy names are visible ASCII; JSON's escapes are valid Lua). */
const str = (s: string) => JSON.stringify(s);
/** An integer constant, written out in full (String() never uses exponents below 1e21). */
const int = (n: number) => {
  if (!Number.isSafeInteger(n)) throw new SluiceConfigError(`[sluice] [redis] not a safe integer in a script: ${n}`);
  return String(n);
};

interface Part {
  /** Reads the state (from HMGET's reply `v`, and the log's list). */
  read: string;
  /** `local function pI(c) ... end`: allowed, remaining, resetAt, retryAfterMs, delayMs. */
  evaluate: string;
  /** The HSET value expression after an allowed request. */
  value: string;
  /** When (µs) the written state is empty again. */
  expiresUs: string;
  /** Extra writes (the log's list). */
  write: string;
}

function part(policy: Policy, i: number, logKey: number): Part {
  const v = `v[${i}]`;
  switch (policy.kind) {
    case "tokenBucket":
    case "leakyBucket": {
      const T = policy.emissionIntervalUs;
      const BT = policy.burst * T;
      const QT = policy.queue * T;
      return {
        read: `local s${i} = tonumber(${v})\nlocal n${i}`,
        evaluate: `local function p${i}(c)
  local tat = s${i}
  if tat == nil or tat < now_us then tat = now_us end
  if c <= ${int(policy.burst + policy.queue)} then
    local new_tat = tat + c * ${int(T)}
    local diff = now_us - (new_tat - ${int(BT)})
    if diff >= 0 then
      n${i} = new_tat
      return 1, floor(diff / ${int(T)}), ceil(new_tat / 1000), 0, 0
    end
    if diff >= -${int(QT)} then
      n${i} = new_tat
      return 1, 0, ceil(new_tat / 1000), 0, ceil(-diff / 1000)
    end
    return 0, max(0, floor((now_us - tat + ${int(BT)}) / ${int(T)})), ceil(tat / 1000), ceil((-diff - ${int(QT)}) / 1000), 0
  end
  return 0, max(0, floor((now_us - tat + ${int(BT)}) / ${int(T)})), ceil(tat / 1000), -1, 0
end`,
        value: `fmt('%.0f', n${i})`,
        expiresUs: `n${i}`,
        write: "",
      };
    }
    case "fixedWindow": {
      const L = policy.limit;
      const W = policy.windowMs;
      return {
        read: `local s${i}a, s${i}b
if ${v} then
  local p = find(${v}, ':', 1, true)
  s${i}a = tonumber(sub(${v}, 1, p - 1))
  s${i}b = tonumber(sub(${v}, p + 1))
end
local n${i}a, n${i}b`,
        evaluate: `local function p${i}(c)
  local idx = floor(now_ms / ${int(W)})
  local count = 0
  if s${i}a == idx then count = s${i}b end
  local reset = (idx + 1) * ${int(W)}
  if c <= ${int(L)} - count then
    n${i}a = idx
    n${i}b = count + c
    return 1, ${int(L)} - count - c, reset, 0, 0
  end
  if c <= ${int(L)} then return 0, ${int(L)} - count, reset, reset - now_ms, 0 end
  return 0, ${int(L)} - count, reset, -1, 0
end`,
        value: `fmt('%.0f:%.0f', n${i}a, n${i}b)`,
        expiresUs: `(n${i}a + 1) * ${int(W * 1000)}`,
        write: "",
      };
    }
    case "slidingWindow": {
      const L = policy.limit;
      const W = policy.windowMs;
      return {
        read: `local s${i}a, s${i}b, s${i}c
if ${v} then
  local p = find(${v}, ':', 1, true)
  local q = find(${v}, ':', p + 1, true)
  s${i}a = tonumber(sub(${v}, 1, p - 1))
  s${i}b = tonumber(sub(${v}, p + 1, q - 1))
  s${i}c = tonumber(sub(${v}, q + 1))
end
local n${i}a, n${i}b, n${i}c`,
        evaluate: `local function p${i}(c)
  local idx = floor(now_ms / ${int(W)})
  local r = now_ms - idx * ${int(W)}
  local prev, cur = 0, 0
  if s${i}a == idx then
    prev = s${i}b
    cur = s${i}c
  elseif s${i}a == idx - 1 then
    prev = s${i}c
  end
  local weighted = prev * (${int(W)} - r)
  local left = floor((${int(L * W)} - weighted) / ${int(W)})
  if c <= ${int(L)} - cur and weighted <= (${int(L)} - cur - c) * ${int(W)} then
    n${i}a = idx
    n${i}b = prev
    n${i}c = cur + c
    return 1, max(0, left - cur - c), (idx + 2) * ${int(W)}, 0, 0
  end
  local reset = now_ms
  if cur > 0 then reset = (idx + 2) * ${int(W)} elseif prev > 0 then reset = (idx + 1) * ${int(W)} end
  local remaining = max(0, left - cur)
  if c > ${int(L)} then return 0, remaining, reset, -1, 0 end
  local k = ${int(L)} - cur - c
  if k >= 0 and prev > 0 then
    local m = floor((k * ${int(W)}) / prev)
    if m > 0 then return 0, remaining, reset, ${int(W)} - r - m, 0 end
  end
  local retry = ${int(W)} - r
  if cur > 0 then retry = retry + max(0, ${int(W)} - floor(((${int(L)} - c) * ${int(W)}) / cur)) end
  return 0, remaining, reset, retry, 0
end`,
        value: `fmt('%.0f:%.0f:%.0f', n${i}a, n${i}b, n${i}c)`,
        expiresUs: `(n${i}a + 2) * ${int(W * 1000)}`,
        write: "",
      };
    }
    case "slidingLog": {
      const L = policy.limit;
      const Wus = policy.windowMs * 1000;
      const key = `KEYS[${logKey}]`;
      return {
        read: `local s${i} = tonumber(${v}) or 0
local e${i} = {}
do
  local raw = redis.call('LRANGE', ${key}, 0, -1)
  for j = 1, #raw do e${i}[j] = tonumber(raw[j]) end
end
local n${i}start, n${i}sum`,
        evaluate: `local function p${i}(c)
  local e = e${i}
  local len = #e
  local cutoff = now_us - ${int(Wus)}
  local sum = s${i}
  local start = 1
  while start <= len and e[start] <= cutoff do
    sum = sum - e[start + 1]
    start = start + 2
  end
  if c <= ${int(L)} - sum then
    n${i}start = start
    n${i}sum = sum + c
    return 1, ${int(L)} - sum - c, ceil((now_us + ${int(Wus)}) / 1000), 0, 0
  end
  local reset = ceil(now_us / 1000)
  if start <= len then reset = ceil((e[len - 1] + ${int(Wus)}) / 1000) end
  if c > ${int(L)} then return 0, ${int(L)} - sum, reset, -1, 0 end
  local need = sum + c - ${int(L)}
  local freed = 0
  local j = start
  while j <= len do
    freed = freed + e[j + 1]
    if freed >= need then return 0, ${int(L)} - sum, reset, ceil((e[j] + ${int(Wus)} - now_us) / 1000), 0 end
    j = j + 2
  end
  return 0, ${int(L)} - sum, reset, -1, 0
end`,
        value: `fmt('%.0f', n${i}sum)`,
        expiresUs: `now_us + ${int(Wus)}`,
        write: `do
  local e = e${i}
  local len = #e
  if n${i}start > 1 then redis.call('LTRIM', ${key}, n${i}start - 1, -1) end
  if n${i}start <= len and e[len - 1] == now_us then
    redis.call('LSET', ${key}, -1, fmt('%.0f', e[len] + cost))
  else
    redis.call('RPUSH', ${key}, fmt('%.0f', now_us), fmt('%.0f', cost))
  end
end`,
      };
    }
  }
}

/**
 * Generates the `decide` script for a list of policies (in order; sliding logs use `KEYS[2..]` in
 * the order they appear). ARGV: cost; then, optionally, the mode (`"c"` consume, the default, or
 * `"p"` peek) and a fixed now in µs (test stores only; without it the script reads `TIME`). Returns `{ now_ms, then per policy: allowed (1/0), remaining, resetAt,
 * retryAfterMs (-1 = never), delayMs }`.
 *
 * @example
 * ```ts
 * const { script, sha } = decideScript([tokenBucket({ capacity: 10, refillRate: 1 })]);
 * ```
 */
export function decideScript(policies: readonly Policy[]): Script {
  if (policies.length === 0 || policies.length > MAX_REDIS_POLICIES) {
    throw new SluiceConfigError(
      `[sluice] [redis] a Redis limiter takes 1 to ${MAX_REDIS_POLICIES} limits; got ${policies.length}`,
    );
  }
  let logKey = 1;
  const parts = policies.map((p, index) => part(p, index + 1, p.kind === "slidingLog" ? ++logKey : 0));
  const n = policies.length;
  const each = (f: (i: number) => string, sep: string) => Array.from({ length: n }, (_, k) => f(k + 1)).join(sep);
  const result = `{ now_ms, ${each((i) => `o${i}, r${i}, t${i}, y${i}, d${i}`, ", ")} }`;
  const logs = parts.map((p) => p.write).filter((w) => w !== "");
  const logKeys = policies.flatMap((p, k) => (p.kind === "slidingLog" ? [k] : [])).map((_, j) => `KEYS[${j + 2}]`);
  const lines = [
    `-- Sluice decide: ${policies.map((p) => `${p.kind} ${p.name}`).join(", ")}`,
    "local floor, ceil, max = math.floor, math.ceil, math.max",
    "local find, sub, fmt = string.find, string.sub, string.format",
    "local cost = tonumber(ARGV[1])",
    "local now_us",
    "if ARGV[3] then",
    "  now_us = tonumber(ARGV[3])",
    "else",
    "  local t = redis.call('TIME')",
    "  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])",
    "end",
    "local now_ms = floor(now_us / 1000)",
    `local v = redis.call('HMGET', KEYS[1], ${policies.map((p) => str(fieldOf(p))).join(", ")}, '${EXPIRES_FIELD}')`,
    `local expires_at = tonumber(v[${policies.length + 1}])`,
    ...parts.map((p) => p.read),
    ...parts.map((p) => p.evaluate),
    "if ARGV[2] == 'p' then",
    // peek: would a cost-1 request pass; remaining/resetAt of the state now (an infinite cost takes the denial path)
    each((i) => `  local o${i}, r${i}, t${i}, y${i}, d${i} = p${i}(1)\n  if o${i} == 1 then\n    local _\n    _, r${i}, t${i} = p${i}(math.huge)\n  end`, "\n"),
    `  return ${result}`,
    "end",
    each((i) => `local o${i}, r${i}, t${i}, y${i}, d${i} = p${i}(cost)`, "\n"),
    `if ${each((i) => `o${i} == 1`, " and ")} then`,
    ...logs,
    `  local expires = max(${parts.map((p) => p.expiresUs).join(", ")})`,
    // The hash's TTL is pushed past the state's expiry with some slack, and only when the state
    // would outlive it: a hot key is not sent a PEXPIRE on every request.
    "  if expires_at and expires_at >= expires then",
    `    redis.call('HSET', KEYS[1], ${policies.map((p, k) => `${str(fieldOf(p))}, ${parts[k]!.value}`).join(", ")})`,
    "  else",
    `    expires_at = expires + ${int(TTL_SLACK_US)}`,
    `    redis.call('HSET', KEYS[1], ${policies.map((p, k) => `${str(fieldOf(p))}, ${parts[k]!.value}`).join(", ")}, '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
    "    redis.call('PEXPIRE', KEYS[1], max(1, ceil((expires_at - now_us) / 1000)))",
    "  end",
    // a log's list can be recreated empty (all its entries expired): its TTL is set every time
    ...logKeys.map((key) => `  redis.call('PEXPIRE', ${key}, max(1, ceil((expires_at - now_us) / 1000)))`),
    `  return ${result}`,
    "end",
  ];
  if (n > 1) {
    // nothing was written; a policy that would have allowed reports its state unchanged
    lines.push(each((i) => `if o${i} == 1 then\n  local _\n  _, r${i}, t${i} = p${i}(math.huge)\n  y${i}, d${i} = 0, 0\nend`, "\n"));
  }
  lines.push(`return ${result}`, "");
  const script = lines.join("\n");
  return { script, sha: sha1(script) };
}
