/**
 * The `SluiceLimiter` Durable Object: runs the core algorithms over the state of one key, with the
 * object's own clock, one RPC call per decision, through `@sluice/core/store`'s pure
 * `decideState`/`peekState`: the object reads the key's state, decides, and writes what comes
 * back, never knowing how an algorithm lays out its numbers.
 *
 * Storage: the SQLite-backed Durable Object storage (`ctx.storage.sql`), one row per identifier
 * (core's `storageKey` of prefix, tier and key — the same identifier every store uses): the JSON
 * state (per policy field, `name|kind`, like the Redis store's hash fields) and the epoch-µs time
 * when every policy's state is empty again. The SQL API is synchronous, so a decision reads,
 * computes and writes without ever awaiting: no other call can run in between, and the output gate
 * holds the reply until the write is durable. An in-memory cache (bounded, least recently used)
 * saves the read on the next call.
 *
 * Overrides and manual blocks (`limiter.setOverride`, `limiter.block`) live in the same row, in
 * core's key-wide `|override` and `|block` fields: `control` runs core's `controlState` in the same
 * synchronous read-decide-write as a decision, one RPC call per command, and every decision applies
 * them and reports the override it applied (its body on the wire).
 *
 * Errors: a call refused for bad configuration or bad input is answered `{ error: { name, code,
 * message, option } }` (a value: an error's class would not survive the RPC), which the store
 * rethrows as `SluiceConfigError` or `SluiceInputError` with the same `code` and `option`; anything
 * else is thrown, and is a store failure (the test-clock fence throws a `SluiceStoreError`: a
 * production object refusing a test store's time is an outage of that store, not the caller's
 * mistake).
 *
 * Cleanup: a row whose state has expired is deleted when it is next touched; a storage alarm,
 * set at the expiry of the rows written, deletes expired rows of keys nobody touches again and,
 * once the table is empty, calls `deleteAll()` so the object keeps no storage at all. A row holding
 * an override without an end never expires (`expires_at` = `Number.MAX_SAFE_INTEGER`, no alarm set
 * for it) until the override is cleared; one with an end expires with it.
 *
 * @module
 */
import { type Policy, SluiceConfigError, SluiceInputError, SluiceStoreError } from "@sluice/core";
import {
  OVERRIDE_FIELD,
  type StateDecision,
  type StoreCommand,
  type StoredState,
  assertKey,
  assertNamespace,
  assertPrefixAndTier,
  assertStoreCommand,
  controlState,
  decideState,
  liveOverride,
  peekState,
  refundState,
  releaseState,
  reserveState,
  storageKey,
} from "@sluice/core/store";
import { DurableObject } from "cloudflare:workers";
import {
  type ConsumeCall,
  type ControlCall,
  type ControlReply,
  type RefundCall,
  type DecisionReply,
  type LimiterCall,
  type ReleaseCall,
  type ReserveCall,
  type ReserveReply,
  type ResetCall,
  type ResetReply,
  policiesFromJson,
  refusing,
  type WireResult,
} from "./protocol.js";

/**
 * The bindings `SluiceLimiter` reads from its Worker's `env`. Only one, and only for tests:
 * `SLUICE_ALLOW_TEST_CLOCK` set to `"true"` lets a test store (`@sluice/cloudflare/testing`) fix
 * the object's "now". Never set it in production: without it, a call that carries a "now" is
 * refused (the caller's limiter then follows its `onStoreError`).
 */
export interface SluiceLimiterEnv {
  SLUICE_ALLOW_TEST_CLOCK?: string | boolean;
}

/**
 * One stored row: the identifier's state (opaque: core's `StoredState`, its key-wide `|override`
 * and `|block` fields included) and when it is all empty again (`Number.MAX_SAFE_INTEGER` while it
 * holds an override without an end: the row is then kept until the override is cleared).
 */
interface Row {
  state: StoredState;
  expiresAtUs: number;
}

/** The most rows the in-memory cache keeps (a sharded object holds many keys). */
const MAX_CACHED_ROWS = 10_000;
/** The most distinct policy lists whose parsed form is cached. */
const MAX_POLICY_LISTS = 64;

