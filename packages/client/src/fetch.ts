/**
 * `rateLimitedFetch`: a `fetch` that paces itself by the server's rate-limit headers and waits out
 * `Retry-After` on a 429 or 503.
 *
 * @module
 */
import { type RateLimitInfo, parseRateLimit } from "./parse.js";

/**
 * The shape of `fetch` that {@link rateLimitedFetch} takes and returns.
 *
 * @example
 * ```ts
 * const logged: FetchLike = async (input, init) => {
 *   const response = await fetch(input, init);
 *   console.log(response.status);
 *   return response;
 * };
 * ```
 */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * What {@link RateLimitedFetchOptions.onWait} is told before each wait.
 *
 * @example
 * ```ts
 * const onWait = ({ url, waitMs, reason, attempt }: WaitInfo) =>
 *   console.log(`${reason}: waiting ${waitMs} ms before attempt ${attempt} of ${url}`);
 * ```
 */
export interface WaitInfo {
  /** The request's URL. */
  url: string;
  /** How long it will wait, in milliseconds. */
  waitMs: number;
  /**
   * `"pacing"`: the origin's budget (`r` requests within `t` seconds of the latest response) is
   * used up; `"retry-after"`: the previous attempt got a 429 or 503 with `Retry-After`.
   */
  reason: "retry-after" | "pacing";
  /** The attempt the wait comes before: 1 for the first request, 2 for the first retry, ... */
  attempt: number;
}

/**
 * Options of {@link rateLimitedFetch}.
 *
 * @example
 * ```ts
 * const api = rateLimitedFetch({ maxRetries: 5, maxTotalWaitMs: 120_000, onWait: (w) => console.log(w) });
 * ```
 */
