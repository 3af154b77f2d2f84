/**
 * The Lua scripts. One `decide` script is generated per policy configuration when a store binds a
 * namespace: the policies' constants (limits, windows, emission intervals, field names) are
 * written into straight-line code, so each call sends only the cost, the mode and the test clock,
 * and Redis runs no generic dispatch. Each script comes with the SHA-1 `EVALSHA` names it by
 * (computed here in pure JavaScript; a test checks it against `node:crypto` for every generated
 * script). After a `SCRIPT FLUSH` the store sends the script once with `EVAL`.
 *
 * Every generated script mirrors core's algorithms (`packages/core/src/algorithms/<kind>/`); the
 * conformance suite, the property tests (many random configurations, so many generated scripts)
 * and the recorded vectors keep them identical. No script flags (`#!lua flags=...`), so they run on
 * stock Redis 6.2+ and on Upstash alike. Every number is an integer below 2^53, written with
 * `%.0f` (Lua's `tostring` would round to 14 digits), or with `%d` where it is below 2^31
 * (`digits()` in `algorithms/definition.ts`: a window's index and count); results are integers
 * only (Redis truncates Lua numbers), with -1 standing for "never" (`retryAfterMs: Infinity`).
 * Digits a pattern captured (`%d+`) and `TIME`'s two fields become numbers by arithmetic
 * (`window + 0`): the same conversion as `tonumber`, which in Lua 5.1 converts twice (it checks,
 * then converts). A value that may not be digits (a whole field, an argument) still goes through
 * `tonumber`, which answers nil where `+ 0` would raise.
 *
 * This file is generic: each kind's Lua (its stored value, its decision, its refund and release)
 * is in `algorithms/<kind>.ts`, looked up in the `LUA_ALGORITHMS` registry; nothing here branches
 * on a kind.
 *
 * Layout in Redis: ONE hash per identifier, `KEYS[1]` = `{<storageKey>}` (see core's `storageKey`),
 * one field per policy (core's `policyField`, `<name>|<kind code>`) holding what its algorithm
 * stores (see `algorithms/<kind>.ts`), one per penalty box (`<policyField>|block`), plus
 * `@expires` (when the hash's TTL runs out), and the key's own two (core's `OVERRIDE_FIELD` and
 * `BLOCK_FIELD`): `|override`, `"<end µs, 0: none>,<body>"`, and `|block`, the manual block's end
 * (µs), both written by the `control` script ({@link controlScript}) and read by every decide
 * script in its one HMGET. Losing the key, any field or `@expires` (eviction, `DEL`, `HDEL`)
 * therefore only forgets state. A field that does not parse reads as empty.
 *
 * Quotas per key: each policy's values that depend on its quota (a window's limit, a bucket's
 * emission interval, burst × T, queue × T, largest cost) are locals of the script, set from the
 * policy's constants and recomputed once, before anything reads them, under a `scale` or `quotas`
 * override, with core's `withQuota` arithmetic (the same IEEE operations in the same order).
 *
 * Local names in the generated Lua: each policy is `<kind code><position>` (`tb1`, `sw2`,
 * `fw3`...: the end of core's `policyField`), and its locals say what they hold (`fw3_window`,
 * `fw3_count`, `tb1_tat`).
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
 * general code, which decides from scratch with the `decide` functions. The two cannot drift
 * apart: both are assembled here from the same pieces of each algorithm's Lua (the state now,
 * whether `c` units fit, the state after them, the allowed answer; see `algorithms/definition.ts`),
 * the fast path with `cost` where `<p>_decide` has `c`.
 *
 * {@link decideScript} lists its parts in the order the script runs them, each a function named for
 * the Lua it writes: the {@link header} and its reads, the {@link keyOverride} (and
 * {@link overrideQuotas}), the {@link stateReads}, the {@link fastPath}, then the general code:
 * {@link decideFunctions}, {@link refundMode}, {@link releaseMode}, {@link blockBranch},
 * {@link reserveMode}, {@link peekMode} and the {@link denial} (with {@link penaltyBoxStart}).
 *
 * @module
 */
import { SluiceConfigError } from "@sluice/core";
import { BLOCK_FIELD, MAX_POLICIES, OVERRIDE_FIELD, type Policy, blockField as blockFieldOf, maxQuota, policyField } from "@sluice/core/store";
import { type LuaPart, indent, int, luaOf, str } from "./algorithms/index.js";
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

/** Number.MAX_SAFE_INTEGER, written out (a stored time or quota above it is malformed, as in core). */
const MAX_SAFE = int(Number.MAX_SAFE_INTEGER);

/**
 * Lua reading an `|override` field's value (`value`, a string) as core's `liveOverride` does: sets
 * the locals `unlimited` (true for `u`), `scale` or `quotas` (a table of name to quota) when the
 * override is live at `now_us` and well formed, and `till` (its end, µs; 0: never); else none of
 * the three. A live override has an end of 0 or later than now; a scale is a positive finite
 * number, a quota a positive safe integer (the last of a name's entries counts).
 */
