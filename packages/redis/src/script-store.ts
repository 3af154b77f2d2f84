import { SluiceConfigError, SluiceStoreError } from "@sluice/core";
import {
  type BoundStore,
  type ControlResult,
  type StoreCommand,
  type RefundCharge,
  type ReserveResult,
  type Store,
  type StoreNamespace,
  type StoreResult,
  assertNamespace,
  assertStoreCommand,
  encodeKeyPart,
  namespaceKey,
} from "@sluice/core/store";
import { extraWaitMs } from "./liveness.js";
import { ReplyReader } from "./replies.js";
import { type ScriptLoadState, type ScriptTransport, runScript, scriptLoadState } from "./script-loader.js";
import { CONTROL_OPS, type Script, controlScript, decideScript } from "./scripts.js";

/**
 * The calls a store makes, whatever the client: one script call per decision (EVALSHA; after
 * `NOSCRIPT`, one shared load: see `script-loader.ts`), and DEL for a reset. Internal: the stores
 * build it from the client.
 */
export interface Transport extends ScriptTransport {
  del(keys: string[]): Promise<unknown>;
  /** The client object: scripts are loaded once per client, whichever store or limiter uses it. */
  readonly client: object;
}

/**
 * The registry key of the test clock. Only the `@sluice/redis/testing` entry sets it; see
 * `testing.ts` for how it is fenced off from production.
 * @internal
 */
export const TEST_CLOCK: unique symbol = Symbol.for("@sluice/redis:test-clock") as never;

/**
 * Whose clock a decision runs on:
 * - `"server"` (default): Redis's `TIME`, read inside the script. Every instance agrees on the
 *   time, whatever its own clock says.
 * - `"client"`: this process's `Date.now()`, sent as a script argument, for Redis-compatible
 *   services that refuse `TIME` inside scripts. The trade: instances whose clocks disagree by S ms
 *   see windows and refills shifted by up to S ms against each other (a window may start S ms early
 *   for one of them), so keep the clocks in sync (NTP).
 */
export type RedisClock = "server" | "client";

/** Options of `RedisStore` and `UpstashStore`. */
export interface ScriptStoreOptions {
  /**
   * Whose clock a decision runs on: Redis `TIME` (`"server"`), or this process's (`"client"`) for
   * services that refuse `TIME` in scripts.
   * @default "server"
   */
  clock?: RedisClock;
}

/**
 * Validates the options object of a store's constructor (`SluiceConfigError` naming `options` or
 * `clock`); returns whether the client's clock is used.
 */
export function clientClockOption(options: unknown): boolean {
  if (options === undefined) return false;
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`[sluice] [redis] options must be an object like { clock }; got ${String(options)}`, { option: "options" });
  }
  const clock = (options as ScriptStoreOptions).clock;
  if (clock === undefined || clock === "server") return false;
  if (clock === "client") return true;
  throw new SluiceConfigError(`[sluice] [redis] clock must be "server" or "client"; got ${JSON.stringify(clock) ?? String(clock)}`, { option: "clock" });
}

/** @internal a store that runs the `decide` script generated for each namespace through a {@link Transport}. */
export abstract class ScriptStore implements Store {
  /** @internal */
  [TEST_CLOCK]?: () => number;
  protected abstract readonly transport: Transport;
  /** The class name, for error messages. */
  protected abstract readonly storeName: string;
  /** Whether the caller's clock is sent with each call (`clock: "client"`). */
  protected abstract readonly clientClock: boolean;

  /** Checks the namespace as a `RateLimiter` would (prefix, tier, 1 to `MAX_POLICIES` policies), synchronously. */
  bind(namespace: StoreNamespace): BoundStore {
    assertNamespace(namespace, "redis");
    // the global is read on each call, so a test that mocks Date.now moves this clock too
    const clock = this[TEST_CLOCK] ?? (this.clientClock ? () => Date.now() : undefined);
    return new ScriptBinding(namespace, this.transport, clock, this.storeName);
  }
}

/** The message of whatever a client rejected with. */
function messageOf(error: unknown): string {
  return String((error as { message?: unknown } | null)?.message ?? error);
}

/**
 * Any failure of the client (connection, timeout, a script error such as OOM) as a `SluiceStoreError`.
 * A server that refuses `TIME` inside scripts gets a message naming the option that avoids it.
 */