export interface RateLimitedFetchOptions {
  /**
   * The `fetch` to wrap.
   * @default globalThis.fetch (looked up at each call)
   */
  fetch?: FetchLike;
  /**
   * How many times one call retries after a 429 or 503 with `Retry-After`.
   * @default 3
   */
  maxRetries?: number;
  /**
   * The most one call waits in all (pacing and `Retry-After`), in milliseconds. A retry whose
   * wait would go past it is not made: the 429 or 503 is returned. A pacing wait that would go past
   * it is not made either: the request is sent at once and the server decides.
   * @default 60_000
   */
  maxTotalWaitMs?: number;
  /**
   * The longest the client believes one answer of the server, in milliseconds: a `Retry-After`, or
   * a policy's `t`/reset, further away than this is taken as this long (the next request then goes
   * out as a probe, and its answer is believed afresh). So a malformed or hostile header (a reset
   * in a thousand years) can never hold an origin's requests longer; and a single wait is never
   * longer than this either.
   * @default 60_000
   */
  maxWaitMs?: number;
  /**
   * The statuses that are retried after `Retry-After`.
   * @default [429, 503]
   */
  retryOn?: readonly number[];
  /**
   * Pace requests per origin by the `r` and `t` of the latest response, so that the server's
   * quota is never exceeded. `false` only waits out `Retry-After`.
   * @default true
   */
  pace?: boolean;
  /** Called before each timed wait, with its reason and length. */
  onWait?: (info: WaitInfo) => void;
  /**
   * The clock, in epoch milliseconds (for tests).
   * @default Date.now
   */
  now?: () => number;
  /**
   * Waits `ms` milliseconds (for tests). The wait is abandoned, rejecting with the signal's reason,
   * as soon as the request's signal aborts, whatever this function does.
   * @default a setTimeout-based sleep
   */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** A budget of requests: at most `left` more to the origin before `until` (epoch ms). */
interface Budget {
  left: number;
  /** When the server's word expires (epoch ms; unused by a probe). */
  until: number;
  /** A probe: one request goes, and its answer replaces or lifts the budget (it has no end of its own). */
  probe: boolean;
  /** A probe's request: the one sent under it, whose answer replaces or lifts it. */
  owner?: Ticket;
}

interface Origin {
  budgets: Map<string, Budget>;
  inFlight: number;
  listeners: Set<() => void>;
}

/** One request in flight to an origin. */
interface Ticket {
  readonly origin: Origin;
}

/** The first request to an origin goes alone; the others wait for its answer. */
const FIRST = "\u0000first";
/** A 429/503 with `Retry-After` holds every request to the origin for that long. */
const RETRY_AFTER = "\u0000retry-after";
/** Origins remembered at most (the least recently used idle ones are forgotten first). */
const MAX_ORIGINS = 1_000;
/**
 * Budgets kept per origin at most, one per policy name (and partition key) a response named: the
 * least recently updated are forgotten first, so a server that names a new policy in every
 * response cannot grow the client's memory.
 */
const MAX_BUDGETS_PER_ORIGIN = 64;

/**
 * Where `@sluice/core`'s error classes read the classes an error belongs to (`Symbol.for`: one key
 * for every copy of the library). This package has no dependencies, so its configuration error is
 * not core's class; marked so, it answers `instanceof SluiceConfigError` (and `SluiceError`) as
 * core's own errors do.
 */
const ERROR_CLASSES = Symbol.for("@sluice/core:error-classes");

/**
 * A bad option of {@link rateLimitedFetch}: `code` `"SLUICE_CONFIG"` and `option` naming it, like
 * every Sluice configuration error, and `instanceof SluiceConfigError` from `@sluice/core`. Also a
 * `TypeError`, the class JavaScript gives a bad argument.
 */
class ClientConfigError extends TypeError {
  override name = "SluiceConfigError";
  readonly code = "SLUICE_CONFIG";
  readonly option: string;
  constructor(message: string, option: string) {
    super(message);
    this.option = option;
    Object.defineProperty(this, ERROR_CLASSES, { value: ["SluiceConfigError", "SluiceError"], enumerable: false });
  }
}

function optionError(option: string, expected: string, value: unknown): ClientConfigError {
  let shown: string;
  try {
    shown = typeof value === "function" ? "a function" : (JSON.stringify(value) ?? String(value));
  } catch {
    shown = String(value);
  }
  return new ClientConfigError(`[sluice] [client] ${option} must be ${expected}; got ${shown}`, option);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** setTimeout in steps of at most 2^31-1 ms (longer delays would fire at once). */
function timerSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const end = Date.now() + ms;
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const tick = () => {
      const left = end - Date.now();
      if (left <= 0) {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      } else {
        timer = setTimeout(tick, Math.min(left, 2_147_483_647));
      }
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    tick();
  });
}

/** `promise`, or a rejection with the signal's reason as soon as it aborts. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function isRequest(input: unknown): input is Request {
  return typeof input === "object" && input !== null && typeof (input as Request).url === "string" && typeof (input as Request).clone === "function";
}

/** Bodies that fetch can send again: everything but a stream (or an async iterable). */
function isReplayableBody(body: unknown): boolean {
  return (
    body === undefined ||
    body === null ||
    typeof body === "string" ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    (typeof Blob !== "undefined" && body instanceof Blob) ||
    (typeof URLSearchParams !== "undefined" && body instanceof URLSearchParams) ||
    (typeof FormData !== "undefined" && body instanceof FormData)
  );
}

