/**
 * `DurableObjectStore`: the core `Store` contract over the `SluiceLimiter` Durable Object. Each
 * decision is one RPC call to the object that holds the key; the object decides with its own clock.
 *
 * @module
 */
import { type BoundStore, SluiceConfigError, type Store, type StoreNamespace, type StoreResult } from "@sluice/core";
import { type ConsumeCall, type LimiterCall, type ResetCall, objectName, specOf } from "./protocol.js";

/** The RPC methods of a `SluiceLimiter` stub that the store calls. */
export interface SluiceLimiterStub {
  consume(call: ConsumeCall): Promise<StoreResult>;
  peek(call: LimiterCall): Promise<StoreResult>;
  reset(call: ResetCall): Promise<void>;
}

/**
 * The part of a Durable Object namespace binding (`env.SLUICE`, a
 * `DurableObjectNamespace<SluiceLimiter>`) that the store uses.
 */
export interface SluiceLimiterNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions): unknown;
}

/** Options of {@link DurableObjectStore}. */
export interface DurableObjectStoreOptions {
  /**
   * `0` (the default): one object per (prefix, key), named `${prefix}\u0000${key}` — every key gets
   * its own single-threaded object, so keys never wait on each other. A positive integer N: keys
   * are hashed (FNV-1a) onto N objects per prefix — fewer, busier objects, for many small keys
   * whose objects would otherwise each be created for a handful of requests. Changing `shards`
   * moves every key to another object: their counts start again from empty.
   * @default 0
   */
  shards?: number;
  /**
   * Where new objects are created (`namespace.get(id, { locationHint })`), e.g. `"weur"`. Without it,
   * an object is created near the first request that uses it.
   */
  locationHint?: DurableObjectLocationHint;
}

/** The most shards a store may spread keys over. */
export const MAX_SHARDS = 65_536;

/**
 * The registry key of the test clock. Only `@sluice/cloudflare/testing` sets it; see `testing.ts`
 * for the fence.
 * @internal
 */
export const TEST_CLOCK: unique symbol = Symbol.for("@sluice/cloudflare:test-clock") as never;

/**
 * A Sluice store in the `SluiceLimiter` Durable Object. Each decision — every policy of the key, all
 * or nothing — is one RPC call to the object that holds the key, decided with the object's clock,
 * so Workers in every location (with skewed clocks) agree. The policies travel with each call as
 * plain data and are rebuilt (validated) inside the object.
 *
 * Build it where `env` is known: in a module Worker that is inside `fetch` (or once per `env`, as
 * `withRateLimit`'s limiter factory does).
 *
 * @example
 * ```ts
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { DurableObjectStore } from "@sluice/cloudflare";
 * export { SluiceLimiter } from "@sluice/cloudflare";
 *
 * export default {
 *   async fetch(request: Request, env: { SLUICE: DurableObjectNamespace<SluiceLimiter> }) {
 *     const limiter = new RateLimiter({
 *       store: new DurableObjectStore(env.SLUICE),
 *       limits: slidingWindow({ limit: 100, window: "1m" }),
 *     });
 *     const decision = await limiter.limit(request.headers.get("CF-Connecting-IP") ?? "unknown");
 *     return decision.allowed ? new Response("ok") : new Response("slow down", { status: 429 });
 *   },
 * };
 * ```
 */
export class DurableObjectStore implements Store {
  readonly namespace: SluiceLimiterNamespace;
  readonly shards: number;
  readonly locationHint: DurableObjectLocationHint | undefined;
  /** @internal */
  [TEST_CLOCK]?: () => number;

  constructor(namespace: SluiceLimiterNamespace, options: DurableObjectStoreOptions = {}) {
    if (
      typeof namespace !== "object" ||
      namespace === null ||
      typeof (namespace as Partial<SluiceLimiterNamespace>).idFromName !== "function" ||
      typeof (namespace as Partial<SluiceLimiterNamespace>).get !== "function"
    ) {
      throw new SluiceConfigError(
        "[sluice] [cloudflare] DurableObjectStore needs the Durable Object namespace binding of the SluiceLimiter class (env.SLUICE, say); got something without idFromName() and get()",
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new SluiceConfigError("[sluice] [cloudflare] DurableObjectStore options must be an object");
    }
    const shards = options.shards ?? 0;
    if (typeof shards !== "number" || !Number.isSafeInteger(shards) || shards < 0 || shards > MAX_SHARDS) {
      throw new SluiceConfigError(
        `[sluice] [cloudflare] DurableObjectStore: shards must be 0 (one object per key) or an integer from 1 to ${MAX_SHARDS}; got ${String(shards)}`,
      );
    }
    if (options.locationHint !== undefined && typeof options.locationHint !== "string") {
      throw new SluiceConfigError('[sluice] [cloudflare] DurableObjectStore: locationHint must be a string like "weur"');
    }
    this.namespace = namespace;
    this.shards = shards;
    this.locationHint = options.locationHint;
  }

  bind(namespace: StoreNamespace): BoundStore {
    return new DurableObjectBinding(this, namespace.prefix, JSON.stringify(namespace.policies.map(specOf)));
  }

  /** @internal the stub of the object that holds `key` of `prefix`. */
  stub(prefix: string, key: string): SluiceLimiterStub {
    const id = this.namespace.idFromName(objectName(prefix, key, this.shards));
    const stub = this.locationHint === undefined ? this.namespace.get(id) : this.namespace.get(id, { locationHint: this.locationHint });
    return stub as SluiceLimiterStub;
  }
}

class DurableObjectBinding implements BoundStore {
  constructor(
    readonly store: DurableObjectStore,
    readonly prefix: string,
    readonly policies: string,
  ) {}

  #nowMs(): number | undefined {
    const clock = this.store[TEST_CLOCK];
    return clock === undefined ? undefined : clock();
  }

  consume(key: string, cost: number): Promise<StoreResult> {
    const call: ConsumeCall = { prefix: this.prefix, key, policies: this.policies, cost };
    const nowMs = this.#nowMs();
    if (nowMs !== undefined) call.nowMs = nowMs;
    return this.store.stub(this.prefix, key).consume(call);
  }

  peek(key: string): Promise<StoreResult> {
    const call: LimiterCall = { prefix: this.prefix, key, policies: this.policies };
    const nowMs = this.#nowMs();
    if (nowMs !== undefined) call.nowMs = nowMs;
    return this.store.stub(this.prefix, key).peek(call);
  }

  reset(key: string): Promise<void> {
    return this.store.stub(this.prefix, key).reset({ prefix: this.prefix, key });
  }
}
