/**
 * Workers in workerd for the tests of every package: bundle a Worker from the workspace's
 * TypeScript sources the way wrangler would (ES module, `@sluice/source` resolving the packages to
 * their sources, `cloudflare:*` left to the runtime), and run it in Miniflare, never reaching the
 * network (`cf: false`). Node only: import it as `@sluice/testing/miniflare`.
 *
 * @example
 * ```ts
 * const worker = await startWorker({ entry: new URL("./fixtures/app.ts", import.meta.url), durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: true } } });
 * const response = await fetch(new URL("/api/hello", worker.url));
 * await worker.stop();
 * ```
 *
 * @module
 */
import { constants } from "node:fs";
import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare, type WorkerOptions } from "miniflare";

/** The compatibility date of the test Workers (the workerd that Miniflare ships supports it). */
export const WORKER_COMPATIBILITY_DATE = "2026-07-01";

const bundles = new Map<string, Promise<string>>();

/**
 * Bundles `entry` (an absolute path or a `file:` URL) into one ES module for workerd: workspace
 * packages resolve to their sources (`@sluice/source`), `cloudflare:*` stays external. Each entry
 * is bundled once per process.
 */
export function bundleWorker(entry: string | URL): Promise<string> {
  const path = typeof entry === "string" ? entry : fileURLToPath(entry);
  let code = bundles.get(path);
  if (code === undefined) {
    code = build({
      entryPoints: [path],
      bundle: true,
      write: false,
      format: "esm",
      platform: "browser",
      target: "es2022",
      conditions: ["@sluice/source", "workerd", "worker", "browser"],
      external: ["cloudflare:*"],
      logLevel: "silent",
    }).then((result) => (result.outputFiles[0] as { text: string }).text);
    bundles.set(path, code);
  }
  return code;
}

/**
 * A fresh directory for Durable Object storage, on tmpfs (`/dev/shm`) where there is one: workerd
 * syncs SQLite to disk on every write, which makes a suite several times slower on a real disk.
 */
export async function storageDir(prefix = "sluice-do-"): Promise<string> {
  let base = tmpdir();
  try {
    await access("/dev/shm", constants.W_OK);
    base = "/dev/shm";
  } catch {
    // no tmpfs: the system's temp dir
  }
  return mkdtemp(join(base, prefix));
}

/** Options of {@link startWorker}: the entry to bundle, and Miniflare's options for the one Worker. */
export type StartWorkerOptions = Omit<WorkerOptions, "script" | "scriptPath" | "modules" | "modulesRoot"> & {
  /** The Worker's main module (TypeScript), an absolute path or a `file:` URL. */
  entry: string | URL;
  /**
   * Where Durable Object storage goes: a directory (kept), or, by default when the Worker has
   * Durable Objects, a fresh one that `stop()` deletes.
   */
  persistTo?: string;
  /** Let tests read an object's storage (`mf.unsafeGetDurableObjectStorage`). */
  inspectDurableObjects?: boolean;
  /**
   * Also open a socket straight to the Worker ({@link StartedWorker.directUrl}), past Miniflare's
   * entry Worker: no `CF-Connecting-IP` or `cf` added, and kept-alive connections stay open (the
   * entry closes them), so a request costs a fraction of one through `url`.
   */
  directSocket?: boolean;
};

/** A running test Worker. */
export interface StartedWorker {
  mf: Miniflare;
  /** The Worker's URL, ending in `/`. */
  url: string;
  /** With `directSocket`: the Worker's own socket, ending in `/` (see {@link StartWorkerOptions.directSocket}). */
  directUrl?: string;
  /** Disposes Miniflare, and deletes the storage directory unless it was given. */
  stop(): Promise<void>;
}

/**
 * Starts Miniflare with a single Worker bundled from `entry` (compatibility date
 * {@link WORKER_COMPATIBILITY_DATE} unless given). A start-up that fails disposes what it started.
 */
export async function startWorker(options: StartWorkerOptions): Promise<StartedWorker> {
  const { entry, persistTo, inspectDurableObjects, directSocket, ...worker } = options;
  const script = await bundleWorker(entry);
  const ownDir = persistTo === undefined && worker.durableObjects !== undefined ? await storageDir() : undefined;
  const dir = persistTo ?? ownDir;
  const mf = new Miniflare({
    cf: false,
    compatibilityDate: WORKER_COMPATIBILITY_DATE,
    ...worker,
    modules: true,
    script,
    ...(dir === undefined ? {} : { durableObjectsPersist: dir }),
    ...(inspectDurableObjects === true ? { unsafeInspectDurableObjects: true } : {}),
    ...(directSocket === true ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
  } as ConstructorParameters<typeof Miniflare>[0]);
  const cleanUp = async () => {
    await mf.dispose();
    if (ownDir !== undefined) await rm(ownDir, { recursive: true, force: true });
  };
  try {
    const url = (await mf.ready).toString();
    if (directSocket !== true) return { mf, url, stop: cleanUp };
    const directUrl = (await mf.unsafeGetDirectURL(worker.name)).toString();
    return { mf, url, directUrl, stop: cleanUp };
  } catch (error) {
    await cleanUp().catch(() => undefined);
    throw error;
  }
}