function originOf(url: string): string | undefined {
  try {
    const base = (globalThis as { location?: { href?: string } }).location?.href;
    const origin = new URL(url, base).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}

/**
 * The options of one {@link rateLimitedFetch}, checked, with their defaults. The functions a user
 * gave are called as plain functions (no `this`), as a browser's `fetch` requires.
 */
interface Settings {
  readonly fetch: FetchLike;
  readonly now: () => number;
  /** Waits `ms`, rejecting with the signal's reason as soon as it aborts. */
  readonly sleep: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
  readonly onWait: (info: WaitInfo) => void;
  readonly maxRetries: number;
  readonly maxTotalWaitMs: number;
  readonly maxWaitMs: number;
  readonly retryStatuses: ReadonlySet<number>;
  readonly pace: boolean;
}

/** Checks `options`, throwing a {@link ClientConfigError} that names the first bad one, and fills in the defaults. */
function settingsOf(options: RateLimitedFetchOptions): Settings {
  if (typeof options !== "object" || options === null) throw optionError("options", "an object", options);
  const { maxRetries = 3, maxTotalWaitMs = 60_000, maxWaitMs = 60_000, retryOn = [429, 503], pace = true, onWait } = options;
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0) throw optionError("maxRetries", "a non-negative integer", maxRetries);
  if (typeof maxWaitMs !== "number" || !Number.isSafeInteger(maxWaitMs) || maxWaitMs < 0) {
    throw optionError("maxWaitMs", "a non-negative integer of milliseconds", maxWaitMs);
  }
  if (typeof maxTotalWaitMs !== "number" || Number.isNaN(maxTotalWaitMs) || maxTotalWaitMs < 0) {
    throw optionError("maxTotalWaitMs", "a non-negative number of milliseconds (Infinity allowed)", maxTotalWaitMs);
  }
  if (!Array.isArray(retryOn) || !retryOn.every((s) => Number.isInteger(s) && s >= 100 && s <= 599)) {
    throw optionError("retryOn", "an array of HTTP status codes", retryOn);
  }
  for (const name of ["fetch", "onWait", "now", "sleep"] as const) {
    if (options[name] !== undefined && typeof options[name] !== "function") throw optionError(name, "a function", options[name]);
  }
  if (typeof pace !== "boolean") throw optionError("pace", "a boolean", pace);

  const userFetch = options.fetch;
  const clock = options.now ?? Date.now;
  const userSleep = options.sleep;
  return {
    fetch: userFetch === undefined ? (input, init) => globalThis.fetch(input, init) : (input, init) => userFetch(input, init),
    now: () => clock(),
    sleep: (ms, signal) => (userSleep === undefined ? timerSleep(ms, signal) : abortable(userSleep(ms, signal), signal)),
    onWait: (info) => onWait?.(info),
    maxRetries,
    maxTotalWaitMs,
    maxWaitMs,
    retryStatuses: new Set(retryOn),
    pace,
  };
}

/**
 * Forgets the least recently updated budgets of an origin beyond {@link MAX_BUDGETS_PER_ORIGIN}
 * (never the first request's probe or a `Retry-After` hold, nor one this answer just set).
 */
function forgetOldest(state: Origin, ticket: Ticket): void {
  for (const [key, budget] of state.budgets) {
    if (state.budgets.size <= MAX_BUDGETS_PER_ORIGIN) return;
    if (key === FIRST || key === RETRY_AFTER || budget.owner === ticket) continue;
    state.budgets.delete(key);
  }
}

/** Resolves at the next change of the origin's budgets; rejects when the signal aborts. */
function changed(state: Origin, signal: AbortSignal | undefined): Promise<void> {
  let listener: () => void = () => {};
  const promise = new Promise<void>((resolve) => {
    listener = resolve;
    state.listeners.add(listener);
  });
  return abortable(promise, signal).finally(() => state.listeners.delete(listener));
}

function notify(state: Origin): void {
  const listeners = [...state.listeners];
  state.listeners.clear();
  for (const listener of listeners) listener();
}

/** Takes one request out of every budget of the origin; a probe's first request owns it. */
function reserve(state: Origin): Ticket {
  const ticket: Ticket = { origin: state };
  for (const budget of state.budgets.values()) {
    budget.left -= 1;
    if (budget.probe && budget.owner === undefined) budget.owner = ticket;
  }
  state.inFlight += 1;
  return ticket;
}

/** The budgets of every origin one {@link rateLimitedFetch} has called, from the answers it read. */
class Pacer {
  private readonly settings: Settings;
  private readonly origins = new Map<string, Origin>();

  constructor(settings: Settings) {
    this.settings = settings;
  }

