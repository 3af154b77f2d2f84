import type { Policy } from "./algorithms/index.js";
import { type Layout, blockExpiresAtUs, chargeMarks, consumeAll, evaluate, expiresAtUs, layoutOf, manuallyBlocked, peekAll, refundAll, releaseAll, reserveAll } from "./engine.js";
import { SluiceConfigError, SluiceInputError, describe } from "./errors.js";
import { assertNamespace, encodeKeyPart, namespaceKey, policyField } from "./keys.js";
import { type ControlResult, type Override, type StoreCommand, assertStoreCommand, effectivePolicies, overrideFromText, unlimitedBlockedResults, unlimitedResults } from "./overrides.js";
import type { BoundStore, PolicyResult, RefundCharge, ReserveResult, Store, StoreNamespace, StoreResult } from "./types.js";

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The most keys kept across every namespace bound to this store. When full, a new key first
   * replaces an expired key near the least-recently-used end, else the least recently used one.
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * The clock, in epoch milliseconds. Inject one in tests to stand exactly on a window edge.
   * @default Date.now
   */
  clock?: () => number;
}

const NONE = -1;
/** How many entries from the least-recently-used end are searched for an expired one before evicting the LRU. */
const EVICTION_SCAN = 16;
/** Global slots reserved at first use (bounded by `maxKeys`). */
const INITIAL_CAPACITY = 1024;
/** The fewest local slots a namespace's arrays keep (a namespace with one key costs this much). */
const MIN_TABLE_CAPACITY = 8;

/**
 * The keys of one namespace (prefix, tier and policy fields) and their state. State sits in typed
 * arrays indexed by a *local* slot number, packed without holes (`0 .. count-1`): removing a key
 * moves the last one into its place, and the arrays grow and shrink by halves, so a namespace
 * holds memory in proportion to its own keys, never to the store's.
 */
class Table {
  /** The caller's key (never a prefixed copy) → its global slot. */
  readonly map = new Map<string, number>();
  readonly numStride: number;
  readonly objStride: number;
  /** `numStride` numbers per local slot. */
  num = new Float64Array(0);
  /** `objStride` entries per local slot (a sliding log's entries). */
  readonly obj: unknown[] = [];
  /** The key of each local slot. */
  readonly keys: (string | undefined)[] = [];
  /** Local slots in use. */
  count = 0;

  /**
   * @param id - The table's index in the store's list of tables (what a global slot records).
   * @param layout - That of the first binding, used to tell whether a key's state has expired.
   */
  constructor(
    readonly id: number,
    readonly layout: Layout,
  ) {
    this.numStride = layout.numStride;
    this.objStride = layout.objStride;
  }

  /** Capacity in local slots. */
  get capacity(): number {
    return this.num.length / this.numStride;
  }

  /** Reallocates the arrays to hold `capacity` local slots (at least `count`). */
  resize(capacity: number): void {
    const num = new Float64Array(capacity * this.numStride);
    num.set(this.num.subarray(0, Math.min(this.num.length, num.length)));
    this.num = num;
    if (this.keys.length > capacity) this.keys.length = capacity;
    if (this.obj.length > capacity * this.objStride) this.obj.length = capacity * this.objStride;
  }

  /** Forgets every key and releases the arrays. */
  clear(): void {
    this.map.clear();
    this.num = new Float64Array(0);
    this.keys.length = 0;
    this.obj.length = 0;
    this.count = 0;
  }
}

/** Numbers kept per global slot, side by side in one `Int32Array` (one cache line per key). */
const LINK_WIDTH = 4;
/** Offsets inside a slot's links: the previous and next slot in recency order, the key's local slot, its table's id. */
const PREV = 0;
const NEXT = 1;
const LOCAL = 2;
const TABLE = 3;

/**
 * The store's bookkeeping, kept out of its public surface: global slot numbers (one per key, across
 * namespaces) with the recency list over them, each slot's table and local slot, and the tables.
 */
