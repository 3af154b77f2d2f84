/**
 * What a limiter holds besides its public fields, in one object every concern module takes as its
 * first argument (`limitNow(core, key, options)`): the bound store, the deny cache, the fallback,
 * the reservations. `RateLimiter` keeps it in its one private field: only its methods and the
 * pipeline's `limitNow` reach it. `setup.ts` builds it; nothing here imports a concern module.
 *
 * @module
 */
import type { Policy } from "../algorithms/index.js";
import type { DenyCache } from "../deny-cache.js";
import type { FallbackLeases } from "../leases.js";
import type { MemoryBinding } from "../memory-store.js";
import type { Reservations } from "../reservations.js";
import type { BoundStore, Decision, Store, StoreNamespace } from "../types.js";
import type { LimiterMode, StoreErrorMode } from "./options.js";

/**
 * The limiter's public methods that its own work calls through the limiter itself, so that a
 * subclass overriding one is called there too.
 */
export interface LimiterHost {
  peek(key: string): Promise<Decision>;
  reportStoreFailure(error: unknown): void;
}

/** A limiter's private state, shared by its concern modules. */
export interface LimiterCore {
  /** The limiter itself, for the calls that go through its public methods (see {@link LimiterHost}). */
  readonly host: LimiterHost;
  /** The store (the limiter's `store`); `bound` is its namespace for this limiter. */
  readonly store: Store;
  /** The policies, in order (the limiter's `policies`). */
  readonly policies: readonly Policy[];
  readonly onStoreError: StoreErrorMode;
  /** Milliseconds a store call may take, or `false` for no timeout. */
  readonly timeoutMs: number | false;
  /** Whether `timeoutMs` is the default: the store may then extend it (`BoundStore.extendTimeout`). */
  readonly patient: boolean;
  readonly mode: LimiterMode;
  /** The deny cache; `undefined` when off. */
  readonly denials: DenyCache | undefined;
  readonly namespace: StoreNamespace;
  /** This limiter's namespace token: a decision it made refunds only through it (or a twin). */
  readonly owner: object;
  readonly bound: BoundStore;
  /** `bound` when it is a MemoryStore's own namespace (not wrapped): decided without the `StoreResult` wrapper. */
  readonly memory: MemoryBinding | undefined;
  readonly onStoreFailure: ((error: unknown) => void) | undefined;
  /** Whether a policy is a concurrency cap: each `limit()` then draws a lease id. */
  readonly concurrent: boolean;
  /** The names of the concurrency policies (empty without one): a denial they bind is never cached. */
  readonly concurrencyNames: ReadonlySet<string>;
  /** The per-instance `MemoryStore` of `onStoreError: "fallback"`, made at the first store failure. */
  fallback: BoundStore | undefined;
  /**
   * The leases acquired through the fallback store while the store was down (they live only
   * there): releasing one succeeds even while the store is still down. Bounded: the oldest ids are
   * forgotten first (a forgotten one is still freed by the fallback, or expires).
   */
  readonly fallbackLeases: FallbackLeases;
  /**
   * Reservations (the `reserve` option); `undefined` when off, or when the store or a policy cannot
   * reserve. Set once by `setup.ts`, right after the rest: their hooks call back into this object.
   */
  reservations: Reservations | undefined;
}