  /** The origin's state (a new one holds the first request's probe); the least recently used idle ones go first. */
  origin(key: string): Origin {
    const origins = this.origins;
    let state = origins.get(key);
    if (state !== undefined) {
      origins.delete(key); // most recently used last
    } else {
      if (origins.size >= MAX_ORIGINS) {
        for (const [k, s] of origins) {
          if (s.inFlight === 0 && s.listeners.size === 0) origins.delete(k);
          if (origins.size < MAX_ORIGINS) break;
        }
      }
      state = { budgets: new Map([[FIRST, { left: 1, until: 0, probe: true }]]), inFlight: 0, listeners: new Set() };
    }
    origins.set(key, state);
    return state;
  }

  /** Waits until the origin's budgets allow one more request, then takes it. */
  async acquire(state: Origin, url: string, attempt: number, signal: AbortSignal | undefined, waited: { ms: number }): Promise<Ticket> {
    const { now, maxTotalWaitMs, onWait, sleep } = this.settings;
    for (;;) {
      const t = now();
      let waitMs = 0;
      let waitForAnswer = false;
      for (const [key, budget] of state.budgets) {
        let b = budget;
        if (!b.probe && t >= b.until) {
          // The server's word has expired: one request (a probe) goes and its answer sets the
          // next budget. Requests still in flight may land after the expiry too, so the probe
          // waits for their answers: each of them brings a fresh budget.
          b = { left: 1, until: 0, probe: true };
          state.budgets.set(key, b);
        }
        const probe = b.probe;
        if (b.left > 0 && !(probe && state.inFlight > 0)) continue;
        if (probe) waitForAnswer = true;
        else waitMs = Math.max(waitMs, b.until - t);
      }
      const left = maxTotalWaitMs - waited.ms;
      if ((!waitForAnswer && waitMs === 0) || waitMs > left || left <= 0) return reserve(state);
      if (waitForAnswer) {
        const start = now();
        await changed(state, signal);
        waited.ms += Math.max(0, now() - start);
      } else {
        onWait({ url, waitMs, reason: "pacing", attempt });
        await sleep(waitMs, signal);
        waited.ms += waitMs;
      }
    }
  }

  /** Takes the answer (or the failure) of a request into its origin's budgets. */
  release(ticket: Ticket, info: RateLimitInfo | undefined, retryable: boolean): void {
    const { now, maxWaitMs } = this.settings;
    const state = ticket.origin;
    state.inFlight -= 1;
    const t = now();
    const updated = new Set<string>();
    for (const policy of info?.policies ?? []) {
      const seconds = policy.resetSeconds ?? policy.window;
      if (policy.remaining === undefined || seconds === undefined) continue;
      const key = policy.partitionKey === undefined ? policy.policy : `${policy.policy}\u0000${policy.partitionKey}`;
      // requests still in flight may not be counted in `r` yet: count them against it
      const left = policy.remaining - state.inFlight;
      const until = t + Math.min(seconds * 1000, maxWaitMs);
      const old = state.budgets.get(key);
      updated.add(key);
      // while an earlier word is in force, a looser one (more left) may be a reordered, older
      // answer: keep the tighter. An answer that leaves as much as the budget does is news: its
      // time wins (each answer counts the request it answers, so equal is the common case, and a
      // word whose time was capped at maxWaitMs must give way to the next answer's own time)
      if (old !== undefined && !old.probe && t < old.until && old.left < left) continue;
      // most recently updated last: the least recently updated is forgotten first
      state.budgets.delete(key);
      state.budgets.set(key, { left, until, probe: false });
    }
    if (retryable && info?.retryAfterSeconds !== undefined) {
      const until = t + Math.min(info.retryAfterSeconds * 1000, maxWaitMs);
      const old = state.budgets.get(RETRY_AFTER);
      if (old === undefined || old.probe || old.until < until) state.budgets.set(RETRY_AFTER, { left: 0, until, probe: false });
      updated.add(RETRY_AFTER);
    }
    if (state.budgets.size > MAX_BUDGETS_PER_ORIGIN) forgetOldest(state, ticket);
    for (const [key, budget] of state.budgets) {
      if (budget.owner === ticket && !updated.has(key)) state.budgets.delete(key);
    }
    notify(state);
  }
}

