/**
 * Telling a busy server from a hung one. Under the limiter's default timeout a call that has waited
 * its `timeoutMs` asks the store for more time ({@link extraWaitMs}): a store gives it while its
 * server has answered *something* (any call on the same client: a decision, a `NOSCRIPT`, a script
 * load) within the last `timeoutMs`, up to {@link PATIENCE_MS} in all. A burst that keeps the
 * server (or this process) busy is then answered instead of sent to the fallback, while a server
 * that answers nothing — hung, paused, a partition — still fails a call after `timeoutMs` of
 * silence. The measurements behind the numbers are in the package README ("Timeouts").
 *
 * @module
 */

/** The most a call waits in all, under the default timeout, while the server keeps answering others. */
export const PATIENCE_MS = 5000;

/** When a client last heard from its server. */
export interface ServerLiveness {
  /** Monotonic ms ({@link monotonicNow}) of the last reply of any kind; `undefined` before the first. */
  heardAt: number | undefined;
}

/** `performance.now()` where the runtime has it (every runtime Sluice supports), else `Date.now()`. */
export function monotonicNow(): number {
  const perf = (globalThis as { performance?: { now?: () => number } }).performance;
  return typeof perf?.now === "function" ? perf.now() : Date.now();
}

const byClient = new WeakMap<object, ServerLiveness>();

/** The liveness record of a client object, shared by every store and limiter built on it. */
export function livenessOf(client: object): ServerLiveness {
  let liveness = byClient.get(client);
  if (liveness === undefined) {
    liveness = { heardAt: undefined };
    byClient.set(client, liveness);
  }
  return liveness;
}

/**
 * How many more milliseconds a call that has waited `waitedMs` should wait (0: it times out now):
 *
 * - the server answered anything within the last `timeoutMs`: until it has been silent for
 *   `timeoutMs`, never past {@link PATIENCE_MS} in all;
 * - silent for `timeoutMs` (or it never answered): one turn of the event loop ({@link GRACE_MS}) at
 *   the first expiry, so that replies left unread while this process was too busy to read them
 *   are read before the call is judged; then 0.
 */
export function extraWaitMs(liveness: ServerLiveness, waitedMs: number, timeoutMs: number): number {
  const heardAt = liveness.heardAt;
  if (heardAt !== undefined && waitedMs < PATIENCE_MS) {
    const silentMs = monotonicNow() - heardAt;
    if (silentMs < timeoutMs) return Math.ceil(Math.min(timeoutMs - silentMs, PATIENCE_MS - waitedMs));
  }
  return waitedMs === timeoutMs ? GRACE_MS : 0;
}

/** The turn of the event loop a silent server gets before a call times out. */
export const GRACE_MS = 1;
