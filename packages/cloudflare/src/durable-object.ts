/**
 * The `SluiceLimiter` Durable Object: runs the core algorithms (`consumeAll`/`peekAll` from
 * `@sluice/core`, the same code as `MemoryStore`) over the state of one key, with the object's own
 * clock, one RPC call per decision.
 *
 * Storage: the SQLite-backed Durable Object storage (`ctx.storage.sql`), one row per
 * (namespace prefix, key): the JSON state of each policy (by `name|kind`, like the Redis store's
 * hash fields) and the epoch-µs time when every policy's state is empty again. The SQL API is
 * synchronous, so a decision reads, computes and writes without ever awaiting: no other call can
 * run in between, and the output gate holds the reply until the write is durable. An in-memory
 * cache (bounded, least recently used) saves the read on the next call.
 *
 * Cleanup: a row whose state has expired is deleted when it is next touched; a storage alarm,
 * set at the expiry of the rows written, deletes expired rows of keys nobody touches again and,
 * once the table is empty, calls `deleteAll()` so the object keeps no storage at all.
 *
 * @module
 */
import {
  type Layout,
  type Policy,
  type PolicyResult,
  type StoreResult,
  consumeAll,
  expiresAtUs,
  layoutOf,
  peekAll,
  NUM_WIDTH,
} from "@sluice/core";
import { DurableObject } from "cloudflare:workers";
import { type ConsumeCall, type LimiterCall, type ResetCall, checkCost, checkKeyPart, policiesFromJson } from "./protocol.js";

/**
 * The bindings `SluiceLimiter` reads from its Worker's `env`. Only one, and only for tests:
 * `SLUICE_ALLOW_TEST_CLOCK` set to `"true"` lets a test store (`@sluice/cloudflare/testing`) fix
 * the object's "now". Never set it in production: without it, a call that carries a "now" is
 * refused (the caller's limiter then follows its `onStoreError`).
 */
export interface SluiceLimiterEnv {
  SLUICE_ALLOW_TEST_CLOCK?: string | boolean;
}

/** One stored row: per policy id `name|kind`, `[expiresAtUs, ...numbers, ...log entries]`. */
interface Row {
  state: Record<string, number[]>;
  expiresAtUs: number;
}

/** The most rows the in-memory cache keeps (a sharded object holds many keys). */
const MAX_CACHED_ROWS = 10_000;
/** The most distinct policy lists whose parsed layout is cached. */
const MAX_LAYOUTS = 64;

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

function rowKey(prefix: string, key: string): string {
  // core validates prefixes to visible ASCII: "\u0000" never occurs in one
  return `${prefix}\u0000${key}`;
}

function idOf(policy: Policy): string {
  return `${policy.name}|${policy.kind}`;
}

