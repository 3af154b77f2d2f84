/**
 * Single-flight script loading. After a `SCRIPT FLUSH` (a restart, a failover, a fresh server) every
 * `EVALSHA` in flight fails with `NOSCRIPT`; if each of them then sent the whole script with `EVAL`,
 * a burst of N decisions would send the script N times (and run N compilations on the server).
 * Here one load per script is in flight at a time for each client, and the other calls wait for it
 * and send `EVALSHA` again:
 *
 * - a single node (or Upstash): the first call to see `NOSCRIPT` sends `EVAL`, which loads the
 *   script and answers that call;
 * - a Cluster: the first call to see `NOSCRIPT` sends `SCRIPT LOAD` to every master at once (one per
 *   node), then sends `EVALSHA` again like the others.
 *
 * On a transport that runs its commands in the order they were sent (one connection to one node:
 * {@link ScriptTransport.inOrder}), a call does not wait for the load's answer: an `EVALSHA` sent
 * after the loading `EVAL` runs after it, so each `NOSCRIPT` is answered by sending `EVALSHA` again
 * at once, and a call that starts during the load sends its `EVALSHA` at once. The second round of
 * a cold burst then flows behind the first instead of starting when the whole first one has come
 * back.
 *
 * A call never loops: after {@link MAX_NOSCRIPT} `NOSCRIPT` replies (the script flushed again and
 * again, or a node the client did not know of yet) it sends `EVAL` itself.
 *
 * @module
 */

import { type ServerLiveness, livenessOf, monotonicNow } from "./liveness.js";

/** What a store's transport offers to run a script. */
export interface ScriptTransport {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /**
   * Loads the script on every node that may own a key (the masters of a Cluster), resolving once
   * each has answered. `undefined` for a single endpoint: the first call then loads with `EVAL`.
   */
  loadScript?: ((script: string) => Promise<unknown>) | undefined;
  /**
   * Whether the server runs this transport's commands in the order they were sent (one connection
   * to one node: ioredis and node-redis on a single node), so that an `EVALSHA` sent after the
   * loading `EVAL` finds the script. Not over HTTP (each request on its own), nor on a Cluster.
   */
  inOrder?: boolean;
  /**
   * Sends `EVALSHA` again for a call whose `EVALSHA` met `NOSCRIPT` (default: `evalsha`). On an
   * in-order transport every call of a cold burst does it, all within a few turns: a transport may
   * send those of one turn together, in one write instead of one each.
   */
  resend?: ((sha: string, keys: string[], args: string[]) => Promise<unknown>) | undefined;
}

/** The load state of one script on one client. */
export interface ScriptLoadState {
  /** The load in flight, if any; it never rejects. */
  loading: Promise<void> | undefined;
  /** How many loads have finished: a `NOSCRIPT` to a call sent before the last one is stale. */
  loads: number;
  /** How many loads have been sent: on an in-order transport, a `NOSCRIPT` to a call sent before the last one is stale. */
  started: number;
  /** When the client last heard from its server (shared by every script on the client). */
  readonly server: ServerLiveness;
}

/** `NOSCRIPT` replies one call accepts before it sends `EVAL` itself. */
export const MAX_NOSCRIPT = 3;

/** Per client (the object the store was built with), per SHA-1: shared by every store and limiter on it. */
const states = new WeakMap<object, Map<string, ScriptLoadState>>();

/**
 * The load state of `sha` on `client`, shared by every store built on the same client object, so
 * that two limiters with the same policies (the same script) load it once.
 */
export function scriptLoadState(client: object, sha: string): ScriptLoadState {
  let bySha = states.get(client);
  if (bySha === undefined) {
    bySha = new Map();
    states.set(client, bySha);
  }
  let state = bySha.get(sha);
  if (state === undefined) {
    state = { loading: undefined, loads: 0, started: 0, server: livenessOf(client) };
    bySha.set(sha, state);
  }
  return state;
}

/** Whether a client error is Redis's `NOSCRIPT` reply. */
export function isNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message ?? error;
  return typeof message === "string" && message.includes("NOSCRIPT");
}

/** Starts a load and records it in `state` until it settles (it never rejects). */
function startLoad(state: ScriptLoadState, load: Promise<unknown>): void {
  state.started++;
  const loading = load.then(
    () => heard(state),
    () => undefined,
  );
  state.loading = loading.then(() => {
    state.loads++;
    state.loading = undefined;
  });
}

/** Records that the server answered (a reply, or a `NOSCRIPT`: it is alive either way). */
function heard(state: ScriptLoadState): void {
  state.server.heardAt = monotonicNow();
}

/**
 * Runs `script` for one call: `EVALSHA`, and on `NOSCRIPT` one shared load (see the module notes).
 * Rejects with the client's error, untouched, for anything but `NOSCRIPT`.
 */
export async function runScript(
  transport: ScriptTransport,
  state: ScriptLoadState,
  script: { script: string; sha: string },
  keys: string[],
  args: string[],
): Promise<unknown> {
  const inOrder = transport.inOrder === true;
  for (let noScripts = 0; ; ) {
    // a call that starts while the script is being loaded waits, unless its EVALSHA will run after
    // the load (in order): it would only fail
    if (state.loading !== undefined && !inOrder) await state.loading;
    const loadsBefore = state.loads;
    const startedBefore = state.started;
    try {
      const reply = await (noScripts > 0 && transport.resend !== undefined ? transport.resend(script.sha, keys, args) : transport.evalsha(script.sha, keys, args));
      heard(state);
      return reply;
    } catch (error) {
      if (!isNoScript(error)) throw error;
    }
    heard(state);
    if (++noScripts >= MAX_NOSCRIPT) return transport.eval(script.script, keys, args).then((reply) => (heard(state), reply));
    if (inOrder) {
      // a load was sent after this EVALSHA (its NOSCRIPT is stale): sent again now, it runs after the load
      if (state.started !== startedBefore) continue;
    } else if (state.loads !== loadsBefore || state.loading !== undefined) {
      // a load finished since this EVALSHA was sent (its NOSCRIPT is stale), or one is in flight
      // (awaited at the top): send EVALSHA again
      continue;
    }
    if (transport.loadScript === undefined) {
      // one node: this call's EVAL loads the script and answers it; the others wait for it
      const answer = transport.eval(script.script, keys, args);
      startLoad(state, answer);
      return answer;
    }
    startLoad(state, transport.loadScript(script.script));
  }
}
