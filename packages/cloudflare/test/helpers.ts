/**
 * Node-side test helpers: a test Worker of this package in workerd (bundled and started by
 * `@sluice/testing/miniflare`, never reaching the network: `cf: false`), and a `Store` whose calls
 * go over HTTP to that Worker, so the conformance suite runs unchanged in Vitest while every
 * decision is made by the Durable Object inside workerd.
 */
import { Agent, request } from "node:http";
import type { BoundStore, ControlResult, RefundCharge, ReserveResult, Store, StoreCommand, StoreNamespace, StoreResult } from "@sluice/core/store";
import { type StartedWorker, startWorker as startTestWorker, storageDir } from "@sluice/testing/miniflare";
import { specOf } from "../src/protocol.js";

export { type StartedWorker, storageDir };

/** The Miniflare name of the test Worker (the script name of its Durable Object class). */
export const WORKER_NAME = "sluice-test";

/** Options of {@link startWorker}; `directSocket` as `@sluice/testing/miniflare` has it. */
export interface WorkerOptions {
  testClock?: boolean;
  persistTo?: string;
  bindings?: Record<string, string>;
  sqlite?: boolean;
  directSocket?: boolean;
}

/**
 * Starts Miniflare with a single Worker built from `entry` (a path relative to this folder), its
 * `SLUICE` binding to the SQLite-backed `SluiceLimiter` (`sqlite: false`: a key-value-backed one,
 * which the object refuses). Storage goes to `persistTo` (kept), or to a fresh directory that
 * `stop()` deletes.
 */
export function startWorker(entry: string, options: WorkerOptions = {}): Promise<StartedWorker> {
  return startTestWorker({
    entry: new URL(entry, import.meta.url),
    name: WORKER_NAME,
    durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: options.sqlite ?? true } },
    bindings: { ...(options.testClock ? { SLUICE_ALLOW_TEST_CLOCK: "true" } : {}), ...options.bindings },
    ...(options.persistTo === undefined ? {} : { persistTo: options.persistTo }),
    // lets tests read an object's SQLite tables (mf.unsafeGetDurableObjectStorage)
    inspectDurableObjects: true,
    ...(options.directSocket === true ? { directSocket: true } : {}),
  });
}

/**
 * Starts the store Worker (`fixtures/store-worker.ts`, which {@link WorkerStore}, {@link post} and
 * {@link rpcCalls} talk to) as {@link startWorker} does, with `url` the Worker's own socket rather
 * than Miniflare's entry: kept-alive connections stay open there, so a store call costs about
 * 0.5 ms instead of 3–4 ms through the entry and `fetch`, and the suites that make thousands of
 * them take a fraction of the time. Nothing on the way changes what the object decides.
 */
export async function startStoreWorker(options: Omit<WorkerOptions, "directSocket"> = {}): Promise<StartedWorker> {
  const started = await startWorker("./fixtures/store-worker.ts", { ...options, directSocket: true });
  return { ...started, url: started.directUrl as string };
}

/**
 * The RPC calls the store Worker's `DurableObjectStore`s made to `SluiceLimiter` objects since the
 * last count, by method (`{ consume: 2, control: 1 }`); counting starts again from zero.
 */
export async function rpcCalls(baseUrl: string): Promise<Record<string, number>> {
  return post<Record<string, number>>(new URL("/rpc-calls", baseUrl).toString(), {});
}

/**
 * Kept-alive connections to the store Worker's socket: one request costs ~0.5 ms, not a new
 * connection's. An idle connection is closed here after 2 s, so that a request is never written on
 * one the server is closing after its own idle timeout (in a trial, a connection idle for 6 s was
 * no longer there); the agent's `timeout` closes only idle connections, never one that waits for
 * an answer.
 */
const keepAlive = new Agent({ keepAlive: true, timeout: 2000 });

/**
 * POSTs `body` as JSON to `url` (over a kept-alive `node:http` connection: Node's `fetch` took 2–3 ms
 * a request to workerd where this takes ~0.5) and decodes the answer.
 */
export function post<T>(url: string, body: unknown): Promise<T> {
  const text = JSON.stringify(body);
  return new Promise<T>((resolve, reject) => {
    const req = request(
      url,
      { method: "POST", agent: keepAlive, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } },
      (res) => {
        let answer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (answer += chunk));
        res.on("error", reject);
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) reject(new Error(`test Worker answered ${status}: ${answer}`));
          else resolve(JSON.parse(answer, (_k, v: unknown) => (v === "Infinity" ? Infinity : v)) as T);
        });
      },
    );
    req.on("error", reject);
    req.end(text);
  });
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
    const call = <T>(op: string, key: string, cost?: number, charge?: RefundCharge, lease?: number, command?: StoreCommand, reserve?: { units: number; holdMs: number }) =>
      post<T>(new URL("/store", this.baseUrl).toString(), {
        ...reserve,
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
      reserve: (key, units, holdMs) => call<ReserveResult>("reserve", key, undefined, undefined, undefined, undefined, { units, holdMs }),
    };
  }
}
