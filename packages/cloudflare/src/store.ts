/**
 * `DurableObjectStore`: the core `Store` contract over the `SluiceLimiter` Durable Object. Each
 * decision is one RPC call to the object that holds the key; the object decides with its own clock.
 *
 * @module
 */
import { SluiceConfigError, SluiceInputError, SluiceStoreError } from "@sluice/core";
import {
  type BoundStore,
  type ControlResult,
  type RefundCharge,
  type ReserveResult,
  type Store,
  type StoreCommand,
  type StoreNamespace,
  type StoreResult,
  assertNamespace,
} from "@sluice/core/store";
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
  controlFromReply,
  decisionFromReply,
  reservationFromReply,
  objectName,
  policiesFromJson,
  resetFromReply,
  sentNowMs,
  specOf,
} from "./protocol.js";

/**
 * The RPC methods of a `SluiceLimiter` stub that the store calls. A call the object refuses for
 * bad configuration or input answers `{ error: { name, message } }`, which the store rethrows as
 * `SluiceConfigError` or `SluiceInputError`.
 */
export interface SluiceLimiterStub {
  consume(call: ConsumeCall): Promise<DecisionReply>;
  peek(call: LimiterCall): Promise<DecisionReply>;
  refund(call: RefundCall): Promise<DecisionReply>;
  release(call: ReleaseCall): Promise<DecisionReply>;
  reset(call: ResetCall): Promise<ResetReply>;
  control(call: ControlCall): Promise<ControlReply>;
  reserve(call: ReserveCall): Promise<ReserveReply>;
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
   * `0` (the default): one object per (prefix, tier, key), named by core's `storageKey` — every key
   * gets its own single-threaded object, so keys never wait on each other. A positive integer N: keys
   * are hashed (FNV-1a) onto N objects per namespace — fewer, busier objects, for many small keys
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
 * so Workers in every location (with skewed clocks) agree. The key's override and manual block
 * (`limiter.setOverride`, `limiter.block`) are kept in the same object's row: each command is one
 * RPC call, and every decision applies them in its own call. The policies travel with each call as
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
        "[sluice] [cloudflare] namespace must be the Durable Object namespace binding of the SluiceLimiter class (env.SLUICE, say); got something without idFromName() and get()",
        { option: "namespace" },
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new SluiceConfigError(`[sluice] [cloudflare] options must be an object like { shards, locationHint }; got ${String(options)}`, { option: "options" });
    }
    const shards = options.shards ?? 0;
    if (typeof shards !== "number" || !Number.isSafeInteger(shards) || shards < 0 || shards > MAX_SHARDS) {
      throw new SluiceConfigError(
        `[sluice] [cloudflare] shards must be 0 (one object per key) or an integer from 1 to ${MAX_SHARDS}; got ${typeof shards === "string" ? JSON.stringify(shards) : String(shards)}`,
        { option: "shards" },
      );
    }
    if (options.locationHint !== undefined && typeof options.locationHint !== "string") {
      throw new SluiceConfigError(`[sluice] [cloudflare] locationHint must be a string like "weur"; got ${String(options.locationHint)}`, { option: "locationHint" });
    }
    this.namespace = namespace;
    this.shards = shards;
    this.locationHint = options.locationHint;
  }

  /**
   * Prepares a namespace. Checks it synchronously, like every store: a valid prefix and tier, and
   * 1 to `MAX_POLICIES` policies that the object will rebuild exactly (else `SluiceConfigError`).
   */
  bind(namespace: StoreNamespace): BoundStore {
    assertNamespace(namespace, "cloudflare");
    const policies = JSON.stringify(namespace.policies.map(specOf));
    // what the object would refuse, refused here and now
    policiesFromJson(policies);
    return new DurableObjectBinding(this, namespace, policies);
  }

  /** @internal the stub of the object that holds `key` of the namespace. */
  stub(namespace: Pick<StoreNamespace, "prefix" | "tier">, key: string): SluiceLimiterStub {
    const id = this.namespace.idFromName(objectName(namespace, key, this.shards));
    const stub = this.locationHint === undefined ? this.namespace.get(id) : this.namespace.get(id, { locationHint: this.locationHint });
    return stub as SluiceLimiterStub;
  }
}