/** One call of the wrapped `fetch`, carried from attempt to attempt. */
interface Call {
  readonly input: string | URL | Request;
  readonly init: RequestInit | undefined;
  readonly url: string;
  readonly signal: AbortSignal | undefined;
  /** The origin's budgets; none when the call is not paced (`pace: false`, or a URL without an origin). */
  readonly origin: Origin | undefined;
  /** The `Request` to clone for each attempt that may be retried: one whose own body is sent (with `init.body` it is not). */
  readonly cloned: Request | undefined;
  /** Whether the body can be sent again: no body, or one that is not a stream. */
  readonly replayable: boolean;
  /** What the call has waited so far (pacing and `Retry-After`), ms. */
  readonly waited: { ms: number };
  /** 1 for the first request, 2 for the first retry, ... */
  attempt: number;
}

/** The call's first state: what it sends, to which origin, and whether it may send it again. Throws if the signal has aborted. */
function startCall(settings: Settings, pacer: Pacer, input: string | URL | Request, init: RequestInit | undefined): Call {
  const request = isRequest(input) ? input : undefined;
  const signal = init?.signal ?? request?.signal ?? undefined;
  if (signal?.aborted) throw abortReason(signal);
  const url = request !== undefined ? request.url : String(input);
  const originKey = settings.pace ? originOf(url) : undefined;
  const origin = originKey === undefined ? undefined : pacer.origin(originKey);
  const hasInitBody = init?.body !== undefined && init.body !== null;
  const replayable = hasInitBody ? isReplayableBody(init?.body) : true;
  // a Request's own body is replayed from a clone; with init.body the Request's body is not used
  const cloned = request !== undefined && !hasInitBody && request.body !== null ? request : undefined;
  return { input, init, url, signal, origin, cloned, replayable, waited: { ms: 0 }, attempt: 1 };
}

/** Sends one attempt (under `ticket`, when paced); a failure gives the ticket back before it propagates. */
async function send(settings: Settings, pacer: Pacer, call: Call, ticket: Ticket | undefined, mayRetry: boolean): Promise<Response> {
  try {
    return await settings.fetch(call.cloned !== undefined && mayRetry ? call.cloned.clone() : call.input, call.init);
  } catch (error) {
    if (ticket !== undefined) pacer.release(ticket, undefined, false);
    throw error;
  }
}

/**
 * Reads an attempt's answer: its headers go into the origin's budgets, and a 429 or 503 (`retryOn`)
 * that may be retried within the call's bounds gives the wait before the retry, ms. `undefined`:
 * the response is the call's answer.
 */
function answered(settings: Settings, pacer: Pacer, call: Call, ticket: Ticket | undefined, response: Response, mayRetry: boolean): number | undefined {
  const retryable = settings.retryStatuses.has(response.status);
  const info = ticket !== undefined || retryable ? parseRateLimit(response.headers, { now: settings.now() }) : undefined;
  if (ticket !== undefined) pacer.release(ticket, info, retryable);
  if (!retryable || !mayRetry || info === undefined) return undefined;
  const seconds = retryAfterSeconds(info);
  if (seconds === undefined) return undefined;
  const waitMs = seconds * 1000;
  // a wait beyond maxWaitMs (a Retry-After of a thousand years) is not made: the answer is returned
  if (waitMs > settings.maxWaitMs || call.waited.ms + waitMs > settings.maxTotalWaitMs) return undefined;
  return waitMs;
}

/** How long a 429 or 503 asks to wait: its `Retry-After`, else the longest `t` of its exhausted policies (none: unknown). */
function retryAfterSeconds(info: RateLimitInfo): number | undefined {
  if (info.retryAfterSeconds !== undefined) return info.retryAfterSeconds;
  const exhausted = info.policies.filter((p) => p.remaining === 0 && p.resetSeconds !== undefined);
  return exhausted.length > 0 ? Math.max(...exhausted.map((p) => p.resetSeconds as number)) : undefined;
}