/** A row's `expiresAtUs` while it holds an override without an end: it never expires. */
const NEVER = Number.MAX_SAFE_INTEGER;

/** The longest hold a reservation may ask for (ms): 2^31 − 1, the longest duration Sluice takes. */
const MAX_HOLD_MS = 2 ** 31 - 1;

/** The package tag of the errors the object answers with. */
const TAG = "cloudflare";

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS sluice_state (
  key TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  expires_at INTEGER NOT NULL
)`;
const CREATE_INDEX = "CREATE INDEX IF NOT EXISTS sluice_state_expires_at ON sluice_state (expires_at)";
const SELECT_ROW = "SELECT state, expires_at FROM sluice_state WHERE key = ?";
const UPSERT_ROW =
  "INSERT INTO sluice_state (key, state, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at";
const DELETE_ROW = "DELETE FROM sluice_state WHERE key = ?";
const DELETE_EXPIRED = "DELETE FROM sluice_state WHERE expires_at <= ?";
const NEXT_EXPIRY = "SELECT MIN(expires_at) AS next FROM sluice_state";

/**
 * The Durable Object that keeps Sluice's rate-limit state on Cloudflare. Export it from your
 * Worker's main module and bind it (SQLite-backed: `new_sqlite_classes` in the migration); then
 * reach it through {@link DurableObjectStore}.
 *
 * @example
 * ```ts
 * // src/index.ts
 * export { SluiceLimiter } from "@sluice/cloudflare";
 * ```
 * ```toml
 * # wrangler.toml
 * [[durable_objects.bindings]]
 * name = "SLUICE"
 * class_name = "SluiceLimiter"
 *
 * [[migrations]]
 * tag = "v1"
 * new_sqlite_classes = ["SluiceLimiter"]
 * ```
 */
export class SluiceLimiter extends DurableObject<SluiceLimiterEnv> {
  readonly #sql: SqlStorage;
  readonly #testClock: boolean;
  readonly #cache = new Map<string, Row | null>();
  readonly #policyLists = new Map<string, Policy[]>();
  #tableReady = false;
  /** The alarm this instance set (epoch ms), or `undefined` if it has set none since it started or last fired. */
  #alarmAtMs: number | undefined;

  constructor(ctx: DurableObjectState, env: SluiceLimiterEnv) {
    super(ctx, env);
    let sql: SqlStorage | undefined;
    try {
      sql = ctx.storage.sql;
      // a key-value-backed object has the API but refuses to run anything: find out now, not at the first call
      sql.exec("SELECT 1");
    } catch {
      sql = undefined;
    }
    if (sql === undefined || typeof sql.exec !== "function") {
      throw new SluiceConfigError(
        '[sluice] [cloudflare] new_sqlite_classes must list SluiceLimiter in the migration that creates it (wrangler.toml [[migrations]] new_sqlite_classes = ["SluiceLimiter"]): it needs SQLite-backed storage; got one whose storage runs no SQL',
        { option: "new_sqlite_classes" },
      );
    }
    this.#sql = sql;
    const flag = env?.SLUICE_ALLOW_TEST_CLOCK;
    this.#testClock = flag === true || flag === "true";
  }

  /**
   * Checks every policy for `cost`; if all allow, consumes from all; otherwise consumes nothing.
   * Called by {@link DurableObjectStore}; the arguments are validated here.
   */
  consume(call: ConsumeCall): DecisionReply {
    return refusing(() => {
      assertCall(call);
      const cost = (call as Partial<ConsumeCall>).cost;
      if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
        throw new SluiceInputError(`[sluice] [cloudflare] cost must be a positive safe integer; got ${shown(cost)}`, { option: "cost" });
      }
      const lease = (call as Partial<ConsumeCall>).lease ?? 0;
      if (typeof lease !== "number" || !Number.isSafeInteger(lease) || lease < 0) {
        throw new SluiceInputError(`[sluice] [cloudflare] lease must be a non-negative safe integer; got ${shown(lease)}`, { option: "lease" });
      }
      return this.#decide(call, (policies, state, nowUs) => decideState(policies, state, nowUs, cost, lease));
    });
  }

  /** The state now, and whether a cost-1 request would pass; consumes nothing. */
  peek(call: LimiterCall): DecisionReply {
    return refusing(() => this.#decide(call, peekState));
  }

  /**
   * Frees the slot `lease` holds on every concurrency cap of the key (core's `releaseState`;
   * idempotent: an unknown, released or expired lease changes nothing); answers the state afterwards.
   */
  release(call: ReleaseCall): DecisionReply {
    return refusing(() => {
      assertCall(call);
      const lease = (call as Partial<ReleaseCall>).lease;
      if (typeof lease !== "number" || !Number.isSafeInteger(lease) || lease <= 0) {
        throw new SluiceInputError(`[sluice] [cloudflare] lease must be a positive safe integer; got ${shown(lease)}`, { option: "lease" });
      }
      return this.#decide(call, (policies, state, nowUs) => releaseState(policies, state, nowUs, lease));
    });
  }

  /**
   * Gives `cost` units back to every policy for the request charged at `chargedAtMs` with the
   * marks `marks` (absent: the latest charges), each unit at its price `prices` (absent: the price
   * in force now), never above the quota and never more than the charge still weighs (core's
   * `refundState`); answers the state afterwards.
   */
  refund(call: RefundCall): DecisionReply {
    return refusing(() => {
      assertCall(call);
      const { cost, chargedAtMs, marks, prices } = call as Partial<RefundCall>;
      if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
        throw new SluiceInputError(`[sluice] [cloudflare] cost must be a positive safe integer; got ${shown(cost)}`, { option: "cost" });
      }
      if (chargedAtMs !== undefined && (typeof chargedAtMs !== "number" || !Number.isSafeInteger(chargedAtMs) || chargedAtMs < 0)) {
        throw new SluiceInputError(`[sluice] [cloudflare] chargedAtMs must be a non-negative integer of epoch ms; got ${shown(chargedAtMs)}`, {
          option: "chargedAtMs",
        });
      }
      if (marks !== undefined && (!Array.isArray(marks) || !marks.every((m) => Number.isSafeInteger(m) && m >= 0))) {
        throw new SluiceInputError(`[sluice] [cloudflare] marks must be a list of non-negative safe integers; got ${shown(marks)}`, { option: "marks" });
      }
      if (prices !== undefined && (!Array.isArray(prices) || !prices.every((m) => Number.isSafeInteger(m) && m >= 0))) {
        throw new SluiceInputError(`[sluice] [cloudflare] prices must be a list of non-negative safe integers; got ${shown(prices)}`, { option: "prices" });
      }
      const charge = chargedAtMs === undefined ? undefined : { atMs: chargedAtMs, marks, prices };
      return this.#decide(call, (policies, state, nowUs) => refundState(policies, state, nowUs, cost, charge));
    });
  }

  /**
   * Charges up to `units` to every policy of the key at once, as many as every policy can give now,
   * a bucket counting them as used `holdMs` from now (core's `reserveState`); answers the units
   * granted, the state after them and the charge's marks.
   */
  reserve(call: ReserveCall): ReserveReply {
    return refusing(() => {
      assertCall(call);
      const { units, holdMs } = call as Partial<ReserveCall>;
      if (typeof units !== "number" || !Number.isSafeInteger(units) || units <= 0) {
        throw new SluiceInputError(`[sluice] [cloudflare] units must be a positive safe integer; got ${shown(units)}`, { option: "units" });
      }
      if (typeof holdMs !== "number" || !Number.isSafeInteger(holdMs) || holdMs < 0 || holdMs > MAX_HOLD_MS) {
        throw new SluiceInputError(`[sluice] [cloudflare] holdMs must be an integer from 0 to ${MAX_HOLD_MS}; got ${shown(holdMs)}`, { option: "holdMs" });
      }
      let granted = 0;
      const result = this.#decide(call, (policies, state, nowUs) => {
        const reserved = reserveState(policies, state, nowUs, units, holdMs * 1000);
        granted = reserved.granted;
        return reserved;
      });
      return { ...result, granted };
    });
  }

  /** Forgets every policy's state of the key in the namespace. */
  reset(call: ResetCall): ResetReply {
    return refusing(() => {
      const id = this.#identifier(call);
      this.#ensureTable();
      this.#sql.exec(DELETE_ROW, id);
      this.#remember(id, null);
      return null;
    });
  }

  /**
   * Runs an override or manual-block command on the key's row (core's `controlState`: `getOverride`,
   * `setOverride`, `clearOverride`, `block`, `unblock`), in the same synchronous read-decide-write
   * as a decision, with the object's clock; answers the key's live override body afterwards.
   */
  control(call: ControlCall): ControlReply {
    return refusing(() => {
      assertCall(call);
      const command = (call as Partial<ControlCall>).command as StoreCommand;
      // core's checks (command.op, .override, .ttlMs, .durationMs), tagged [cloudflare], before any state is read
      assertStoreCommand(command, TAG);
      const policies = this.#policies(call.policies);
      const id = this.#identifier(call, policies);
      const testNow = call.nowMs !== undefined;
      const nowUs = this.#nowUs(call.nowMs);
      this.#ensureTable();
      const row = this.#read(id);
      const done = controlState(policies, row?.state, nowUs, command);
      this.#store(id, row, done.state, done.expiresAtUs, nowUs, testNow);
      const now = Math.floor(nowUs / 1000);
      return done.override === undefined ? { now } : { now, override: done.override };
    });
  }

  /** Deletes the rows that have expired; when none is left, deletes the object's storage. */
  override async alarm(): Promise<void> {
    this.#alarmAtMs = undefined;
    this.#ensureTable();
    const nowUs = Date.now() * 1000;
    this.#sql.exec(DELETE_EXPIRED, nowUs);
    for (const [key, row] of this.#cache) if (row !== null && row.expiresAtUs <= nowUs) this.#cache.delete(key);
    const next = this.#sql.exec<{ next: number | null }>(NEXT_EXPIRY).one().next;
    if (next !== null) {
      // rows left only by overrides without an end expire never: no alarm until a row that does is written
      if (next < NEVER) this.#schedule(next);
      return;
    }
    // nothing left: drop the table too, so an idle key's object keeps no storage
    this.#cache.clear();
    this.#tableReady = false;
    await this.ctx.storage.deleteAll();
  }

  /**
   * The row key of the call's (prefix, tier, key): core's `storageKey`. Validates all three, and
   * the policies when the call has them (a reset has none).
   */
  #identifier(call: ResetCall, policies?: readonly Policy[]): string {
    assertCall(call);
    const namespace = { prefix: call.prefix, tier: call.tier };
    if (policies === undefined) assertPrefixAndTier(namespace, TAG);
    else assertNamespace({ ...namespace, policies }, TAG);
    assertKey(call.key, TAG);
    return storageKey(namespace, call.key);
  }

  /** One decision of core's pure functions over the key's row (`decide`). Synchronous from the read to the write. */
  #decide(call: LimiterCall, decide: (policies: Policy[], state: StoredState | undefined, nowUs: number) => StateDecision): WireResult {
    assertCall(call);
    const policies = this.#policies(call.policies);
    const id = this.#identifier(call, policies);
    const testNow = call.nowMs !== undefined;
    const nowUs = this.#nowUs(call.nowMs);
    this.#ensureTable();
    const row = this.#read(id);
    const decided = decide(policies, row?.state, nowUs);
    this.#store(id, row, decided.state, decided.expiresAtUs, nowUs, testNow);
    const result: WireResult = { now: Math.floor(nowUs / 1000), policies: decided.policies };
    if (decided.marks !== undefined) result.marks = decided.marks;
    if (decided.override !== undefined) {
      const body = overrideBody(row, nowUs);
      if (body !== undefined) result.override = body;
    }
    return result;
  }

  /**
   * Writes what core answered: the new state, or — when nothing changed and the row holds nothing
   * live any more (an expired override included) — deletes the row.
   */
  #store(id: string, row: Row | null, state: StoredState | undefined, expiresAtUs: number, nowUs: number, testNow: boolean): void {
    if (state !== undefined) this.#write(id, state, expiresAtUs, nowUs, testNow);
    else if (row !== null && expiresAtUs <= nowUs) this.#write(id, {}, 0, nowUs, testNow);
  }

  #read(key: string): Row | null {
    const cached = this.#cache.get(key);
    if (cached !== undefined) {
      // most recently used goes last
      this.#cache.delete(key);
      this.#cache.set(key, cached);
      return cached;
    }
    const found = this.#sql.exec<{ state: string; expires_at: number }>(SELECT_ROW, key).toArray()[0];
    let row: Row | null = null;
    if (found !== undefined) {
      const state = parseState(found.state);
      row = state === undefined ? null : { state, expiresAtUs: found.expires_at };
    }
    this.#remember(key, row);
    return row;
  }

  #write(key: string, state: StoredState, expiresAtUs: number, nowUs: number, testNow: boolean): void {
    if (expiresAtUs <= nowUs) {
      this.#sql.exec(DELETE_ROW, key);
      this.#remember(key, null);
      return;
    }
    this.#sql.exec(UPSERT_ROW, key, JSON.stringify(state), expiresAtUs);
    this.#remember(key, { state, expiresAtUs });
    // a row written at a test "now" expires on the test's clock, not the real one: no alarm; nor for
    // a row that never expires (an override without an end)
    if (!testNow && this.#alarmAtMs === undefined && expiresAtUs < NEVER) this.#schedule(expiresAtUs);
  }

  #schedule(atUs: number): void {
    const atMs = Math.ceil(atUs / 1000);
    this.#alarmAtMs = atMs;
    this.ctx.storage.setAlarm(atMs).catch(() => {
      // the next write tries again
      if (this.#alarmAtMs === atMs) this.#alarmAtMs = undefined;
    });
  }

  #remember(key: string, row: Row | null): void {
    this.#cache.delete(key);
    this.#cache.set(key, row);
    if (this.#cache.size > MAX_CACHED_ROWS) this.#cache.delete(this.#cache.keys().next().value as string);
  }

  #ensureTable(): void {
    if (this.#tableReady) return;
    this.#sql.exec(CREATE_TABLE);
    this.#sql.exec(CREATE_INDEX);
    this.#tableReady = true;
  }

  /** The policies of a call, rebuilt (validated) by the core factories once per distinct list. */
  #policies(json: unknown): Policy[] {
    if (typeof json === "string") {
      const cached = this.#policyLists.get(json);
      if (cached !== undefined) return cached;
    }
    const policies = policiesFromJson(json);
    if (this.#policyLists.size >= MAX_POLICY_LISTS) this.#policyLists.clear();
    this.#policyLists.set(json as string, policies);
    return policies;
  }

  #nowUs(nowMs: unknown): number {
    if (nowMs === undefined) return Date.now() * 1000;
    if (!this.#testClock) {
      // a store failure, not a refusal: the caller's limiter follows its onStoreError
      throw new SluiceStoreError(
        "[sluice] [cloudflare] a call fixed the time, but this SluiceLimiter's Worker has no SLUICE_ALLOW_TEST_CLOCK binding: only test stores send a time, and only test Workers may honour it",
      );
    }
    if (typeof nowMs !== "number" || !Number.isFinite(nowMs) || nowMs < 0) {
      throw new SluiceStoreError(`[sluice] [cloudflare] the test clock must be a non-negative finite epoch ms; got ${shown(nowMs)}`);
    }
    return Math.floor(nowMs * 1000);
  }
}

/** Refuses a call that is not an object (`option: "call"`), before any of its fields is read. */
function assertCall(call: unknown): asserts call is object {
  if (typeof call !== "object" || call === null) throw new SluiceInputError(`[sluice] [cloudflare] call must be an object; got ${shown(call)}`, { option: "call" });
}

/** The body of the live override in `row` at `nowUs` (what a decision reports it applied). */
function overrideBody(row: Row | null, nowUs: number): string | undefined {
  return liveOverride((row?.state as Record<string, unknown> | undefined)?.[OVERRIDE_FIELD], nowUs)?.body;
}

/** A value as an error message writes it: strings quoted, anything else as `String` gives it. */
function shown(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : Array.isArray(value) ? "an array" : String(value);
}

/** A stored row's state: a JSON object, else nothing (core reads malformed fields as empty). */
function parseState(text: string): StoredState | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as StoredState) : undefined;
}