function isFiniteArray(value: unknown): value is number[] {
  if (!Array.isArray(value)) return false;
  for (const x of value) if (typeof x !== "number" || !Number.isFinite(x)) return false;
  return true;
}

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
  readonly #layouts = new Map<string, Layout>();
  #tableReady = false;
  /** The alarm this instance set (epoch ms), or `undefined` if it has set none since it started or last fired. */
  #alarmAtMs: number | undefined;

  constructor(ctx: DurableObjectState, env: SluiceLimiterEnv) {
    super(ctx, env);
    let sql: SqlStorage | undefined;
    try {
      sql = ctx.storage.sql;
    } catch {
      sql = undefined;
    }
    if (sql === undefined || typeof sql.exec !== "function") {
      throw new Error(
        '[sluice] [cloudflare] SluiceLimiter needs SQLite-backed storage: list it under new_sqlite_classes in the migration that creates it (wrangler.toml [[migrations]] new_sqlite_classes = ["SluiceLimiter"])',
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
  consume(call: ConsumeCall): StoreResult {
    return this.#decide(call, checkCost(call?.cost));
  }

  /** The state now, and whether a cost-1 request would pass; consumes nothing. */
  peek(call: LimiterCall): StoreResult {
    return this.#decide(call, 0);
  }

  /** Forgets every policy's state of the key in the namespace. */
  reset(call: ResetCall): void {
    const key = rowKey(checkKeyPart(call?.prefix, "prefix"), checkKeyPart(call?.key, "key"));
    this.#ensureTable();
    this.#sql.exec(DELETE_ROW, key);
    this.#remember(key, null);
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
      this.#schedule(next);
      return;
    }
    // nothing left: drop the table too, so an idle key's object keeps no storage
    this.#cache.clear();
    this.#tableReady = false;
    await this.ctx.storage.deleteAll();
  }

  /** One decision; `cost` 0 means peek. Synchronous from the read to the write. */
  #decide(call: LimiterCall, cost: number): StoreResult {
    if (typeof call !== "object" || call === null) throw new TypeError("[sluice] [cloudflare] a call must be an object");
    const key = rowKey(checkKeyPart(call.prefix, "prefix"), checkKeyPart(call.key, "key"));
    const layout = this.#layout(call.policies);
    const testNow = call.nowMs !== undefined;
    const nowUs = this.#nowUs(call.nowMs);
    this.#ensureTable();

    const row = this.#read(key);
    const policies = layout.policies;
    const num = new Float64Array(layout.numStride);
    const obj: unknown[] = new Array(layout.objStride);
    if (row !== null) this.#load(layout, row, num, obj, nowUs);

    let results: PolicyResult[];
    let consumed = false;
    if (cost === 0) {
      results = peekAll(layout, num, 0, obj, 0, nowUs);
    } else {
      results = consumeAll(layout, num, 0, obj, 0, nowUs, cost);
      consumed = results.every((r) => r.allowed);
    }

    if (consumed) {
      const state: Record<string, number[]> = {};
      let expiresAt = 0;
      if (row !== null) {
        // state of the same prefix under other policies (another limiter with this prefix) is kept
        for (const [id, value] of Object.entries(row.state)) {
          if ((value[0] as number) > nowUs) {
            state[id] = value;
            expiresAt = Math.max(expiresAt, value[0] as number);
          }
        }
      }
      for (let i = 0; i < policies.length; i++) {
        const policy = policies[i] as Policy;
        const off = layout.numOffsets[i] as number;
        const oOff = layout.objOffsets[i] as number;
        const id = idOf(policy);
        const at = expiresAtUs(policy, num, off, obj, oOff);
        if (at <= nowUs) {
          delete state[id];
          continue;
        }
        const value = [at];
        for (let j = 0; j < NUM_WIDTH[policy.kind]; j++) value.push(num[off + j] as number);
        if (policy.kind === "slidingLog") {
          const entries = obj[oOff] as number[] | undefined;
          if (entries !== undefined) for (const x of entries) value.push(x);
        }
        state[id] = value;
        expiresAt = Math.max(expiresAt, at);
      }
      this.#write(key, state, expiresAt, nowUs, testNow);
    } else if (row !== null && row.expiresAtUs <= nowUs) {
      this.#write(key, {}, 0, nowUs, testNow);
    }
    return { now: Math.floor(nowUs / 1000), policies: results };
  }

  /** Copies the live part of a row into the engine's arrays. */
  #load(layout: Layout, row: Row, num: Float64Array, obj: unknown[], nowUs: number): void {
    const policies = layout.policies;
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i] as Policy;
      const value = row.state[idOf(policy)];
      const width = NUM_WIDTH[policy.kind];
      // expired or malformed state reads as empty (the all-zero state)
      if (value === undefined || value.length < 1 + width || (value[0] as number) <= nowUs) continue;
      const off = layout.numOffsets[i] as number;
      if (policy.kind === "slidingLog") {
        // flat [time, cost, ...]: the engine's sum is recomputed from the entries, never trusted
        const entries = value.slice(1 + width);
        let sum = 0;
        for (let j = 1; j < entries.length; j += 2) sum += entries[j] as number;
        if (entries.length % 2 !== 0) continue;
        num[off] = sum;
        obj[layout.objOffsets[i] as number] = entries;
        continue;
      }
      for (let j = 0; j < width; j++) num[off + j] = value[1 + j] as number;
    }
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

  #write(key: string, state: Record<string, number[]>, expiresAtUs: number, nowUs: number, testNow: boolean): void {
    if (expiresAtUs <= nowUs) {
      this.#sql.exec(DELETE_ROW, key);
      this.#remember(key, null);
      return;
    }
    this.#sql.exec(UPSERT_ROW, key, JSON.stringify(state), expiresAtUs);
    this.#remember(key, { state, expiresAtUs });
    // a row written at a test "now" expires on the test's clock, not the real one: no alarm
    if (!testNow && this.#alarmAtMs === undefined) this.#schedule(expiresAtUs);
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

  #layout(json: unknown): Layout {
    if (typeof json === "string") {
      const cached = this.#layouts.get(json);
      if (cached !== undefined) return cached;
    }
    const layout = layoutOf(policiesFromJson(json));
    if (this.#layouts.size >= MAX_LAYOUTS) this.#layouts.clear();
    this.#layouts.set(json as string, layout);
    return layout;
  }

  #nowUs(nowMs: unknown): number {
    if (nowMs === undefined) return Date.now() * 1000;
    if (!this.#testClock) {
      throw new Error(
        "[sluice] [cloudflare] a call fixed the time, but this SluiceLimiter's Worker has no SLUICE_ALLOW_TEST_CLOCK binding: only test stores send a time, and only test Workers may honour it",
      );
    }
    if (typeof nowMs !== "number" || !Number.isFinite(nowMs) || nowMs < 0) {
      throw new Error("[sluice] [cloudflare] the test clock must be a non-negative finite epoch ms");
    }
    return Math.floor(nowMs * 1000);
  }
}

function parseState(text: string): Record<string, number[]> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const state: Record<string, number[]> = {};
  for (const [id, entry] of Object.entries(value)) if (isFiniteArray(entry) && entry.length > 0) state[id] = entry;
  return state;
}
