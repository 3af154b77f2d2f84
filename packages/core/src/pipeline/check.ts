/**
 * The check chain: skip, key, tier, cost, decision, `pending` to the platform's `waitUntil`,
 * `onDecision`, the rate-limit headers and the 429 (or `onLimited`'s response). Written as a chain
 * of steps that continue synchronously while every step answers in place, so that a request on an
 * in-memory limiter is decided without a promise.
 *
 * @module
 */
import { toDecision } from "../decision.js";
import { SluiceConfigError, SluiceInputError, describe, tagged } from "../errors.js";
import { type HeaderWriter, compileRateLimitHeaders, mergeRateLimitHeaders, partitionKeyOf } from "../headers.js";
import { storageKey } from "../keys.js";
import { type LimitOptions, type RateLimiter, limitNow } from "../limiter/index.js";
import { addRateLimitHeaders, limitedResponse } from "../response.js";
import type { Decision, MaybePromise } from "../types.js";
import { noteHead } from "./lease.js";
import type { DecisionInfo } from "./options.js";
import type { HeaderList, Outcome, Platform } from "./platform.js";
import type { Target } from "./tiers.js";
import type { Config } from "./validate.js";

/** Whether a callback answered with a promise (or any thenable) rather than a value. */
export function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

/** The outcome of a request `skip` said not to limit: no headers but an outer layer's. */
function skippedOutcome(headers: HeaderList): Outcome {
  return { decision: undefined, key: undefined, limiter: undefined, headers, response: undefined };
}

/**
 * The framework's arguments of each outcome whose `finish` may call `countWhen` (only kept when
 * the pipeline has one): `finish(outcome, response)` calls it with them.
 */
export const OUTCOME_ARGS = new WeakMap<Outcome, unknown[]>();

/** The limit options of what a `cost` function answered. */
function costOptions(units: number): LimitOptions {
  // `{ cost: undefined }` would mean the default, 1: a cost function must answer a number
  if (units === undefined) throw new SluiceInputError("cost must be a positive safe integer; got undefined", { option: "cost" });
  return { cost: units };
}

function isTarget<T extends object>(value: T | Promise<T>): value is T {
  return typeof (value as { then?: unknown }).then !== "function";
}

/**
 * The sink every header writer writes into: one object for the whole process, pointed at the
 * request's list for the duration of a (synchronous) write, so a request allocates no sink and no
 * closure, only its list and its header values.
 */
const listSink = {
  list: [] as HeaderList,
  /** Dry run: never `Retry-After` (the request is served). */
  served: false,
  set(name: string, value: string): void {
    if (this.served && name === "Retry-After") return;
    this.list.push([name, value]);
  },
};

/** Runs `write` into `headers` (synchronously; see {@link listSink}). */
function writeInto(write: HeaderWriter, headers: HeaderList, decision: Decision, pk: string | undefined, served: boolean): void {
  listSink.list = headers;
  listSink.served = served;
  try {
    write(listSink, decision, pk);
  } finally {
    listSink.list = NO_HEADERS;
  }
}

/** What {@link listSink} points at between writes (never written to). */
const NO_HEADERS: HeaderList = [];

/** Whether a callback's answer is a `Response` (or looks like one: a server's own response class). */
export function isResponse(value: unknown): value is Response {
  return typeof value === "object" && value !== null && typeof (value as Partial<Response>).status === "number";
}

let noWork: Promise<void> | undefined;
/**
 * Whether a decision carries background work: most share the limiter's one resolved `pending`,
 * and handing that to `waitUntil` (or awaiting it) would only cost time.
 */
function hasWork(pending: Promise<void>): boolean {
  noWork ??= toDecision({ now: 0, policies: [{ policy: "-", allowed: true, limit: 1, remaining: 1, resetAt: 0, retryAfterMs: 0, delayMs: 0, refillAt: 0 }] }).pending;
  return pending !== noWork;
}

/**
 * Calls `onDecision` with the framework's arguments, the decision and its info; what it throws or
 * rejects with goes to `onCallbackError`, never to the request.
 */
function report<Args extends unknown[]>(config: Config<Args>, args: Args, decision: Decision, info: DecisionInfo): void {
  const onDecision = config.onDecision as NonNullable<Config<Args>["onDecision"]>;
  const failed = (error: unknown) => config.reportCallbackError(args, error, "onDecision");
  try {
    const done: unknown = onDecision(...args, decision, info);
    if (typeof (done as { then?: unknown } | undefined)?.then === "function") (done as Promise<unknown>).then(undefined, failed);
  } catch (error) {
    // a failing logger must not turn a decision into an exception
    failed(error);
  }
}

/** The {@link DecisionInfo} of one request; `keyHash` and `route` are computed at their first read. */
function decisionInfo(request: () => Request, limiter: RateLimiter, key: string, salt: string | undefined): DecisionInfo {
  let keyHash: string | undefined;
  let route: string | undefined;
  return {
    get keyHash() {
      return (keyHash ??= partitionKeyOf(storageKey(limiter, key), salt).slice(1, -1));
    },
    tier: limiter.tier,
    get route() {
      if (route === undefined) {
        const r = request();
        route = `${r.method} ${new URL(r.url).pathname}`;
      }
      return route;
    },
  };
}

/**
 * The rate-limit headers of `decision` as this layer writes them: the target's writer is compiled
 * at its first request, and `served` (dry run) leaves out `Retry-After`.
 */
function headersOf<Args extends unknown[]>(config: Config<Args>, target: Target, key: string, decision: Decision, served: boolean): HeaderList {
  const headers: HeaderList = [];
  const write = (target.write ??= compileRateLimitHeaders(config.styles, target.limiter.policies));
  const pk = config.pkSalt === undefined ? undefined : partitionKeyOf(storageKey(target.limiter, key), config.pkSalt);
  writeInto(write, headers, decision, pk, served);
  return headers;
}