class Slots {
  #capacity = 0;
  /** High-water mark of global slot numbers handed out. */
  #used = 0;
  size = 0;
  /** Per global slot, {@link LINK_WIDTH} numbers: see {@link PREV}, {@link NEXT}, {@link LOCAL}, {@link TABLE}. */
  links = new Int32Array(0);
  #head = NONE; // most recently used
  #tail = NONE; // least recently used
  #free: number[] = [];
  readonly byId = new Map<string, Table>();
  readonly tables: Table[] = [];
  /**
   * The keys' overrides and manual blocks, by identifier (`storageKey`: shared by every namespace
   * with the key's prefix and tier, as in a Redis hash). Not bounded by `maxKeys` and never evicted:
   * an operator sets them, and they last until they end or are cleared.
   */
  readonly controls = new Map<string, KeyControls>();

  constructor(
    readonly maxKeys: number,
    readonly clock: () => number,
  ) {}

  /** The clock as integer microseconds. */
  nowUs(): number {
    return Math.floor(this.clock() * 1000);
  }

  /** The table for `id`, made on first use. */
  table(id: string, layout: Layout): Table {
    let table = this.byId.get(id);
    if (table === undefined) {
      table = new Table(this.tables.length, layout);
      this.tables.push(table);
      this.byId.set(id, table);
    }
    return table;
  }

  clear(): void {
    this.controls.clear();
    for (const table of this.tables) table.clear();
    this.#free = [];
    this.#used = 0;
    this.#capacity = 0;
    this.links = new Int32Array(0);
    this.size = 0;
    this.#head = this.#tail = NONE;
  }

  /** Marks global slot `slot` most recently used. */
  touch(slot: number): void {
    const head = this.#head;
    if (slot === head) return;
    const links = this.links;
    const at = LINK_WIDTH * slot;
    const p = links[at + PREV] as number;
    const n = links[at + NEXT] as number;
    // unlink (slot is not the head, so p !== NONE)
    links[LINK_WIDTH * p + NEXT] = n;
    if (n === NONE) this.#tail = p;
    else links[LINK_WIDTH * n + PREV] = p;
    // link at the head
    links[at + PREV] = NONE;
    links[at + NEXT] = head;
    links[LINK_WIDTH * head + PREV] = slot;
    this.#head = slot;
  }

