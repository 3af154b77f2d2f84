import { SluiceConfigError, describe } from "./errors.js";
import type { Policy } from "./algorithms.js";
import { type Layout, consumeAll, evaluate, expiresAtUs, layoutOf, peekAll } from "./engine.js";
import type { BoundStore, Store, StoreNamespace, StoreResult } from "./types.js";

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

/** Storage shared by every namespace with the same prefix and policy names/kinds. */
interface Table {
  /** The layout of the first binding: used to tell whether a slot's state has expired. */
  readonly layout: Layout;
  readonly numStride: number;
  readonly objStride: number;
  readonly map: Map<string, number>;
  num: Float64Array;
  readonly obj: unknown[];
}

const NONE = -1;
/** How many entries from the least-recently-used end are searched for an expired one before evicting the LRU. */
const EVICTION_SCAN = 16;
const INITIAL_CAPACITY = 1024;

/**
 * An in-process store: bounded, O(1) per decision, no timers. State sits in typed arrays indexed by
 * a slot number; a `Map` from the caller's key (never a prefixed copy) to its slot per namespace;
 * recency is an intrusive doubly linked list over slots, so a hit never re-inserts into the `Map`.
 * Expired entries are dropped lazily: an expired state reads as empty, and eviction prefers
 * expired entries.
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
  #capacity = 0;
  #used = 0; // high-water mark of slot numbers handed out
  #size = 0;
  #keys: (string | undefined)[] = [];
  #tables: (Table | undefined)[] = [];
  #prev = new Int32Array(0);
  #next = new Int32Array(0);
  #head = NONE; // most recently used
  #tail = NONE; // least recently used
  #free: number[] = [];
  readonly #byId = new Map<string, Table>();

  constructor(options: MemoryStoreOptions = {}) {
    if (typeof options !== "object" || options === null) {
      throw new SluiceConfigError(`MemoryStore options must be an object; got ${describe(options)}`);
    }
    const { maxKeys = 100_000, clock = Date.now } = options;
    if (typeof maxKeys !== "number" || !Number.isSafeInteger(maxKeys) || maxKeys <= 0 || maxKeys > 2 ** 31 - 1) {
      throw new SluiceConfigError(`MemoryStore: maxKeys must be a positive integer below 2^31; got ${describe(maxKeys)}`);
    }
    if (typeof clock !== "function") {
      throw new SluiceConfigError(`MemoryStore: clock must be a function returning epoch milliseconds; got ${describe(clock)}`);
    }
    this.maxKeys = maxKeys;
    this.clock = clock;
  }

  /** Keys currently held, across namespaces. */
  get size(): number {
    return this.#size;
  }

  /** Forgets every key of every namespace. */
  clear(): void {
    for (const table of this.#byId.values()) {
      table.map.clear();
      table.obj.length = 0;
    }
    this.#keys = [];
    this.#tables = [];
    this.#free = [];
    this.#used = 0;
    this.#size = 0;
    this.#head = this.#tail = NONE;
  }

  bind(namespace: StoreNamespace): BoundStore {
    const layout = layoutOf(namespace.policies);
    const id = `${namespace.prefix}\u0000${namespace.policies.map((p) => `${p.kind}:${p.name}`).join("\u0000")}`;
    let table = this.#byId.get(id);
    if (table === undefined) {
      table = { layout, numStride: layout.numStride, objStride: layout.objStride, map: new Map(), num: new Float64Array(0), obj: [] };
      this.#byId.set(id, table);
    }
    return new MemoryBinding(this, table, layout);
  }

  /** @internal the clock as integer microseconds. */
  nowUs(): number {
    return Math.floor(this.clock() * 1000);
  }

  /** @internal marks `slot` most recently used. */
  touch(slot: number): void {
    if (slot === this.#head) return;
    const prev = this.#prev;
    const next = this.#next;
    const p = prev[slot] as number;
    const n = next[slot] as number;
    // unlink (slot is not the head, so p !== NONE)
    next[p] = n;
    if (n === NONE) this.#tail = p;
    else prev[n] = p;
    // link at the head
    prev[slot] = NONE;
    next[slot] = this.#head;
    prev[this.#head] = slot;
    this.#head = slot;
  }

  /** @internal takes a slot for `key` in `table` (evicting if full), with zeroed state. */
  allocate(table: Table, key: string, nowUs: number): number {
    if (this.#size >= this.maxKeys) this.#evict(nowUs);
    let slot = this.#free.pop();
    if (slot === undefined) {
      slot = this.#used++;
      if (slot >= this.#capacity) this.#grow(slot + 1);
    }
    const stride = table.numStride;
    const end = (slot + 1) * stride;
    if (end > table.num.length) {
      const slots = Math.max(slot + 1, Math.min(this.#capacity, Math.max(INITIAL_CAPACITY, (table.num.length / stride) * 2)));
      const bigger = new Float64Array(slots * stride);
      bigger.set(table.num);
      table.num = bigger;
    } else {
      table.num.fill(0, slot * stride, end);
    }
    this.#keys[slot] = key;
    this.#tables[slot] = table;
    // link at the head
    this.#prev[slot] = NONE;
    this.#next[slot] = this.#head;
    if (this.#head !== NONE) this.#prev[this.#head] = slot;
    else this.#tail = slot;
    this.#head = slot;
    table.map.set(key, slot);
    this.#size++;
    return slot;
  }

  /** @internal forgets the key held in `slot`. */
  remove(slot: number): void {
    const table = this.#tables[slot] as Table;
    table.map.delete(this.#keys[slot] as string);
    for (let i = slot * table.objStride, end = i + table.objStride; i < end; i++) table.obj[i] = undefined;
    const p = this.#prev[slot] as number;
    const n = this.#next[slot] as number;
    if (p === NONE) this.#head = n;
    else this.#next[p] = n;
    if (n === NONE) this.#tail = p;
    else this.#prev[n] = p;
    this.#keys[slot] = undefined;
    this.#tables[slot] = undefined;
    this.#free.push(slot);
    this.#size--;
  }

  #evict(nowUs: number): void {
    let slot = this.#tail;
    for (let i = 0; i < EVICTION_SCAN && slot !== NONE; i++) {
      if (this.#expired(slot, nowUs)) {
        this.remove(slot);
        return;
      }
      slot = this.#prev[slot] as number;
    }
    this.remove(this.#tail);
  }

  #expired(slot: number, nowUs: number): boolean {
    const table = this.#tables[slot] as Table;
    const { policies, numOffsets, objOffsets } = table.layout;
    for (let i = 0; i < policies.length; i++) {
      const at = expiresAtUs(
        policies[i]!,
        table.num,
        slot * table.numStride + numOffsets[i]!,
        table.obj,
        slot * table.objStride + objOffsets[i]!,
      );
      if (at > nowUs) return false;
    }
    return true;
  }

  #grow(min: number): void {
    const capacity = Math.min(this.maxKeys, Math.max(min, INITIAL_CAPACITY, this.#capacity * 2));
    const prev = new Int32Array(capacity);
    const next = new Int32Array(capacity);
    prev.set(this.#prev);
    next.set(this.#next);
    this.#prev = prev;
    this.#next = next;
    this.#capacity = capacity;
  }
}

class MemoryBinding implements BoundStore {
  readonly #scratchNum: Float64Array;
  readonly #scratchObj: unknown[] = [];
  constructor(
    readonly store: MemoryStore,
    readonly table: Table,
    readonly layout: Layout,
  ) {
    this.#scratchNum = new Float64Array(layout.numStride);
  }

  consume(key: string, cost: number): StoreResult {
    const store = this.store;
    const table = this.table;
    const nowUs = store.nowUs();
    let slot = table.map.get(key);
    if (slot === undefined) {
      if (cost > this.layout.maxCost) {
        // can never pass: evaluate against the empty state without taking a slot
        return { now: Math.floor(nowUs / 1000), policies: consumeAll(this.layout, this.#scratchNum, 0, this.#scratchObj, 0, nowUs, cost) };
      }
      slot = store.allocate(table, key, nowUs);
    } else {
      store.touch(slot);
    }
    const layout = this.layout;
    const policies =
      layout.policies.length === 1
        ? [evaluate(layout.policies[0] as Policy, table.num, slot * table.numStride, table.obj, slot * table.objStride, nowUs, cost, true)]
        : consumeAll(layout, table.num, slot * table.numStride, table.obj, slot * table.objStride, nowUs, cost);
    return { now: Math.floor(nowUs / 1000), policies };
  }

  peek(key: string): StoreResult {
    const nowUs = this.store.nowUs();
    const table = this.table;
    const slot = table.map.get(key);
    const policies =
      slot === undefined
        ? peekAll(this.layout, this.#scratchNum, 0, this.#scratchObj, 0, nowUs)
        : peekAll(this.layout, table.num, slot * table.numStride, table.obj, slot * table.objStride, nowUs);
    return { now: Math.floor(nowUs / 1000), policies };
  }

  reset(key: string): void {
    const slot = this.table.map.get(key);
    if (slot !== undefined) this.store.remove(slot);
  }
}