function storeError(error: unknown, store: string, sendsTime: boolean, script = "decide"): SluiceStoreError {
  const message = messageOf(error);
  const hint =
    !sendsTime && /\bTIME\b|unknown (redis )?command/i.test(message)
      ? `. This server refuses Redis TIME inside scripts: construct the store with { clock: "client" } (new ${store}(client, { clock: "client" })) to send this process's time instead`
      : "";
  return new SluiceStoreError(`[sluice] [redis] the ${script} script failed: ${message}${hint}`, { cause: error, notApplied: neverSent(error) });
}

/** Socket errors raised before a connection exists: the command cannot have reached the server. */
const NOT_CONNECTED_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/**
 * Whether a client's failure certainly happened before the call reached Redis (so nothing was
 * applied and a refund may be made again): no connection could be made (`ECONNREFUSED` and the
 * like, also as the `cause` of a failed `fetch`), or the client refuses the command before sending
 * it (ioredis `Stream isn't writeable` without an offline queue; node-redis `The client is
 * closed`). ioredis's `Connection is closed.` is not among them: commands in flight when the
 * connection drops get it too, and those may have run.
 */
function neverSent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== null && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NOT_CONNECTED_CODES.has(code)) return true;
    const errors = (e as { errors?: unknown }).errors; // AggregateError: every address refused
    if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => NOT_CONNECTED_CODES.has(String((x as { code?: unknown })?.code)))) return true;
    const message = messageOf(e);
    if (/Stream isn't writeable|The client is closed/.test(message) || (e as { name?: unknown }).name === "ClientClosedError") return true;
  }
  return false;
}

class ScriptBinding implements BoundStore {
  /** The script generated for this namespace's policies, with its SHA-1. */
  readonly #script: Script;
  /** Whether the script is being loaded on this client (shared by every binding with the same script). */
  readonly #loads: ScriptLoadState;
  /** The `control` script of this namespace (overrides and manual blocks), and its load state. */
  readonly #control: Script;
  readonly #controlLoads: ScriptLoadState;
  /** Reads both scripts' replies: a decision only when their shape and ranges are right. */
  readonly #replies: ReplyReader;
  readonly #policyCount: number;
  /** `{` and the namespace part of core's `storageKey`: the identifier's key is this, the encoded key and `}`. */
  readonly #keyStart: string;

  constructor(
    namespace: StoreNamespace,
    readonly transport: Transport,
    /** The clock sent with each call (a test clock, or `Date.now` with `clock: "client"`); `undefined`: Redis `TIME`. */
    readonly testClock: (() => number) | undefined,
    readonly storeName: string,
  ) {
    this.#script = decideScript(namespace.policies);
    this.#loads = scriptLoadState(transport.client, this.#script.sha);
    this.#control = controlScript(namespace.policies);
    this.#controlLoads = scriptLoadState(transport.client, this.#control.sha);
    this.#replies = new ReplyReader(namespace.policies);
    this.#policyCount = namespace.policies.length;
    this.#keyStart = `{${namespaceKey(namespace)}`;
  }