  /** Takes a slot for `key` in `table` (evicting first if full), with zeroed state; returns its local slot. */
  allocate(table: Table, key: string, nowUs: number): number {
    if (this.size >= this.maxKeys) this.#evict(nowUs);
    let slot = this.#free.pop();
    if (slot === undefined) {
      slot = this.#used++;
      if (slot >= this.#capacity) this.#grow(slot + 1);
    }
    const local = table.count++;
    if (local >= table.capacity) table.resize(Math.min(this.maxKeys, Math.max(MIN_TABLE_CAPACITY, table.capacity * 2)));
    const stride = table.numStride;
    table.num.fill(0, local * stride, (local + 1) * stride);
    table.keys[local] = key;
    table.map.set(key, slot);
    const links = this.links;
    const at = LINK_WIDTH * slot;
    links[at + LOCAL] = local;
    links[at + TABLE] = table.id;
    // link at the head
    links[at + PREV] = NONE;
    links[at + NEXT] = this.#head;
    if (this.#head !== NONE) links[LINK_WIDTH * this.#head + PREV] = slot;
    else this.#tail = slot;
    this.#head = slot;
    this.size++;
    return local;
  }

  /** Forgets the key held in global slot `slot`. */
  remove(slot: number): void {
    const links = this.links;
    const at = LINK_WIDTH * slot;
    const table = this.tables[links[at + TABLE] as number] as Table;
    const local = links[at + LOCAL] as number;
    table.map.delete(table.keys[local] as string);
    // keep the table packed: the last local slot moves into the freed one
    const last = --table.count;
    const { numStride, objStride, num, obj, keys } = table;
    if (local !== last) {
      num.copyWithin(local * numStride, last * numStride, (last + 1) * numStride);
      for (let i = 0; i < objStride; i++) obj[local * objStride + i] = obj[last * objStride + i];
      const movedKey = keys[last] as string;
      keys[local] = movedKey;
      links[LINK_WIDTH * (table.map.get(movedKey) as number) + LOCAL] = local;
    }
    keys[last] = undefined;
    for (let i = last * objStride, end = i + objStride; i < end; i++) obj[i] = undefined;
    let capacity = table.capacity;
    while (capacity > MIN_TABLE_CAPACITY && table.count < capacity / 4) capacity /= 2;
    if (capacity < table.capacity) table.resize(Math.max(MIN_TABLE_CAPACITY, Math.ceil(capacity)));
    // unlink from the recency list
    const p = links[at + PREV] as number;
    const n = links[at + NEXT] as number;
    if (p === NONE) this.#head = n;
    else links[LINK_WIDTH * p + NEXT] = n;
    if (n === NONE) this.#tail = p;
    else links[LINK_WIDTH * n + PREV] = p;
    this.#free.push(slot);
    this.size--;
  }

  #evict(nowUs: number): void {
    let slot = this.#tail;
    for (let i = 0; i < EVICTION_SCAN && slot !== NONE; i++) {
      if (this.#expired(slot, nowUs)) {
        this.remove(slot);
        return;
      }
      slot = this.links[LINK_WIDTH * slot + PREV] as number;
    }
    this.remove(this.#tail);
  }

  #expired(slot: number, nowUs: number): boolean {
    const at = LINK_WIDTH * slot;
    const table = this.tables[this.links[at + TABLE] as number] as Table;
    const local = this.links[at + LOCAL] as number;
    const { policies, numOffsets, objOffsets } = table.layout;
    for (let i = 0; i < policies.length; i++) {
      const expiry = expiresAtUs(
        policies[i] as Policy,
        table.num,
        local * table.numStride + (numOffsets[i] as number),
        table.obj,
        local * table.objStride + (objOffsets[i] as number),
      );
      if (expiry > nowUs) return false;
      if (table.layout.hasBlock && blockExpiresAtUs(table.layout, i, table.num, local * table.numStride) > nowUs) return false;
    }
    return true;
  }

  #grow(min: number): void {
    const capacity = Math.min(this.maxKeys, Math.max(min, INITIAL_CAPACITY, this.#capacity * 2));
    const links = new Int32Array(LINK_WIDTH * capacity);
    links.set(this.links);
    this.links = links;
    this.#capacity = capacity;
  }
}

/**
 * An in-process store: bounded, O(1) per decision, no timers. Each key has a global slot number,
 * and the recency list (an intrusive doubly linked list over slots, so a hit never re-inserts
 * into a `Map`) spans every namespace; each namespace keeps its keys' state in its own typed
 * arrays, packed by a local slot number, so memory follows the number of keys, however many
 * namespaces (tiers, prefixes) share the store. A `Map` per namespace holds the caller's key
 * (never a prefixed copy). Expired entries are dropped lazily: an expired state reads as empty,
 * and eviction prefers expired entries.
 *
 * @example
 * ```ts
 * const store = new MemoryStore({ maxKeys: 50_000 });
 * const limiter = new RateLimiter({ store, limits: [slidingWindow({ limit: 100, window: "1m" })] });
 * ```
 */
export class MemoryStore implements Store {
  readonly maxKeys: number;
  readonly clock: () => number;
  readonly #slots: Slots;

  constructor(options: MemoryStoreOptions = {}) {
    if (typeof options !== "object" || options === null) {
      throw new SluiceConfigError(`options must be an object like { maxKeys, clock }; got ${describe(options)}`, { option: "options" });
    }
    const { maxKeys = 100_000, clock = Date.now } = options;
    if (typeof maxKeys !== "number" || !Number.isSafeInteger(maxKeys) || maxKeys <= 0 || maxKeys > 2 ** 31 - 1) {
      throw new SluiceConfigError(`maxKeys must be a positive integer below 2^31; got ${describe(maxKeys)}`, { option: "maxKeys" });
    }
    if (typeof clock !== "function") {
      throw new SluiceConfigError(`clock must be a function returning epoch milliseconds; got ${describe(clock)}`, { option: "clock" });
    }
    this.maxKeys = maxKeys;
    this.clock = clock;
    this.#slots = new Slots(maxKeys, clock);
  }

  /** Keys currently held, across namespaces. */
  get size(): number {
    return this.#slots.size;
  }

  /** Forgets every key of every namespace. */
  clear(): void {
    this.#slots.clear();
  }

  /**
   * Prepares a namespace. Namespaces with the same prefix, tier and policy names and algorithms
   * share their keys' state; any other namespace has its own.
   */
  bind(namespace: StoreNamespace): BoundStore {
    assertNamespace(namespace);
    const layout = layoutOf(namespace.policies);
    // a penalty box adds numbers to a key's record: a namespace with one never shares a table with one without
    const id = `${namespaceKey(namespace)}\u0000${namespace.policies.map((p) => (p.block === undefined ? policyField(p) : `${policyField(p)}|block`)).join("\u0000")}`;
    const slots = this.#slots;
    return new MemoryBinding(slots, slots.table(id, layout), layout, namespaceKey(namespace));
  }
}

/** Whether every policy allowed (the request was charged). */
function allAllowed(results: readonly PolicyResult[]): boolean {
  for (let i = 0; i < results.length; i++) if (!(results[i] as PolicyResult).allowed) return false;
  return true;
}

/** A charge that came without marks: a bucket gives nothing back for it. */
const NO_MARKS: readonly number[] = Object.freeze([]);

/** A key's override and manual block in a {@link MemoryStore} (times in µs). */
interface KeyControls {
  /** The override's body, or `undefined`. */
  body: string | undefined;
  /** When the override ends (`Number.MAX_SAFE_INTEGER`: never). */
  overrideEndUs: number;
  /** When the manual block ends (0: none). */
  blockUntilUs: number;
}

/**
 * A MemoryStore namespace. Not exported from the package: `RateLimiter` recognises it to decide
 * without the `StoreResult` wrapper (see {@link MemoryBinding.consumePolicies}).
 */
export class MemoryBinding implements BoundStore {
  /**
   * The `now` (epoch ms) of the last {@link MemoryBinding.consumePolicies} call, read by the
   * limiter right after it, in the same synchronous turn.
   */
  lastNow = 0;
  /**
   * The marks of the last {@link MemoryBinding.consumePolicies} call when it was allowed and a
   * policy is a bucket (see `StoreResult.marks`); `undefined` otherwise. Read like `lastNow`.
   */
  lastMarks: number[] | undefined = undefined;
  /** The override that applied to the last {@link MemoryBinding.consumePolicies} call, or `undefined`. Read like `lastNow`. */
  lastOverride: Override | undefined = undefined;
  readonly #slots: Slots;
  /** The namespace's identifier prefix (`namespaceKey`): a key's identifier is this plus its encoded key. */
  readonly #nsKey: string;
  /** The layouts of the effective policies, by override body. */
  readonly #effective = new Map<string, Layout>();
  readonly #table: Table;
  readonly #layout: Layout;
  readonly #single: Policy | undefined;
  readonly #scratchNum: Float64Array;
  readonly #scratchObj: unknown[] = [];

  constructor(slots: Slots, table: Table, layout: Layout, nsKey: string) {
    this.#slots = slots;
    this.#nsKey = nsKey;
    this.#table = table;
    this.#layout = layout;
    this.#single = layout.policies.length === 1 && !layout.hasBlock ? layout.policies[0] : undefined;
    this.#scratchNum = new Float64Array(layout.numStride);
  }

  consume(key: string, cost: number, lease = 0): StoreResult {
    const policies = this.consumePolicies(key, cost, lease);
    const marks = this.lastMarks;
    const result: StoreResult = marks === undefined ? { now: this.lastNow, policies } : { now: this.lastNow, policies, marks };
    if (this.lastOverride !== undefined) result.override = this.lastOverride;
    return result;
  }

  /** The key's live override and manual block (expired parts dropped), or `undefined`. */
  #controls(key: string, nowUs: number): KeyControls | undefined {
    const controls = this.#slots.controls;
    if (controls.size === 0) return undefined;
    const id = this.#nsKey + encodeKeyPart(key);
    const c = controls.get(id);
    if (c === undefined) return undefined;
    if (c.body !== undefined && c.overrideEndUs <= nowUs) c.body = undefined;
    if (c.blockUntilUs <= nowUs) c.blockUntilUs = 0;
    if (c.body === undefined && c.blockUntilUs === 0) {
      controls.delete(id);
      return undefined;
    }
    return c;
  }

  /** The layout that applies under an override's body (not `"u"`). */
  #layoutFor(body: string): Layout {
    let layout = this.#effective.get(body);
    if (layout === undefined) {
      layout = layoutOf(effectivePolicies(this.#layout.policies, body));
      if (this.#effective.size >= 256) this.#effective.clear();
      this.#effective.set(body, layout);
    }
    return layout;
  }

  /** The key's record's offsets, or `undefined` when it has none. */
  #local(key: string): number | undefined {
    const slot = this.#table.map.get(key);
    return slot === undefined ? undefined : (this.#slots.links[LINK_WIDTH * slot + LOCAL] as number);
  }

  /** Every policy's answer now (a cost-`cost` request, written nowhere) under a manual block or an unlimited override. */
  #answerControlled(key: string, c: KeyControls, nowUs: number, cost: number): PolicyResult[] {
    const layout = c.body === undefined || c.body === "u" ? this.#layout : this.#layoutFor(c.body);
    if (c.body === "u") {
      return c.blockUntilUs === 0 ? unlimitedResults(this.#layout.policies, Math.floor(nowUs / 1000)) : unlimitedBlockedResults(this.#layout.policies, nowUs, c.blockUntilUs);
    }
    const local = this.#local(key);
    const table = this.#table;
    if (c.blockUntilUs > 0) {
      return local === undefined
        ? manuallyBlocked(layout, new Float64Array(layout.numStride), 0, [], 0, nowUs, cost, c.blockUntilUs)
        : manuallyBlocked(layout, table.num, local * table.numStride, table.obj, local * table.objStride, nowUs, cost, c.blockUntilUs);
    }
    return local === undefined
      ? peekAll(layout, new Float64Array(layout.numStride), 0, [], 0, nowUs)
      : peekAll(layout, table.num, local * table.numStride, table.obj, local * table.objStride, nowUs);
  }

  /**
   * `consume()` without the wrapper object: returns the policies' results and leaves `now` in
   * {@link MemoryBinding.lastNow}. The limiter's way in, so that a denial allocates nothing but
   * what the decision holds (its policies' results).
   */
  consumePolicies(key: string, cost: number, lease: number): PolicyResult[] {
    const slots = this.#slots;
    const table = this.#table;
    const layout = this.#layout;
    const nowUs = slots.nowUs();
    this.lastNow = Math.floor(nowUs / 1000);
    return this.#consumeWith(slots.controls.size === 0 ? undefined : this.#controls(key, nowUs), layout, key, cost, lease, nowUs);
  }

  #consumeWith(c: KeyControls | undefined, baseLayout: Layout, key: string, cost: number, lease: number, nowUs: number): PolicyResult[] {
    const slots = this.#slots;
    const table = this.#table;
    let layout = baseLayout;
    let single = this.#single;
    this.lastOverride = undefined;
    if (c !== undefined) {
      this.lastOverride = c.body === undefined ? undefined : overrideFromText(c.body);
      if (c.blockUntilUs > 0 || c.body === "u") {
        this.lastMarks = undefined;
        return this.#answerControlled(key, c, nowUs, cost);
      }
      if (c.body !== undefined) {
        layout = this.#layoutFor(c.body);
        single = undefined;
      }
    }
    const slot = table.map.get(key);
    let local: number;
    if (slot === undefined) {
      if (cost > layout.maxCost) {
        // can never pass: evaluate against the empty state (the scratch arrays, never written) without taking a slot
        this.lastMarks = undefined;
        return consumeAll(layout, this.#scratchNum, 0, this.#scratchObj, 0, nowUs, cost);
      }
      local = slots.allocate(table, key, nowUs);
    } else {
      slots.touch(slot);
      local = slots.links[LINK_WIDTH * slot + LOCAL] as number;
    }
    const results =
      single !== undefined
        ? [evaluate(single, table.num, local * table.numStride, table.obj, local * table.objStride, nowUs, cost, true, lease)]
        : consumeAll(layout, table.num, local * table.numStride, table.obj, local * table.objStride, nowUs, cost, lease);
    // a bucket's charge carries a mark for refunds (read only when a bucket is configured and it passed)
    this.lastMarks = layout.hasBucket && allAllowed(results) ? chargeMarks(layout, table.num, local * table.numStride) : undefined;
    return results;
  }

  peek(key: string): StoreResult {
    const slots = this.#slots;
    const nowUs = slots.nowUs();
    const c = this.#controls(key, nowUs);
    if (c !== undefined) {
      const result: StoreResult = { now: Math.floor(nowUs / 1000), policies: this.#answerControlled(key, c, nowUs, 1) };
      if (c.body !== undefined) result.override = overrideFromText(c.body);
      return result;
    }
    const table = this.#table;
    const slot = table.map.get(key);
    let policies;
    if (slot === undefined) {
      policies = peekAll(this.#layout, this.#scratchNum, 0, this.#scratchObj, 0, nowUs);
    } else {
      const local = slots.links[LINK_WIDTH * slot + LOCAL] as number;
      policies = peekAll(this.#layout, table.num, local * table.numStride, table.obj, local * table.objStride, nowUs);
    }
    return { now: Math.floor(nowUs / 1000), policies };
  }

  reset(key: string): void {
    // everything stored for the key goes, its override and manual block included (as a Redis DEL)
    if (this.#slots.controls.size !== 0) this.#slots.controls.delete(this.#nsKey + encodeKeyPart(key));
    const slot = this.#table.map.get(key);
    if (slot !== undefined) this.#slots.remove(slot);
  }

  refund(key: string, cost: number, charge: RefundCharge | undefined): StoreResult {
    const slot = this.#table.map.get(key);
    const c = this.#controls(key, this.#slots.nowUs());
    // under an unlimited override nothing is counted, and nothing is given back
    if (slot !== undefined && c?.body !== "u") {
      const layout = c?.body === undefined ? this.#layout : this.#layoutFor(c.body);
      const local = this.#slots.links[LINK_WIDTH * slot + LOCAL] as number;
      const table = this.#table;
      const chargedAtUs = charge === undefined ? -1 : charge.atMs * 1000;
      const marks = charge === undefined ? undefined : (charge.marks ?? NO_MARKS);
      refundAll(layout, table.num, local * table.numStride, table.obj, local * table.objStride, this.#slots.nowUs(), cost, chargedAtUs, marks, charge?.prices);
    }
    return this.peek(key);
  }

  /**
   * Charges up to `units` to every policy of `key` at once (see `BoundStore.reserve`). A limiter
   * over a MemoryStore never reserves (its decisions are already local); this answers the store
   * contract, so that the one conformance suite holds every store to it.
   */
  reserve(key: string, units: number, holdMs: number): ReserveResult {
    const slots = this.#slots;
    const nowUs = slots.nowUs();
    const now = Math.floor(nowUs / 1000);
    const c = this.#controls(key, nowUs);
    if (c !== undefined && (c.blockUntilUs > 0 || c.body === "u")) {
      const answered: ReserveResult = { now, policies: this.#answerControlled(key, c, nowUs, 1), granted: 0 };
      if (c.body !== undefined) answered.override = overrideFromText(c.body);
      return answered;
    }
    const layout = c?.body === undefined ? this.#layout : this.#layoutFor(c.body);
    const table = this.#table;
    const slot = table.map.get(key);
    const local = slot === undefined ? slots.allocate(table, key, nowUs) : slots.links[LINK_WIDTH * slot + LOCAL]!;
    if (slot !== undefined) slots.touch(slot);
    const base = local * table.numStride;
    const { granted, results } = reserveAll(layout, table.num, base, table.obj, local * table.objStride, nowUs, units, holdMs * 1000);
    const result: ReserveResult = { now, policies: results, granted };
    if (granted > 0) {
      const marks = chargeMarks(layout, table.num, base);
      if (marks !== undefined) result.marks = marks;
    }
    if (c?.body !== undefined) result.override = overrideFromText(c.body);
    return result;
  }

  release(key: string, lease: number): StoreResult {
    const slot = this.#table.map.get(key);
    if (slot !== undefined) {
      const local = this.#slots.links[LINK_WIDTH * slot + LOCAL] as number;
      const table = this.#table;
      releaseAll(this.#layout, table.num, local * table.numStride, table.obj, local * table.objStride, this.#slots.nowUs(), lease);
    }
    return this.peek(key);
  }

  control(key: string, command: StoreCommand): ControlResult {
    const slots = this.#slots;
    const nowUs = slots.nowUs();
    const now = Math.floor(nowUs / 1000);
    const id = this.#nsKey + encodeKeyPart(key);
    const op = assertStoreCommand(command);
    const live = this.#controls(key, nowUs);
    if (op === "getOverride") return { now, override: live?.body };
    if (op === "setOverride") {
      const { override: body, ttlMs } = command as { override: string; ttlMs: number };
      const c = live ?? { body: undefined, overrideEndUs: 0, blockUntilUs: 0 };
      c.body = body;
      c.overrideEndUs = ttlMs === 0 ? Number.MAX_SAFE_INTEGER : nowUs + ttlMs * 1000;
      slots.controls.set(id, c);
      return { now, override: body };
    }
    if (op === "clearOverride") {
      if (live !== undefined) {
        live.body = undefined;
        if (live.blockUntilUs === 0) slots.controls.delete(id);
      }
      return { now, override: undefined };
    }
    if (op === "block") {
      const { durationMs } = command as { durationMs: number };
      const c = live ?? { body: undefined, overrideEndUs: 0, blockUntilUs: 0 };
      c.blockUntilUs = nowUs + durationMs * 1000;
      slots.controls.set(id, c);
      return { now, override: c.body };
    }
    {
      // unblock
      if (live !== undefined) {
        live.blockUntilUs = 0;
        if (live.body === undefined) slots.controls.delete(id);
      }
      // and the namespace's penalty boxes: blocked until 0, offences forgotten
      const local = this.#local(key);
      const layout = this.#layout;
      if (local !== undefined && layout.hasBlock) {
        const base = local * this.#table.numStride;
        for (const bo of layout.blockOffsets) {
          if (bo < 0) continue;
          this.#table.num[base + bo] = 0;
          this.#table.num[base + bo + 1] = 0;
        }
      }
      return { now, override: live?.body };
    }
  }
}