function parseOverride(value: string): string {
  // core's overrideFromText/liveOverride, in Lua
  return `local end_digits, body = match(${value}, '^(%d+),(.*)$')
if end_digits then till = end_digits + 0 end
if till and till <= ${MAX_SAFE} and (till == 0 or till > now_us) then
  local kind = sub(body, 1, 2)
  if body == 'u' then
    unlimited = true
  elseif kind == 's,' then
    scale = tonumber(sub(body, 3))
    if scale and not (scale > 0 and scale < math.huge) then scale = nil end
  elseif kind == 'q,' then
    quotas = {}
    for part in gmatch(sub(body, 3) .. ',', '([^,]*),') do
      local name, quota = match(part, '^(.*)=([^=]*)$')
      quota = tonumber(quota)
      if not name or name == '' or not quota or quota < 1 or quota > ${MAX_SAFE} or quota ~= floor(quota) then
        quotas = nil
        break
      end
      quotas[name] = quota
    end
  end
end`;
}

/** `text` with every line indented (by two spaces unless told), as one entry of a list of lines; none for empty text. */
const block = (text: string, by = "  "): string[] => (text === "" ? [] : [indent(text, by)]);

/**
 * `local function <p>_decide(c)`: returns allowed, remaining, reset_at, retry_after, delay,
 * refill_at. Assembled from the same pieces as the fast path (see `algorithms/definition.ts`).
 */
function decideFunction(p: string, part: LuaPart): string {
  return [
    `local function ${p}_decide(c)`,
    ...block(part.now),
    ...block(part.take("c")),
    `  if ${part.fits("c")} then`,
    ...block(part.allowed, "    "),
    `    return ${part.values("c")}`,
    "  end",
    ...block(part.denied("c")),
    "end",
  ].join("\n");
}

/**
 * The consume fast path's test of one policy, run only while every earlier policy passed: the same
 * `now`, `take` and `fits` as its decide function, for `cost`. Sets `pass` and the state to write
 * (when `pass` ends false nothing written here is used: the general code decides again).
 */
function passBlock(part: LuaPart): string {
  return [part.now, part.take("cost"), `pass = ${part.fits("cost")}`].filter((text) => text !== "").join("\n");
}

/**
 * The expressions of a comma-separated Lua list, split at the commas outside any parentheses,
 * braces or brackets: `"1, max(a, b), 0"` → `["1", "max(a, b)", "0"]`.
 */