/** What `onLimited` answered, with the rate-limit headers it lacks; anything but a response is a configuration error. */
function ownLimited(own: unknown, headers: HeaderList, tag: string | undefined): Response {
  if (!isResponse(own)) throw new SluiceConfigError(tagged(tag, `onLimited must return a Response; got ${describe(own)}`), { option: "onLimited" });
  return addRateLimitHeaders(own, headers);
}

/** The check chain of one adapter. */
export interface Checker<Args extends unknown[]> {
  check(...args: Args): Promise<Outcome>;
  checkNow(...args: Args): MaybePromise<Outcome>;
}

/** Builds the check chain over validated options. */
export function createChecker<Args extends unknown[]>(config: Config<Args>, platform: Platform<Args>): Checker<Args> {
  const { keyOf, skip, cost, onLimited, pkSalt, dryRunHeaders, pick, onDecision, countWhen } = config;
  const fixedCost: LimitOptions | undefined = typeof cost === "number" ? { cost } : undefined;
  const outerHeaders = platform.outerHeaders;

  /** This layer's headers, after an outer layer's when there is one (see {@link Platform.outerHeaders}). */
  function withOuter(args: Args, own: HeaderList): HeaderList {
    if (outerHeaders === undefined) return own;
    const outer = outerHeaders(...args);
    return outer === undefined || outer.length === 0 ? own : mergeRateLimitHeaders(outer, own);
  }

  /**
   * Written as a chain of steps that continue synchronously while every step answers in place (a
   * synchronous `skip`, key, tier and cost, a MemoryStore): then the outcome itself is returned,
   * with no promise and no microtask turn. A step that answers with a promise continues the chain
   * in its `then`.
   */
  function checkNow(...args: Args): MaybePromise<Outcome> {
    if (skip !== undefined) {
      const skipped = skip(...args);
      if (isPromiseLike(skipped)) return Promise.resolve(skipped).then((yes) => (yes ? skippedOutcome(withOuter(args, [])) : keyed(args)));
      if (skipped) return skippedOutcome(withOuter(args, []));
    }
    return keyed(args);
  }

  async function check(...args: Args): Promise<Outcome> {
    return checkNow(...args);
  }

  function keyed(args: Args): MaybePromise<Outcome> {
    const key = keyOf(...args);
    // a key that is not a string is the limiter's to refuse (SluiceInputError)
    return typeof key === "string" || !isPromiseLike(key) ? picked(args, key) : Promise.resolve(key).then((k) => picked(args, k));
  }

  function picked(args: Args, key: string): MaybePromise<Outcome> {
    const target = pick(args, key);
    return isTarget(target) ? priced(args, key, target) : target.then((t) => priced(args, key, t));
  }

  function priced(args: Args, key: string, target: Target): MaybePromise<Outcome> {
    if (typeof cost !== "function") return decided(args, key, target, fixedCost);
    const units = cost(...args);
    return isPromiseLike(units) ? Promise.resolve(units).then((u) => decided(args, key, target, costOptions(u))) : decided(args, key, target, costOptions(units));
  }

  function decided(args: Args, key: string, target: Target, limitOptions: LimitOptions | undefined): MaybePromise<Outcome> {
    // the limiter's deny cache may answer without a store round trip (reason "cached-deny"); a
    // dry-run limiter marks its decisions (dryRun: true), which this pipeline then lets through
    const decision = limitNow(target.limiter, key, limitOptions);
    return isPromiseLike(decision) ? Promise.resolve(decision).then((d) => handedOff(args, key, target, d)) : handedOff(args, key, target, decision);
  }

  function handedOff(args: Args, key: string, target: Target, decision: Decision): MaybePromise<Outcome> {
    if (onDecision !== undefined) report(config, args, decision, decisionInfo(() => platform.request(...args), target.limiter, key, pkSalt));
    if (hasWork(decision.pending)) {
      const handOff = platform.waitUntil?.(...args);
      if (handOff === undefined) return decision.pending.then(() => outcomeOf(args, key, target, decision));
      handOff(decision.pending);
    }
    return outcomeOf(args, key, target, decision);
  }

  function outcomeOf(args: Args, key: string, target: Target, decision: Decision): MaybePromise<Outcome> {
    if (decision.dryRun) {
      // dry run: headers only when asked for, and never Retry-After (the request is served)
      const own = dryRunHeaders ? headersOf(config, target, key, decision, true) : [];
      const served = outcomeWith(args, key, target, decision, withOuter(args, own), undefined);
      // the report of a request enforcing would deny; what onLimited returns is ignored
      if (!decision.allowed && onLimited !== undefined) return Promise.resolve(onLimited(...args, decision)).then(() => served);
      return served;
    }
    const headers = withOuter(args, headersOf(config, target, key, decision, false));
    if (decision.allowed) return outcomeWith(args, key, target, decision, headers, undefined);
    if (onLimited === undefined) return outcomeWith(args, key, target, decision, headers, limitedResponse(decision, headers));
    return Promise.resolve(onLimited(...args, decision)).then((own) => outcomeWith(args, key, target, decision, headers, ownLimited(own, headers, platform.tag)));
  }

  function outcomeWith(args: Args, key: string, target: Target, decision: Decision, headers: HeaderList, response: Response | undefined): Outcome {
    const outcome: Outcome = { decision, key, limiter: target.limiter, headers, response };
    if (decision.lease !== undefined) noteHead(outcome, platform.request(...args));
    if (countWhen !== undefined && response === undefined) OUTCOME_ARGS.set(outcome, args);
    return outcome;
  }

  return { check, checkNow };
}