  /**
   * The identifier's one key: `{` + core's `storageKey(namespace, key)` + `}`. The encoding is
   * injective and escapes `{`/`}`, so the whole identifier is one Cluster hash tag and two
   * different (prefix, tier, key) never share it.
   */
  #keys(key: string): string[] {
    return [`${this.#keyStart}${encodeKeyPart(key)}}`];
  }

  #args(cost: number, mode: "c" | "p" | "r" | "x" | "v"): string[] {
    // production sends as little as it can: the cost, and the mode for a peek
    if (this.testClock !== undefined) return [String(cost), mode, String(Math.floor(this.testClock() * 1000))];
    return mode === "c" ? [String(cost)] : [String(cost), mode];
  }

  /** The time sent in `args` (µs: a test clock, `clock: "client"`), or `undefined` when the script reads `TIME`. */
  #sentUs(args: readonly string[], at: number): number | undefined {
    return this.testClock === undefined ? undefined : Number(args[at]);
  }

  async #run(keys: string[], args: string[], mode: "c" | "p" | "r" | "x", cost: number): Promise<StoreResult> {
    let reply: unknown;
    try {
      reply = await runScript(this.transport, this.#loads, this.#script, keys, args);
    } catch (error) {
      throw storeError(error, this.storeName, this.testClock !== undefined);
    }
    return this.#replies.decide(reply, { mode, cost, sentUs: this.#sentUs(args, 2) });
  }

  consume(key: string, cost: number, lease?: number): Promise<StoreResult> {
    const args = this.#args(cost, "c");
    if (lease !== undefined && lease !== 0) {
      // the lease an allowed request holds its concurrency slots under: ARGV[4]
      if (args.length === 1) args.push("c", "");
      args.push(String(lease));
    }
    return this.#run(this.#keys(key), args, "c", cost);
  }

  /**
   * Up to `units` charged to every policy of `key` at once (the script's reserve mode, core's
   * `reserveState`): one script call, with the store's clock.
   */
  async reserve(key: string, units: number, holdMs: number): Promise<ReserveResult> {
    const args = this.#args(units, "v");
    if (args.length === 2) args.push(""); // no clock sent: the script reads TIME
    args.push(String(holdMs));
    let reply: unknown;
    try {
      reply = await runScript(this.transport, this.#loads, this.#script, this.#keys(key), args);
    } catch (error) {
      throw storeError(error, this.storeName, this.testClock !== undefined);
    }
    return this.#replies.reserve(reply, { units, holdMs, sentUs: this.#sentUs(args, 2) });
  }

  release(key: string, lease: number): Promise<StoreResult> {
    const args = this.#args(1, "x");
    if (args.length === 2) args.push(""); // no clock sent: the script reads TIME
    args.push(String(lease));
    return this.#run(this.#keys(key), args, "x", 1);
  }

  peek(key: string): Promise<StoreResult> {
    return this.#run(this.#keys(key), this.#args(1, "p"), "p", 1);
  }

  refund(key: string, cost: number, charge: RefundCharge | undefined): Promise<StoreResult> {
    const args = this.#args(cost, "r");
    if (args.length === 2) args.push(""); // no clock sent: the script reads TIME
    if (charge !== undefined) {
      // when the request was charged, then its mark per policy (none known: 0, a bucket gives nothing back)
      args.push(String(charge.atMs));
      for (let i = 0; i < this.#policyCount; i++) args.push(String(charge.marks?.[i] ?? 0));
      // then what a unit of the charge weighed per policy (0: the price in force now)
      if (charge.prices !== undefined) for (let i = 0; i < this.#policyCount; i++) args.push(String(charge.prices[i] ?? 0));
    }
    return this.#run(this.#keys(key), args, "r", cost);
  }

  /**
   * Under the limiter's default timeout: more time for a call while the server answers other calls
   * (it is busy, not hung), until it has been silent for `timeoutMs`, at most 5 s in all.
   */
  extendTimeout(waitedMs: number, timeoutMs: number): number {
    return extraWaitMs(this.#loads.server, waitedMs, timeoutMs);
  }

  /**
   * Overrides and manual blocks (core's `controlState`, in Lua): one script call (EVALSHA; after
   * `NOSCRIPT`, the same single-flight load as the decide script), with the store's clock.
   * `SluiceInputError` for a malformed command, before anything is sent.
   */
  async control(key: string, command: StoreCommand): Promise<ControlResult> {
    const args = [CONTROL_OPS[assertStoreCommand(command, "redis")], this.testClock === undefined ? "" : String(Math.floor(this.testClock() * 1000))];
    if (command.op === "setOverride") args.push(command.override, String(command.ttlMs));
    else if (command.op === "block") args.push(String(command.durationMs));
    let reply: unknown;
    try {
      reply = await runScript(this.transport, this.#controlLoads, this.#control, this.#keys(key), args);
    } catch (error) {
      throw storeError(error, this.storeName, this.testClock !== undefined, "control");
    }
    return this.#replies.control(reply, this.#sentUs(args, 1));
  }

  async reset(key: string): Promise<void> {
    try {
      await this.transport.del(this.#keys(key));
    } catch (error) {
      throw new SluiceStoreError(`[sluice] [redis] reset failed: ${messageOf(error)}`, { cause: error });
    }
  }
}


/**
 * Throws a `SluiceConfigError` naming `option` (the constructor's parameter: `"client"`, `"redis"`)
 * unless `client` has every method in `methods`; `hint` says what it must be.
 */
export function requireMethods(client: unknown, methods: string[], option: string, hint: string): void {
  for (const method of methods) {
    if (typeof (client as Record<string, unknown> | null)?.[method] !== "function") {
      throw new SluiceConfigError(`[sluice] [redis] ${option} must be ${hint}; got a client without ${method}()`, { option });
    }
  }
}