export function luaListItems(list: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const ch = list[i];
    if (ch === "(" || ch === "{" || ch === "[") depth++;
    else if (ch === ")" || ch === "}" || ch === "]") depth--;
    else if (ch === "," && depth === 0) {
      items.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  items.push(list.slice(start).trim());
  return items;
}

/**
 * The four numbers a policy contributes to the fast path's reply (see {@link decideScript}):
 * remaining, reset_at, delay and refill_at of its allowed answer. The other three of the full
 * form are constants there (allowed 1, retry_after 0, blocked_until 0), so the fast path does not
 * send them: each number of a reply costs Redis a conversion, a noticeable part of a short
 * script's time.
 */
function compactValues(kind: string, values: string): string {
  const items = luaListItems(values);
  if (items.length !== 6 || items[0] !== "1" || items[3] !== "0") {
    // an algorithm's Lua out of shape (a bug of ours, never the caller's): refused before any script exists
    throw new SluiceConfigError(`[sluice] [redis] policies: ${kind}'s allowed answer must be "1, remaining, reset_at, 0, delay, refill_at"; got ${values}`, {
      option: "policies",
    });
  }
  return [items[1], items[2], items[4], items[5]].join(", ");
}

/** A policy's part of the fast path's reply: its new state (`state`) or its answer's numbers, as a Lua list. */
interface FastReply {
  readonly state: boolean;
  readonly list: string;
}

/**
 * A policy's part of the fast path's reply: its new state where its algorithm has a
 * {@link StateReply} for it (`state`: the store answers from it with core's `allowedFromState`), else the
 * four numbers of its answer ({@link compactValues}).
 */
function fastReply(policy: Policy, p: string, part: LuaPart): FastReply {
  const reply = luaOf(policy).stateReply?.(policy);
  if (reply === undefined) return { state: false, list: compactValues(policy.kind, part.values("cost")) };
  const items = reply.lua(p);
  if (items.length !== reply.width) {
    // an algorithm's Lua out of shape (a bug of ours, never the caller's): refused before any script exists
    throw new SluiceConfigError(`[sluice] [redis] policies: ${policy.kind}'s state reply must send ${reply.width} numbers; got ${items.join(", ")}`, {
      option: "policies",
    });
  }
  return { state: true, list: items.join(", ") };
}

/** The local-name prefix of the policy at position `i` (1-based): its kind's code (core's `policyField` ends with it) and `i`. */
function prefixOf(policy: Policy, i: number): string {
  return `${policyField(policy).slice(policy.name.length + 1)}${i}`;
}

/** A policy's penalty box in a decide script: its local prefix, its settings and its field. */
interface PenaltyBox {
  readonly p: string;
  readonly block: NonNullable<Policy["block"]>;
  readonly field: string;
}

/** What the parts of one decide script share: the policies, their Lua, and the text several parts repeat. */
interface DecideContext {
  readonly policies: readonly Policy[];
  /** Each policy's local-name prefix ({@link prefixOf}). */
  readonly names: readonly string[];
  readonly parts: readonly LuaPart[];
  /** What each policy's fast-path reply is: its new state (the store answers from it) or its answer. */
  readonly fastReplies: readonly FastReply[];
  /** The penalty boxes: a field of their own per policy, read after '@expires', '|override' and '|block'. */
  readonly blocked: readonly PenaltyBox[];
  /** The buckets' marks of an allowed consume, appended to the reply (0 in every other reply). */
  readonly marks: readonly { p: string; mark: string }[];
  /** Whether a policy holds leases: the script then has a release mode (`'x'`) and reads a lease id. */
  readonly concurrent: boolean;
  /**
   * The modes that answer as a peek: a peek, a refund, a reservation that grants nothing, and a
   * release (without a concurrency cap there is no release mode, and 'x' is a consume).
   */
  readonly peekLike: string;
  /** One 0 per mark, for every reply but an allowed consume's. */
  readonly noMarks: string;
  /**
   * An unlimited override's reply: every policy allows with its whole (own) quota, nothing
   * counted; under a manual block, every policy is blocked until its end (and allows again then).
   */
  readonly unlimitedReply: readonly string[];
  /** Pushes the hash's TTL to `expires_at`, unless an override without an end keeps the hash (then it has none). */
  readonly pexpire: string;
  /**
   * The write of an allowed consume. The hash's TTL is pushed past the state's expiry with some
   * slack, and only when the state would outlive it: a hot key is not sent a PEXPIRE on every request.
   */
  readonly write: readonly string[];
}

/** The {@link DecideContext} of `policies`: each policy's Lua, built once, and the text the parts share. */
function decideContext(policies: readonly Policy[]): DecideContext {
  const names = policies.map((policy, k) => prefixOf(policy, k + 1));
  const parts = policies.map((policy, k) => luaOf(policy).part(policy, names[k]!, k + 1));
  const fastReplies = policies.map((policy, k) => fastReply(policy, names[k]!, parts[k]!));
  const fields = policies.map((policy, k) => `${str(policyField(policy))}, ${parts[k]!.value}`).join(", ");
  const blocked = policies.flatMap((policy, k) => (policy.block === undefined ? [] : [{ p: names[k]!, block: policy.block, field: blockFieldOf(policy) }]));
  const marks = policies.flatMap((policy, k) => (luaOf(policy).marks ? [{ p: names[k]!, mark: parts[k]!.mark ?? "0" }] : []));
  const concurrent = policies.some((policy) => luaOf(policy).leases);
  const noMarks = marks.map(() => ", 0").join("");
  const pexpire = "if not persist then redis.call('PEXPIRE', KEYS[1], max(1, ceil((expires_at - now_us) / 1000))) end";
  return {
    policies,
    names,
    parts,
    fastReplies,
    blocked,
    marks,
    concurrent,
    peekLike: `ARGV[2] == 'p' or ARGV[2] == 'r' or ARGV[2] == 'v'${concurrent ? " or ARGV[2] == 'x'" : ""}`,
    noMarks,
    unlimitedReply: [
      "if manual then",
      "  local ms = ceil((manual - now_us) / 1000)",
      "  local till = now_ms + ms",
      `  return { now_ms, ${policies.map(() => "0, 0, till, ms, 0, till, till").join(", ")}${noMarks}, override }`,
      "end",
      `return { now_ms, ${policies.map((policy) => `1, ${int(policy.limit)}, now_ms, 0, 0, now_ms, 0`).join(", ")}${noMarks}, override }`,
    ],
    pexpire,
    write: [
      `local expires = max(${parts.map((x) => x.expiresUs).join(", ")})`,
      "if expires_at and expires_at >= expires then",
      `  redis.call('HSET', KEYS[1], ${fields})`,
      "else",
      `  expires_at = expires + ${int(TTL_SLACK_US)}`,
      `  redis.call('HSET', KEYS[1], ${fields}, '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
      `  ${pexpire}`,
      "end",
      "if stale then redis.call('HDEL', KEYS[1], unpack(stale)) end",
    ],
  };
}

/** The general code's reply from one table per policy: `answer(r1, r2, ...)`. */
const answer = (results: string[]): string => `answer(${results.join(", ")})`;

/**
 * The script's head: what it is for, its arguments and reply (comments), the cost, the clock, the
 * lease, and the one HMGET that reads every policy's state, the key's override and manual block
 * and the penalty boxes.
 */
function header(c: DecideContext): string[] {
  const { policies, blocked, marks, concurrent } = c;
  const n = policies.length;
  return [
    `-- Sluice decide: ${policies.map((policy) => `${policy.kind} ${str(policy.name)}${policy.block === undefined ? "" : " with a penalty box"}`).join(", ")}`,
    `-- KEYS[1]: the identifier's hash, one field per policy (and per penalty box) plus '@expires', '${OVERRIDE_FIELD}' and '${BLOCK_FIELD}'.`,
    `-- ARGV: cost; optionally the mode ('c' consume, 'p' peek, 'r' refund${concurrent ? ", 'x' release" : ""}), now in µs (test stores and`,
    `-- clock 'client'; '' or absent: TIME) and, for a refund, when the request was charged (ms) then one mark per policy and one price per`,
    `-- policy (what a unit of the charge weighed)${concurrent ? "; for a consume" : "."}`,
    ...(concurrent ? ["-- or a release, the lease id (the slot an allowed request holds on each concurrency cap, or the one to free)."] : []),
    "-- Returns now_ms, then per policy: allowed (1/0), remaining, reset_at (ms), retry_after (ms, -1: never), delay (ms),",
    "-- refill_at (ms: when the available quota next grows), blocked_until (ms: a block denies until then; 0: none),",
    "-- (the fast path, a consume every policy allows, sends now_us, then per policy its new state or, for a bucket with",
    "-- a queue, a sliding log or a concurrency cap, remaining, reset_at, delay and refill_at),",
    `-- then ${marks.length === 0 ? "nothing more" : `one mark per bucket (${marks.map((m) => m.p).join(", ")}: its TAT plus refund shift right after an allowed consume, µs; 0 otherwise)`},`,
    "-- then the body of the key's live override, if it has one.",
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
    `local stored = redis.call('HMGET', KEYS[1], ${[...policies.map((policy) => str(policyField(policy))), `'${EXPIRES_FIELD}'`, `'${OVERRIDE_FIELD}'`, `'${BLOCK_FIELD}'`, ...blocked.map((b) => str(b.field))].join(", ")})`,
    `local expires_at = tonumber(stored[${n + 1}])`,
    ...blocked.flatMap((b, m) => [
      `-- ${b.p}'s penalty box: "blocked until (µs):offences"`,
      `local ${b.p}_block_until, ${b.p}_block_offences`,
      "do",
      `  local till, offences = match(stored[${n + 4 + m}] or '', '^(%d+):(%d+)$')`,
      `  if till then ${b.p}_block_until, ${b.p}_block_offences = till + 0, offences + 0 end`,
      "end",
    ]),
  ];
}

/**
 * Whether the fast path may take the call (`pass`), each policy's quota-derived locals, and the
 * key's manual block and override: an unlimited override answers here, a scale or quotas
 * override sets the quotas ({@link overrideQuotas}).
 */
function keyOverride(c: DecideContext): string[] {
  const { policies, parts, blocked, concurrent } = c;
  const n = policies.length;
  return [
    // The fast path below takes a consume that every policy allows (most calls). The modes are told
    // apart exactly as in the general code; a running penalty box or manual block (which sets `pass`
    // false as it is read) goes to the general code too, and an unlimited override answers before.
    `local pass = ARGV[2] ~= 'p' and ARGV[2] ~= 'r' and ARGV[2] ~= 'v'${concurrent ? " and ARGV[2] ~= 'x'" : ""}${blocked.map((b) => ` and (${b.p}_block_until or 0) <= now_us`).join("")}`,
    "-- each policy's quota-derived values, per key: the policy's own unless an override changes them",
    ...parts.map((x) => x.quota),
    "-- the key's override (the body of a live one; unlimited; persist: it has no end, so the hash must not expire),",
    "-- its manual block (its end, µs, while it runs) and the fields of either that ended (stale: dropped at the next write)",
    "local override, unlimited, persist, manual, stale",
    `if stored[${n + 3}] then`,
    `  manual = tonumber(stored[${n + 3}])`,
    "  if manual and manual > now_us then",
    "    pass = false",
    "  else",
    "    manual = nil",
    `    stale = { '${BLOCK_FIELD}' }`,
    "  end",
    "end",
    `if stored[${n + 2}] then`,
    "  local till, scale, quotas",
    indent(parseOverride(`stored[${n + 2}]`), "  "),
    "  if unlimited or scale or quotas then",
    "    override, persist = body, till == 0",
    "  elseif stale then",
    `    stale[2] = '${OVERRIDE_FIELD}'`,
    "  else",
    `    stale = { '${OVERRIDE_FIELD}' }`,
    "  end",
    // an unlimited override: nothing read, counted or written (a release still frees its lease below)
    `  if unlimited${concurrent ? " and ARGV[2] ~= 'x'" : ""} then`,
    "    -- an unlimited override: every policy allows with its whole quota, nothing is counted (nor refunded); a manual",
    "    -- block denies until its end",
    ...c.unlimitedReply.map((line) => `    ${line}`),
    "  end",
    ...overrideQuotas(c),
    "end",
  ];
}

/** Under a `scale` or `quotas` override, each policy's quota-derived locals recomputed for its effective quota. */
function overrideQuotas(c: DecideContext): string[] {
  return [
    "  if scale or quotas then",
    "    -- the effective quota q of each policy: floor(quota × scale), or its entry in quotas (none: its own), within [1, max]",
    "    local q",
    ...c.policies.flatMap((policy, k) => {
      const Q = int(policy.limit);
      const MAXQ = int(maxQuota(policy));
      return [
        `    -- ${c.names[k]}: quota ${Q}, at most ${MAXQ}`,
        `    if scale then q = floor(${Q} * scale) else q = quotas[${str(policy.name)}] end`,
        "    if q then",
        `      if q < 1 then q = 1 elseif q > ${MAXQ} then q = ${MAXQ} end`,
        `      if q ~= ${Q} then`,
        indent(c.parts[k]!.requota("q"), "        "),
        "      end",
        "    end",
      ];
    }),
    "  end",
  ];
}

/** Each policy's state, read from the HMGET reply into its locals. */
function stateReads(c: DecideContext): string[] {
  return ["", ...c.parts.flatMap((x) => [x.describe, x.read, ""])];
}

/**
 * The fast path: a consume that every policy allows (most calls) runs as straight-line code, with
 * no closure, no table of its own but the reply, and nothing a denial alone would need. A denial, a
 * peek, a refund, a release and a running block fall through to the general code.
 */
function fastPath(c: DecideContext): string[] {
  const { names, parts, fastReplies, marks } = c;
  return [
    "-- consume, every policy allowing: decided, written and answered right here",
    ...parts.flatMap((x, k) => [`if pass then -- ${names[k]}`, indent(passBlock(x), "  "), "end"]),
    "if pass then",
    ...parts.flatMap((x) => block(x.prepare)),
    ...c.write.map((line) => `  ${line}`),
    // the answer's locals, for a policy answered with its numbers rather than its state
    ...parts.flatMap((x, k) => (fastReplies[k]!.state ? [] : block(x.allowed))),
    `  return { now_us, ${[...fastReplies.map((r) => r.list), ...marks.map((m) => m.mark)].join(", ")}, override }`,
    "end",
    "",
  ];
}

/** The general code's start: `answer()`, which builds the full reply from tables, and each policy's decide function. */
function decideFunctions(c: DecideContext): string[] {
  return [
    "-- the general code: each policy's decide(c) (the same tests and answers as the fast path, for c units, and the",
    "-- denial) returns its 6 numbers; the reply is assembled from tables",
    "-- the reply: now_ms, then 7 numbers per policy (each policy's result is a table), then the marks (none charged here)",
    "-- and the override",
    "local function answer(...)",
    "  local out = { now_ms }",
    "  for _, r in ipairs({ ... }) do",
    "    for j = 1, 7 do out[#out + 1] = r[j] or 0 end",
    "  end",
    ...c.marks.map(() => "  out[#out + 1] = 0"),
    "  out[#out + 1] = override",
    "  return out",
    "end",
    ...c.parts.flatMap((x, k) => [`-- ${c.names[k]}`, ...(x.functions === "" ? [] : [x.functions]), decideFunction(c.names[k]!, x)]),
    "",
  ];
}

/** The refund mode (`'r'`): each policy gives units back for a charge, the fields it changed are written, and the peek answers. */
function refundMode(c: DecideContext): string[] {
  return [
    "if ARGV[2] == 'r' then",
    "  -- refund: give ARGV[1] units back for a charge at ARGV[4] ms with its marks and prices in ARGV[5..] (absent: the latest),",
    "  -- then answer as a peek",
    "  local refund_cost = cost",
    "  local charged_ms = tonumber(ARGV[4]) or -1",
    "  -- the windows: the one charged in (without a time, the current one)",
    "  local charged_window_ms = charged_ms",
    "  if charged_window_ms < 0 then charged_window_ms = now_ms end",
    `  -- what one unit of the charge weighed per policy (ARGV[${4 + c.policies.length} + i]: a bucket's emission interval then; 0 or absent: its own now)`,
    `  local function refund_price(i) return tonumber(ARGV[${4 + c.policies.length} + i]) or 0 end`,
    "  local writes, deletes = {}, {}",
    "  local function changed(field, value) writes[#writes + 1] = field; writes[#writes + 1] = value end",
    "  local function emptied(field) deletes[#deletes + 1] = field end",
    ...c.parts.flatMap((x) => block(x.refund)),
    "  if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end",
    "  if #deletes > 0 then redis.call('HDEL', KEYS[1], unpack(deletes)) end",
    "  if stale and #writes + #deletes > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end",
    "end",
  ];
}

/** The release mode (`'x'`, only with a concurrency cap): the lease is freed whatever the override, and the peek answers. */
function releaseMode(c: DecideContext): string[] {
  if (!c.concurrent) return [];
  return [
    "if ARGV[2] == 'x' then",
    "  -- release: free lease ARGV[4] on every concurrency cap (expired leases go too), whatever the override, then",
    "  -- answer as a peek",
    ...c.parts.flatMap((x) => block(x.release)),
    "  if stale then redis.call('HDEL', KEYS[1], unpack(stale)) end",
    "  if unlimited then",
    "    -- the answer under an unlimited override, as above",
    ...c.unlimitedReply.map((line) => `    ${line}`),
    "  end",
    "end",
  ];
}

/**
 * The block branch: while the manual block or a penalty box runs, every mode is answered here, the
 * blocked policies denying until the block's end and the others deciding as they would.
 */
function blockBranch(c: DecideContext): string[] {
  const { names, blocked } = c;
  const boxed = (p: string) => blocked.some((b) => b.p === p);
  return [
    `if manual${blocked.length === 0 ? "" : ` or ${blocked.map((b) => `(${b.p}_block_until or 0) > now_us`).join(" or ")}`} then`,
    "  -- a block runs: a blocked policy denies until the later of the block's end and its own retry time for the",
    "  -- request; the others decide it as they would (their state now if they would allow it). Nothing is written,",
    "  -- no offence counted: a retry at the largest retry_after passes. A peek, refund or release asks for 1.",
    "  local asked = cost",
    `  if ${c.peekLike} then asked = 1 end`,
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
    ...(blocked.length === 0
      ? [`  return ${answer(names.map((p) => `while_blocked(${p}_decide, manual)`))}`]
      : [
          "  if manual then",
          "    -- the manual block: every policy blocked until the later of its end and the policy's own penalty box's",
          `    return ${answer(names.map((p) => `while_blocked(${p}_decide, ${boxed(p) ? `max(manual, ${p}_block_until or 0)` : "manual"})`))}`,
          "  end",
          `  return ${answer(names.map((p) => `while_blocked(${p}_decide, ${boxed(p) ? `${p}_block_until` : "nil"})`))}`,
        ]),
    "end",
  ];
}

/**
 * The reserve mode (`ARGV[2] == 'v'`, core's `reserveState`): up to ARGV[1] units charged to every
 * policy at once, as many as every policy can give now (the least of their remaining), a bucket
 * counting them as used ARGV[4] ms from now. Runs after the block branch (a block grants nothing)
 * and answers like the fast path, with the state each policy is left in (its `StateReply`), the
 * marks, then the units granted and the override: `{ now_us, states…, marks…, granted, override }`.
 * Granting nothing, it falls through to the peek's answer (the full form). A namespace with a policy
 * that cannot reserve grants nothing, ever.
 */
function reserveMode(c: DecideContext): string[] {
  const { policies, names, parts, fastReplies, marks } = c;
  const reservable = policies.every((policy, k) => luaOf(policy).reservable?.(policy) === true && fastReplies[k]!.state);
  if (!reservable) return ["-- reserve: a policy here cannot hand out units ahead of their use: nothing is granted (answered as a peek)"];
  return [
    "if ARGV[2] == 'v' then",
    "  -- reserve: as many units as every policy can give now, at most ARGV[1]",
    "  local granted = cost",
    ...names.map((p) => `  do local _, left = ${p}_decide(math.huge); if left < granted then granted = left end end`),
    "  if granted > 0 then",
    "    -- charged as the fast path charges a consume of that many (every policy fits them)",
    "    local cost, hold = granted, (tonumber(ARGV[4]) or 0) * 1000",
    "    local pass = true",
    ...parts.flatMap((x, k) => [`    if pass then -- ${names[k]}`, indent(passBlock(x), "      "), ...(x.hold === undefined ? [] : [indent(x.hold("cost", "hold"), "      ")]), "    end"]),
    "    if pass then",
    ...parts.flatMap((x) => block(x.prepare, "      ")),
    ...c.write.map((line) => `    ${line}`),
    `      return { now_us, ${[...fastReplies.map((r) => r.list), ...marks.map((m) => m.mark)].join(", ")}, granted, override }`,
    "    end",
    "  end",
    "end",
  ];
}

/** The peek (and every mode that answers as one): whether a cost-1 request would pass, with the state now. */
function peekMode(c: DecideContext): string[] {
  const { policies, names } = c;
  return [
    `if ${c.peekLike} then`,
    "  -- peek: whether a cost-1 request would pass, with remaining, reset_at and refill_at of the state now",
    ...(policies.length === 1
      ? // one policy: the same answer in locals and one table (a refund answers as a peek)
        [
          `  local r1, r2, r3, r4, r5, r6 = ${names[0]}_decide(1)`,
          "  if r1 == 1 then",
          `    local _, now2, now3, _, _, now6 = ${names[0]}_decide(math.huge)`,
          "    r2, r3, r6 = now2, now3, now6",
          "  end",
          `  return { now_ms, r1 or 0, r2 or 0, r3 or 0, r4 or 0, r5 or 0, r6 or 0, 0${c.noMarks}, override }`,
        ]
      : [
          "  local function peeked(decide)",
          "    local r = { decide(1) }",
          "    if r[1] == 1 then",
          "      local now = { decide(math.huge) }",
          "      r[2], r[3], r[6] = now[2], now[3], now[6]",
          "    end",
          "    return r",
          "  end",
          `  return ${answer(names.map((p) => `peeked(${p}_decide)`))}`,
        ]),
    "end",
    "",
  ];
}

/**
 * The denial: a consume gets here only when the fast path found a policy denying (these decide the
 * same), so nothing is written but a penalty box ({@link penaltyBoxStart}).
 */
function denial(c: DecideContext): string[] {
  const { policies, names, blocked, noMarks } = c;
  const lines = ["-- consume, some policy denying (the fast path answered every other consume)"];
  if (policies.length === 1 && blocked.length === 0) {
    // one policy, no penalty box: its denial is the reply, built in one table (the reply answer()
    // would build, without its tables and loop)
    const p = names[0]!;
    const r = [1, 2, 3, 4, 5, 6].map((j) => `${p}_${j}`);
    lines.push(`local ${r.join(", ")} = ${p}_decide(cost)`, `return { now_ms, ${r.map((v) => `${v} or 0`).join(", ")}, 0${noMarks}, override }`, "");
    return lines;
  }
  lines.push(...names.map((p) => `local ${p}_result = { ${p}_decide(cost) }`));
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
  for (const box of blocked) lines.push(...penaltyBoxStart(c, box));
  // the reply answer() would build, in one table constructor
  const resultValues = names.flatMap((p) => [1, 2, 3, 4, 5, 6, 7].map((j) => `${p}_result[${j}] or 0`));
  lines.push(`return { now_ms, ${resultValues.join(", ")}${noMarks}, override }`, "");
  return lines;
}

/** A denied policy's penalty box starts (or, for a repeat offence, lasts longer), and its answer waits for its end. */
function penaltyBoxStart(c: DecideContext, { p, block, field }: PenaltyBox): string[] {
  const maxUs = block.maxMs * 1000;
  return [
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
    "  if stale then",
    "    redis.call('HDEL', KEYS[1], unpack(stale))",
    "    stale = nil",
    "  end",
    `  local keep = till + ${int(maxUs)}`,
    "  if not expires_at or expires_at < keep then",
    `    expires_at = keep + ${int(TTL_SLACK_US)}`,
    `    redis.call('HSET', KEYS[1], '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
    `    ${c.pexpire}`,
    "  end",
    "  -- retry at the later of the block's end and the policy's own retry time, so that the retry passes",
    `  local wait = max(ms, ${p}_result[4])`,
    `  ${p}_result[1], ${p}_result[2], ${p}_result[4], ${p}_result[5], ${p}_result[6], ${p}_result[7] = 0, 0, wait, 0, now_ms + wait, now_ms + ms`,
    `  if ${p}_result[3] < ${p}_result[6] then ${p}_result[3] = ${p}_result[6] end`,
    "end",
  ];
}

/**
 * Generates the `decide` script for a list of policies (in order). `KEYS[1]` is the identifier's
 * hash. ARGV: cost; then, optionally, the mode (`"c"` consume, the default, `"p"` peek, `"r"` refund
 * or `"x"` release), a fixed now in µs (test stores and `clock: "client"`; `''` or absent: `TIME`)
 * and the mode's own argument: for a refund, when the refunded request was charged (ms); for a
 * consume or a release, the lease id (a positive integer) under which an allowed request holds its
 * slot of every concurrency cap, or the lease to free. Returns `{ now_ms, then per policy: allowed
 * (1/0), remaining, resetAt, retryAfterMs (-1 = never), delayMs, refillAt, blockedUntil (0: none)
 * }`, then one mark per bucket, then the body of the key's live override (a string) when it has one.
 * The fast path (a consume every policy allows) answers in a **compact form** instead: `{ now_us,
 * then per policy: its new state (see `StateReply`: a fixed window's count, a sliding window's two
 * counts, a token bucket's TAT), or for a policy without a `StateReply` remaining, resetAt, delayMs
 * and refillAt }`, then the marks and the override. The store computes the answer from the state
 * with core's `allowedFromState`; allowed, retryAfterMs and blockedUntil are 1, 0 and 0 there. The two
 * forms have different lengths (`1 + w + marks`, w at most 4n, against `1 + 7n + marks`, each plus
 * one with an override), which is how the store tells them apart.
 *
 * The key's override (`|override`) and manual block (`|block`) are read by the same HMGET as the
 * policies' state. Each policy's quota-derived values (a window's limit, a bucket's emission
 * interval, burst × T, queue × T and largest cost) are per-key locals, set from the policy's
 * constants and, under a `scale` or `quotas` override, recomputed once before anything reads them;
 * a key with neither field pays for two HMGET fields, two `nil` tests and those assignments.
 *
 * @example
 * ```ts
 * const { script, sha } = decideScript([tokenBucket({ capacity: 10, refillRate: 1 })]);
 * ```
 */
export function decideScript(policies: readonly Policy[]): Script {
  if (policies.length === 0 || policies.length > MAX_POLICIES) {
    throw new SluiceConfigError(`[sluice] [redis] policies must hold 1 to ${MAX_POLICIES} policies (the same limit on every store); got ${policies.length}`, {
      option: "policies",
    });
  }
  const c = decideContext(policies);
  const lines = [
    ...header(c),
    ...keyOverride(c),
    ...stateReads(c),
    ...fastPath(c),
    // the general code, for everything the fast path did not answer
    ...decideFunctions(c),
    ...refundMode(c),
    ...releaseMode(c),
    ...blockBranch(c),
    ...reserveMode(c),
    ...peekMode(c),
    ...denial(c),
  ];
  const script = lines.join("\n");
  return { script, sha: sha1(script) };
}

/** The ops of the `control` script (its ARGV[1]), by core's `StoreCommand` op. */
export const CONTROL_OPS = { getOverride: "get", setOverride: "set", clearOverride: "clear", block: "block", unblock: "unblock" } as const;

/**
 * Generates the `control` script of a namespace (core's `controlState`, in one call): reads or
 * changes the key's override and manual block. `KEYS[1]` is the identifier's hash. ARGV: the op
 * (`get`, `set`, `clear`, `block`, `unblock`: see {@link CONTROL_OPS}), now in µs (`''`: `TIME`),
 * then for `set` the body and the ttl (ms, 0: no end), for `block` the duration (ms). Returns
 * `{ now_ms }`, then the body of the key's live override after the command when it has one.
 *
 * The hash's TTL: an override without an end keeps the hash (PERSIST; the decide script sends no
 * PEXPIRE while it lives); one with an end, or a manual block, keeps it at least until that end
 * (`@expires`, which every write keeps at the latest end of anything stored, is pushed there). When
 * an override without an end is cleared the hash gets the TTL `@expires` says (or goes, when
 * nothing in it is live). `unblock` also drops the penalty boxes of the namespace's policies.
 *
 * @example
 * ```ts
 * const { script, sha } = controlScript([fixedWindow({ limit: 5, window: "1m", block: "15m" })]);
 * ```
 */
export function controlScript(policies: readonly Policy[]): Script {
  const boxes = policies.flatMap((policy) => (policy.block === undefined ? [] : [str(blockFieldOf(policy))]));
  const pexpire = "redis.call('PEXPIRE', KEYS[1], max(1, ceil((expires_at - now_us) / 1000)))";
  const lines = [
    `-- Sluice control: the override and manual block of a key, for policies ${policies.map((policy) => str(policy.name)).join(", ")}`,
    `-- KEYS[1]: the identifier's hash ('${OVERRIDE_FIELD}': "<end µs, 0: none>,<body>"; '${BLOCK_FIELD}': the manual block's end, µs).`,
    "-- ARGV: the op ('get', 'set', 'clear', 'block', 'unblock'), now in µs ('': TIME), then for 'set' the body and the",
    "-- ttl (ms, 0: no end), for 'block' the duration (ms). Returns now_ms, then the body of the live override (if any).",
    "local floor, ceil, max = math.floor, math.ceil, math.max",
    "local match, gmatch, sub, fmt = string.match, string.gmatch, string.sub, string.format",
    "local now_us",
    "if ARGV[2] and ARGV[2] ~= '' then",
    "  now_us = tonumber(ARGV[2])",
    "else",
    "  local time = redis.call('TIME')",
    "  now_us = time[1] * 1000000 + time[2]",
    "end",
    "local now_ms = floor(now_us / 1000)",
    "local op = ARGV[1]",
    `local stored = redis.call('HMGET', KEYS[1], '${EXPIRES_FIELD}', '${OVERRIDE_FIELD}', '${BLOCK_FIELD}')`,
    "local expires_at = tonumber(stored[1])",
    "-- the live override now (persist: it has no end, and the hash no TTL)",
    "local override, persist",
    "if stored[2] then",
    "  local till, unlimited, scale, quotas",
    indent(parseOverride("stored[2]"), "  "),
    "  if unlimited or scale or quotas then override, persist = body, till == 0 end",
    "end",
    "if op == 'get' then return { now_ms, override } end",
    "-- a write: the override or manual block that ended goes",
    "local stale = {}",
    `if stored[2] and not override then stale[#stale + 1] = '${OVERRIDE_FIELD}' end`,
    "if stored[3] then",
    "  local till = tonumber(stored[3])",
    `  if not till or till <= now_us then stale[#stale + 1] = '${BLOCK_FIELD}' end`,
    "end",
    "if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end",
    "if op == 'set' then",
    "  local ttl_ms = tonumber(ARGV[4])",
    "  local till = 0",
    "  if ttl_ms > 0 then till = now_us + ttl_ms * 1000 end",
    "  override = ARGV[3]",
    `  redis.call('HSET', KEYS[1], '${OVERRIDE_FIELD}', fmt('%.0f,', till) .. override)`,
    "  if till == 0 then",
    "    -- no end: the hash must not expire while it lives",
    "    redis.call('PERSIST', KEYS[1])",
    "  else",
    "    -- the hash lives at least until the override's end (it may have had no TTL: one is set in any case)",
    "    if not expires_at or expires_at < till then",
    `      expires_at = till + ${int(TTL_SLACK_US)}`,
    `      redis.call('HSET', KEYS[1], '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
    "    end",
    `    ${pexpire}`,
    "  end",
    "elseif op == 'clear' then",
    `  redis.call('HDEL', KEYS[1], '${OVERRIDE_FIELD}')`,
    "  if persist then",
    "    -- the hash had no TTL: it gets the one its state needs, or goes when nothing in it is live",
    "    if expires_at and expires_at > now_us then",
    `      ${pexpire}`,
    "    else",
    "      redis.call('DEL', KEYS[1])",
    "    end",
    "  end",
    "  override = nil",
    "elseif op == 'block' then",
    "  local till = now_us + tonumber(ARGV[3]) * 1000",
    `  redis.call('HSET', KEYS[1], '${BLOCK_FIELD}', fmt('%.0f', till))`,
    "  if not expires_at or expires_at < till then",
    `    expires_at = till + ${int(TTL_SLACK_US)}`,
    `    redis.call('HSET', KEYS[1], '${EXPIRES_FIELD}', fmt('%.0f', expires_at))`,
    `    if not persist then ${pexpire} end`,
    "  end",
    "elseif op == 'unblock' then",
    `  -- the manual block and the penalty boxes of this namespace's policies${boxes.length === 0 ? " (none has one)" : ""}`,
    `  redis.call('HDEL', KEYS[1], '${BLOCK_FIELD}'${boxes.map((b) => `, ${b}`).join("")})`,
    "else",
    "  return redis.error_reply('unknown control op')",
    "end",
    "return { now_ms, override }",
    "",
  ];
  const script = lines.join("\n");
  return { script, sha: sha1(script) };
}