/** A failed call to the object (an exception, an overloaded or unreachable object): a store failure. */
function failure(method: string, error: unknown): unknown {
  // the caller's mistakes are never outages
  if (error instanceof SluiceConfigError || error instanceof SluiceInputError || error instanceof SluiceStoreError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new SluiceStoreError(`[sluice] [cloudflare] SluiceLimiter.${method}() failed: ${message}`, { cause: error });
}

class DurableObjectBinding implements BoundStore {
  readonly #store: DurableObjectStore;
  readonly #namespace: StoreNamespace;
  readonly #policies: string;

  constructor(store: DurableObjectStore, namespace: StoreNamespace, policies: string) {
    this.#store = store;
    this.#namespace = namespace;
    this.#policies = policies;
  }

  #call(key: string): LimiterCall {
    const call: LimiterCall = { prefix: this.#namespace.prefix, key, policies: this.#policies };
    if (this.#namespace.tier !== undefined) call.tier = this.#namespace.tier;
    const clock = this.#store[TEST_CLOCK];
    if (clock !== undefined) call.nowMs = clock();
    return call;
  }

  /** The object's answer to a call that asked about `cost` units (1 but for a consume), read and checked. */
  #decision(reply: DecisionReply, call: LimiterCall, cost: number): StoreResult {
    return decisionFromReply(reply, this.#namespace.policies, { nowMs: sentNowMs(call.nowMs), cost });
  }

  async consume(key: string, cost: number, lease?: number): Promise<StoreResult> {
    const call: ConsumeCall = { ...this.#call(key), cost };
    if (lease !== undefined && lease !== 0) call.lease = lease;
    let reply: DecisionReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).consume(call);
    } catch (error) {
      throw failure("consume", error);
    }
    return this.#decision(reply, call, cost);
  }

  async peek(key: string): Promise<StoreResult> {
    const call = this.#call(key);
    let reply: DecisionReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).peek(call);
    } catch (error) {
      throw failure("peek", error);
    }
    return this.#decision(reply, call, 1);
  }

  async refund(key: string, cost: number, charge: RefundCharge | undefined): Promise<StoreResult> {
    const call: RefundCall = { ...this.#call(key), cost };
    if (charge !== undefined) {
      call.chargedAtMs = charge.atMs;
      // no marks known: an empty list (a bucket then gives nothing back)
      call.marks = charge.marks === undefined ? [] : [...charge.marks];
      if (charge.prices !== undefined) call.prices = [...charge.prices];
    }
    let reply: DecisionReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).refund(call);
    } catch (error) {
      throw failure("refund", error);
    }
    return this.#decision(reply, call, 1);
  }

  /** Up to `units` charged to every policy of `key` at once (a bucket counting them as used `holdMs` from now): one RPC call. */
  async reserve(key: string, units: number, holdMs: number): Promise<ReserveResult> {
    const call: ReserveCall = { ...this.#call(key), units, holdMs };
    let reply: ReserveReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).reserve(call);
    } catch (error) {
      throw failure("reserve", error);
    }
    // each policy's state after the charge, answered as a peek answers it
    return reservationFromReply(reply, this.#namespace.policies, units, { nowMs: sentNowMs(call.nowMs), cost: 1 });
  }

  async release(key: string, lease: number): Promise<StoreResult> {
    const call: ReleaseCall = { ...this.#call(key), lease };
    let reply: DecisionReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).release(call);
    } catch (error) {
      throw failure("release", error);
    }
    return this.#decision(reply, call, 1);
  }

  async reset(key: string): Promise<void> {
    const call: ResetCall = { prefix: this.#namespace.prefix, key };
    if (this.#namespace.tier !== undefined) call.tier = this.#namespace.tier;
    let reply: ResetReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).reset(call);
    } catch (error) {
      throw failure("reset", error);
    }
    resetFromReply(reply);
  }

  /** An override or manual-block command on `key`'s row: one RPC call, run by the object with its clock. */
  async control(key: string, command: StoreCommand): Promise<ControlResult> {
    const call: ControlCall = { ...this.#call(key), command };
    let reply: ControlReply;
    try {
      reply = await this.#store.stub(this.#namespace, key).control(call);
    } catch (error) {
      throw failure("control", error);
    }
    return controlFromReply(reply, sentNowMs(call.nowMs));
  }
}

/**
 * A binding that skips `bind()`'s checks and sends `policies` (a JSON string) as given: tests use
 * it to show that what the object refuses reaches the caller with its class.
 * @internal
 */
export function bindUnchecked(store: DurableObjectStore, namespace: StoreNamespace, policies: string): BoundStore {
  return new DurableObjectBinding(store, namespace, policies);
}
