/**
 * Node-side test helpers: bundle a test Worker from the package's TypeScript sources, run it in
 * workerd through Miniflare (never reaching the network: `cf: false`), and a `Store` whose calls
 * go over HTTP to that Worker, so the conformance suite runs unchanged in Vitest while every
 * decision is made by the Durable Object inside workerd.
 */
import { constants } from "node:fs";
import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BoundStore, Store, StoreNamespace, StoreResult } from "@sluice/core";
import { build } from "esbuild";
import { Miniflare, type MiniflareOptions } from "miniflare";
import { specOf } from "../src/protocol.js";

/** The compatibility date of the test Workers (the workerd that Miniflare ships supports it). */
export const COMPATIBILITY_DATE = "2026-07-01";

const bundles = new Map<string, Promise<string>>();

/**
 * Bundles `entry` (a path relative to this folder) into one ES module for workerd: workspace
 * packages resolve to their sources (`@sluice/source`), `cloudflare:*` stays external.
 */
export function bundle(entry: string): Promise<string> {
  let code = bundles.get(entry);
  if (code === undefined) {
    code = build({
      entryPoints: [fileURLToPath(new URL(entry, import.meta.url))],
      bundle: true,
      write: false,
      format: "esm",
      platform: "browser",
      target: "es2022",
      conditions: ["@sluice/source", "workerd", "worker", "browser"],
      external: ["cloudflare:*"],
      logLevel: "silent",
    }).then((result) => result.outputFiles[0]!.text);
    bundles.set(entry, code);
  }
  return code;
}

/** The Miniflare name of the test Worker (the script name of its Durable Object class). */
export const WORKER_NAME = "sluice-test";

/**
 * A fresh directory for Durable Object storage, on tmpfs (`/dev/shm`) where there is one: workerd
 * syncs SQLite to disk on every write, which makes the suite several times slower on a real disk.
 */
export async function storageDir(): Promise<string> {
  let base = tmpdir();
  try {
    await access("/dev/shm", constants.W_OK);
    base = "/dev/shm";
  } catch {
    // no tmpfs: the system's temp dir
  }
  return mkdtemp(join(base, "sluice-do-"));
}

/** A running test Worker. */
export interface StartedWorker {
  mf: Miniflare;
  url: string;
  /** Disposes Miniflare, and deletes the storage directory unless it was given. */
  stop(): Promise<void>;
}

/**
 * Starts Miniflare with a single Worker built from `entry`, its `SLUICE` binding to the
 * SQLite-backed `SluiceLimiter`. Storage goes to `persistTo` (kept), or to a fresh directory that
 * `stop()` deletes.
 */
export async function startWorker(
  entry: string,
  options: { testClock?: boolean; persistTo?: string; bindings?: Record<string, string> } = {},
): Promise<StartedWorker> {
  const script = await bundle(entry);
  const dir = options.persistTo ?? (await storageDir());
  const config: MiniflareOptions = {
    name: WORKER_NAME,
    cf: false,
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: true } },
    bindings: { ...(options.testClock ? { SLUICE_ALLOW_TEST_CLOCK: "true" } : {}), ...options.bindings },
    durableObjectsPersist: dir,
    // lets tests read an object's SQLite tables (mf.unsafeGetDurableObjectStorage)
    unsafeInspectDurableObjects: true,
  };
  const mf = new Miniflare(config);
  try {
    const url = (await mf.ready).toString();
    const stop = async () => {
      await mf.dispose();
      if (options.persistTo === undefined) await rm(dir, { recursive: true, force: true });
    };
    return { mf, url, stop };
  } catch (error) {
    await mf.dispose().catch(() => undefined);
    throw error;
  }
}

/** Reads a JSON body written by the test Worker (Infinity spelled as a string). */
export async function decode<T>(response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) throw new Error(`test Worker answered ${response.status}: ${text}`);
  return JSON.parse(text, (_k, v: unknown) => (v === "Infinity" ? Infinity : v)) as T;
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
    const call = <T>(op: string, key: string, cost?: number, chargedAt?: number, lease?: number) =>
      post<T>(new URL("/store", this.baseUrl).toString(), {
        op,
        prefix: namespace.prefix,
        tier: namespace.tier,
        policies,
        key,
        cost,
        chargedAt,
        lease,
        nowMs: this.options.clock?.(),
        shards: this.options.shards,
      });
    return {
      consume: (key, cost, lease) => call<StoreResult>("consume", key, cost, undefined, lease),
      peek: (key) => call<StoreResult>("peek", key),
      refund: (key, cost, chargedAt) => call<StoreResult>("refund", key, cost, chargedAt),
      release: (key, lease) => call<StoreResult>("release", key, undefined, undefined, lease),
      reset: async (key) => {
        await call<null>("reset", key);
      },
    };
  }
}
