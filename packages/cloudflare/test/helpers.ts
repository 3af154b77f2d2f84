/**
 * Node-side test helpers: a test Worker of this package in workerd (bundled and started by
 * `@sluice/testing/miniflare`, never reaching the network: `cf: false`), and a `Store` whose calls
 * go over HTTP to that Worker, so the conformance suite runs unchanged in Vitest while every
 * decision is made by the Durable Object inside workerd.
 */
import type { BoundStore, ControlResult, RefundCharge, Store, StoreCommand, StoreNamespace, StoreResult } from "@sluice/core/store";
import { type StartedWorker, startWorker as startTestWorker, storageDir } from "@sluice/testing/miniflare";
import { specOf } from "../src/protocol.js";

export { type StartedWorker, storageDir };

/** The Miniflare name of the test Worker (the script name of its Durable Object class). */
export const WORKER_NAME = "sluice-test";

/**
 * Starts Miniflare with a single Worker built from `entry` (a path relative to this folder), its
 * `SLUICE` binding to the SQLite-backed `SluiceLimiter` (`sqlite: false`: a key-value-backed one,
 * which the object refuses). Storage goes to `persistTo` (kept), or to a fresh directory that
 * `stop()` deletes.
 */
export function startWorker(
  entry: string,
  options: { testClock?: boolean; persistTo?: string; bindings?: Record<string, string>; sqlite?: boolean } = {},
): Promise<StartedWorker> {
  return startTestWorker({
    entry: new URL(entry, import.meta.url),
    name: WORKER_NAME,
    durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: options.sqlite ?? true } },
    bindings: { ...(options.testClock ? { SLUICE_ALLOW_TEST_CLOCK: "true" } : {}), ...options.bindings },
    ...(options.persistTo === undefined ? {} : { persistTo: options.persistTo }),
    // lets tests read an object's SQLite tables (mf.unsafeGetDurableObjectStorage)
    inspectDurableObjects: true,
  });
}

/** Reads a JSON body written by the test Worker (Infinity spelled as a string). */
export async function decode<T>(response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) throw new Error(`test Worker answered ${response.status}: ${text}`);
  return JSON.parse(text, (_k, v: unknown) => (v === "Infinity" ? Infinity : v)) as T;
}

/**
 * The RPC calls the store Worker's `DurableObjectStore`s made to `SluiceLimiter` objects since the
 * last count, by method (`{ consume: 2, control: 1 }`); counting starts again from zero.
 */
export async function rpcCalls(baseUrl: string): Promise<Record<string, number>> {
  return post<Record<string, number>>(new URL("/rpc-calls", baseUrl).toString(), {});
}

/** POSTs `body` as JSON to `url` and decodes the answer. */
export async function post<T>(url: string, body: unknown): Promise<T> {
  return decode<T>(await fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }));
}

/**
 * A `Store` in the Node process whose every call is one HTTP request to the store Worker, which
 * hands it to `DurableObjectStore` (with the test clock when `clock` is given) and so to the
 * `SluiceLimiter` object in workerd.
 */
export class WorkerStore implements Store {
  constructor(
    readonly baseUrl: string,
    readonly options: { clock?: () => number; shards?: number } = {},
  ) {}

  bind(namespace: StoreNamespace): BoundStore {
    const policies = namespace.policies.map(specOf);
    const call = <T>(op: string, key: string, cost?: number, charge?: RefundCharge, lease?: number, command?: StoreCommand) =>
      post<T>(new URL("/store", this.baseUrl).toString(), {
        op,
        prefix: namespace.prefix,
        tier: namespace.tier,
        policies,
        key,
        cost,
        charge,
        lease,
        command,
        nowMs: this.options.clock?.(),
        shards: this.options.shards,
      });
    return {
      consume: (key, cost, lease) => call<StoreResult>("consume", key, cost, undefined, lease),
      peek: (key) => call<StoreResult>("peek", key),
      refund: (key, cost, charge) => call<StoreResult>("refund", key, cost, charge),
      release: (key, lease) => call<StoreResult>("release", key, undefined, undefined, lease),
      reset: async (key) => {
        await call<null>("reset", key);
      },
      control: (key, command) => call<ControlResult>("control", key, undefined, undefined, undefined, command),
    };
  }
}