/** Drops the refused response's body and waits `waitMs` before the next attempt. */
async function backOff(settings: Settings, call: Call, response: Response, waitMs: number): Promise<void> {
  await response.body?.cancel().catch(() => {});
  settings.onWait({ url: call.url, waitMs, reason: "retry-after", attempt: call.attempt + 1 });
  await settings.sleep(waitMs, call.signal);
  call.waited.ms += waitMs;
}

/**
 * Wraps `fetch` for calling a rate-limited API: it reads the rate-limit headers of every response
 * (any style {@link parseRateLimit} reads) and
 *
 * - **paces** requests per origin: from the latest response it keeps each policy's `r` and `t`
 *   and never sends more than `r` requests within `t` seconds of that response; when the budget is
 *   used up it waits until `t` has passed, sends one request, and lets its answer set the next
 *   budget. Concurrent calls share the budget: requests in flight count against it, the first
 *   request to an origin goes alone (the others wait for its answer), and so does the first one
 *   after a budget expires. A well-behaved client thus never sees a 429 from a server that
 *   sends these headers.
 * - **retries** a 429 or 503 (`retryOn`) after its `Retry-After` (or, without one, after the `t`
 *   of the exhausted policy), at most `maxRetries` times and for at most `maxTotalWaitMs` in all
 *   for one call; when the next wait would go past that, the response is returned as is.
 *   `Retry-After` also holds the origin's other requests.
 *
 * Only replayable requests are retried: no body, or a string, `ArrayBuffer`, typed array, `Blob`,
 * `URLSearchParams` or `FormData` body, or a `Request` (cloned for each attempt). A request whose
 * `init.body` is a `ReadableStream` (or another stream) is sent once and its 429 returned.
 *
 * Every wait is abortable: when the request's `AbortSignal` (`init.signal`, or the `Request`'s)
 * aborts, the call rejects at once with the signal's reason.
 *
 * Pacing counts one unit per request; a request that costs the server more (`cost`) is covered by
 * the retry. Budgets are kept per origin and per policy name (and partition key), in memory.
 *
 * Hostile or broken headers cannot hold the client: a value no number can hold (309 digits) is
 * ignored, every answer is believed for at most `maxWaitMs`, and at most 64 policies are kept per
 * origin (the least recently updated forgotten first), 1,000 origins in all.
 *
 * @param options - `fetch` to wrap (default `globalThis.fetch`), `maxRetries` (3),
 *   `maxTotalWaitMs` (60 000), `maxWaitMs` (60 000), `retryOn` ([429, 503]), `pace` (true),
 *   `onWait`, and `now`/`sleep` for tests
 * @returns a function with the signature of `fetch`
 *
 * @example
 * ```ts
 * import { rateLimitedFetch } from "@sluice/client";
 *
 * const api = rateLimitedFetch({
 *   onWait: ({ waitMs, reason }) => console.log(`waiting ${waitMs} ms (${reason})`),
 * });
 * for (let i = 0; i < 50; i++) {
 *   const response = await api("https://api.example.com/quote", { headers: { "x-api-key": "..." } });
 *   console.log(response.status); // never 429 while the server's headers are honest
 * }
 * ```
 */
export function rateLimitedFetch(options: RateLimitedFetchOptions = {}): FetchLike {
  const settings = settingsOf(options);
  const pacer = new Pacer(settings);
  // each attempt: pace (wait for the origin's budget), send, read the answer, and either return
  // it or back off for the retry
  return async function rateLimitedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const call = startCall(settings, pacer, input, init);
    for (; ; call.attempt++) {
      const mayRetry = call.replayable && call.attempt <= settings.maxRetries;
      const ticket = call.origin === undefined ? undefined : await pacer.acquire(call.origin, call.url, call.attempt, call.signal, call.waited);
      const response = await send(settings, pacer, call, ticket, mayRetry);
      const waitMs = answered(settings, pacer, call, ticket, response, mayRetry);
      if (waitMs === undefined) return response;
      await backOff(settings, call, response, waitMs);
    }
  };
}
