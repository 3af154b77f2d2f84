/**
 * OpenTelemetry for Sluice, on `@opentelemetry/api` alone: without an SDK every call below is the
 * API's no-op, so a library or an app can instrument unconditionally.
 *
 * - {@link instrumentDecisions} returns an `onDecision` callback for the request pipeline
 *   (`createGuard`, `@sluice/hono`'s `rateLimiter`, `@sluice/next`'s `withRateLimit` and
 *   `rateLimitProxy`, `@sluice/cloudflare`'s `withRateLimit`) that counts each decision in the
 *   counter `sluice.decisions` (unit `{decision}`), by `sluice.policy`, `sluice.allowed`,
 *   `sluice.reason` and `sluice.tier`.
 * - {@link instrumentStore} wraps any `Store` (`MemoryStore`, `RedisStore`, `UpstashStore`,
 *   `DurableObjectStore`, your own) so that each call its limiter makes — `consume`, `peek`,
 *   `reset`, `refund`, `release`, `control` (overrides and manual blocks) — is one span, `sluice.store consume` …, with the round trip's outcome, and
 *   one measurement of the histogram `sluice.store.duration` (seconds).
 *
 * Both use the global `MeterProvider` and `TracerProvider` unless given one. The global meter
 * provider is looked up at each call, so one registered after `instrumentStore()` ran (an SDK
 * started after the module that builds the limiter was imported) is still used.
 *
 * @example
 * ```ts
 * import { RateLimiter, MemoryStore, slidingWindow } from "@sluice/core";
 * import { rateLimiter } from "@sluice/hono";
 * import { instrumentDecisions, instrumentStore } from "@sluice/otel";
 *
 * const limiter = new RateLimiter({ store: instrumentStore(new MemoryStore()), limits: slidingWindow({ limit: 100, window: "1m" }) });
 * app.use(rateLimiter({ limiter, trust: "cloudflare", onDecision: instrumentDecisions() }));
 * ```
 *
 * @module
 */
import {
  type Attributes,
  type Counter,
  type Histogram,
  type MeterProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  context,
  metrics,
  trace,
} from "@opentelemetry/api";
import { type Decision, type DecisionInfo, MemoryStore, SluiceConfigError, type Store } from "@sluice/core";
import { type BoundStore, type MaybePromise, type StoreNamespace, type StoreResult, toDecision } from "@sluice/core/store";

/** The instrumentation scope: the name every meter and tracer of this package is obtained with. */
export const INSTRUMENTATION_SCOPE = "@sluice/otel";
/** This package's version, the scope's version. */
export const INSTRUMENTATION_VERSION = "0.1.0";

/** Counter of the request pipeline's decisions, unit `{decision}`. */
export const METRIC_SLUICE_DECISIONS = "sluice.decisions";
/** Histogram of store call durations, unit `s`. */
export const METRIC_SLUICE_STORE_DURATION = "sluice.store.duration";

/** The binding policy's name (`decision.policy`). */
export const ATTR_SLUICE_POLICY = "sluice.policy";
/** Whether the request was allowed (a boolean; in dry run, what enforcing would have done). */
export const ATTR_SLUICE_ALLOWED = "sluice.allowed";
/** `decision.reason`: `ok`, `limit`, `cost-exceeds-limit`, `cached-deny`, `store-error`, `timeout`. */
export const ATTR_SLUICE_REASON = "sluice.reason";
/** The tier (plan) that decided; absent without tiers. */
export const ATTR_SLUICE_TIER = "sluice.tier";
/** `true` on a dry-run decision (`mode: "dry-run"`); absent when enforcing. */
export const ATTR_SLUICE_DRY_RUN = "sluice.dry_run";
/** The store: its `name` option, else its class name (`MemoryStore`, `RedisStore`, `UpstashStore`, `DurableObjectStore`). */
export const ATTR_SLUICE_STORE = "sluice.store";
/** The store call: `consume`, `peek`, `reset`, `refund`, `release` (a concurrency lease freed) or `control` (an override or a manual block set, read or lifted). */
export const ATTR_SLUICE_OPERATION = "sluice.operation";
/** The limiter's key prefix (spans only). */
export const ATTR_SLUICE_PREFIX = "sluice.prefix";
/** The units a `consume` asked for, or a `refund` gave back (spans only). */
export const ATTR_SLUICE_COST = "sluice.cost";
/** Units left in the binding policy after the call (spans only). */
export const ATTR_SLUICE_REMAINING = "sluice.remaining";
/** The class of a store failure (`SluiceStoreError`, `ReplyError`, `TypeError`, …): the semantic conventions' `error.type`. */
export const ATTR_ERROR_TYPE = "error.type";

/**
 * Bucket boundaries of `sluice.store.duration`, in seconds: from 50 µs (a `MemoryStore` call) to
 * 5 s (past any sensible `timeoutMs`). Given as the instrument's advice; a View overrides them.
 */
export const STORE_DURATION_BUCKETS: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5,
];

/** Options of {@link instrumentDecisions}. */
export interface InstrumentDecisionsOptions {
  /**
   * Where the counter comes from.
   * @default the global MeterProvider (`metrics.getMeterProvider()`), looked up at each decision
   */
  meterProvider?: MeterProvider;
}

/** Options of {@link instrumentStore}. */
export interface InstrumentStoreOptions {
  /**
   * Where the spans come from.
   * @default the global TracerProvider (`trace.getTracerProvider()`)
   */
  tracerProvider?: TracerProvider;
  /**
   * Where the histogram comes from.
   * @default the global MeterProvider (`metrics.getMeterProvider()`), looked up at each call
   */
  meterProvider?: MeterProvider;
  /**
   * The `sluice.store` attribute. Name stores apart when one app has two of a kind, or when a
   * minifier renames classes.
   * @default the store's class name, e.g. "RedisStore" ("Store" for a plain object)
   */
  name?: string;
}

/**
 * The `onDecision` callback of the request pipeline, for every adapter: the framework's own
 * arguments (any number of them: `(request)`, `(c)`, `(request, context)`, `(request, env, ctx)`),
 * then the decision and its info — it reads only the last two.
 */
export type OnDecision = <Framework extends unknown[]>(...args: [...framework: Framework, decision: Decision, info: DecisionInfo]) => void;

/** Instruments made from one meter provider, remade when a different provider is current. */
function lazyInstruments<T>(provider: MeterProvider | undefined, make: (provider: MeterProvider) => T): () => T {
  let current: MeterProvider | undefined;
  let made: T | undefined;
  return () => {
    const now = provider ?? metrics.getMeterProvider();
    if (now !== current || made === undefined) {
      current = now;
      made = make(now);
    }
    return made;
  };
}

/** Refuses options that are not an object (`SluiceConfigError`, option `"options"`). */
function checkOptions(options: unknown): void {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`[sluice] [otel] options must be an object; got ${String(options)}`, { option: "options" });
  }
}

function checkProvider(value: unknown, option: string, method: string): void {
  if (value === undefined) return;
  if (typeof value !== "object" || value === null || typeof (value as Record<string, unknown>)[method] !== "function") {
    throw new SluiceConfigError(
      `[sluice] [otel] ${option} must be an OpenTelemetry ${option === "meterProvider" ? "MeterProvider" : "TracerProvider"} (with ${method}()); got ${String(value)}`,
      { option },
    );
  }
}

/**
 * An `onDecision` callback that counts decisions: the counter `sluice.decisions` (unit
 * `{decision}`), incremented by one per decided request with the attributes `sluice.policy` (the
 * binding policy), `sluice.allowed` (boolean), `sluice.reason` and — when set — `sluice.tier`,
 * plus `sluice.dry_run: true` for a dry-run decision. No key, key hash or route: they would make
 * the metric's cardinality unbounded (log them from your own `onDecision` if you need them).
 *
 * @param options - `meterProvider` (default: the global one).
 * @returns The callback, for the `onDecision` option of any adapter: it takes the adapter's own
 *   arguments first (`(c, decision, info)` in Hono, `(request, context, decision, info)` in a
 *   Next.js route, `(request, env, ctx, decision, info)` in a Worker) and reads the last two.
 *
 * @example Counting and logging
 * ```ts
 * const count = instrumentDecisions();
 * createGuard({
 *   limiter,
 *   trust: "cloudflare",
 *   onDecision(request, decision, info) {
 *     count(request, decision, info);
 *     if (!decision.allowed) console.warn(`429 ${info.route} client ${info.keyHash}`);
 *   },
 * });
 * ```
 */
export function instrumentDecisions(options: InstrumentDecisionsOptions = {}): OnDecision {
  checkOptions(options);
  checkProvider(options.meterProvider, "meterProvider", "getMeter");
  const counter = lazyInstruments<Counter>(options.meterProvider, (provider) =>
    provider.getMeter(INSTRUMENTATION_SCOPE, INSTRUMENTATION_VERSION).createCounter(METRIC_SLUICE_DECISIONS, {
      description: "Rate-limit decisions made by the Sluice request pipeline",
      unit: "{decision}",
    }),
  );
  return function recordDecision(...args) {
    // whatever the adapter's own arguments, the decision and its info come last
    const decision = args[args.length - 2] as Decision;
    const info = args[args.length - 1] as DecisionInfo | undefined;
    const attributes: Attributes = {
      [ATTR_SLUICE_POLICY]: decision.policy,
      [ATTR_SLUICE_ALLOWED]: decision.allowed,
      [ATTR_SLUICE_REASON]: decision.reason,
    };
    const tier = info?.tier;
    if (tier !== undefined) attributes[ATTR_SLUICE_TIER] = tier;
    if (decision.dryRun === true) attributes[ATTR_SLUICE_DRY_RUN] = true;
    counter().add(1, attributes);
  };
}

/** The operations of a bound store, each instrumented. */
type Operation = "consume" | "peek" | "reset" | "refund" | "release" | "control" | "reserve";

function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return value != null && typeof (value as { then?: unknown }).then === "function";
}

/** The semantic conventions' `error.type`: the error's class name, else `_OTHER`. */
export function errorType(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const name = (error as { name?: unknown }).name;
    if (typeof name === "string" && name !== "" && name !== "Error") return name;
    const ctor = (error as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof ctor === "string" && ctor !== "" && ctor !== "Object") return ctor;
  }
  return "_OTHER";
}

function storeNameOf(store: Store, option: string | undefined): string {
  if (option !== undefined) {
    if (typeof option !== "string" || option === "") {
      throw new SluiceConfigError(`[sluice] [otel] name must be a non-empty string; got ${typeof option === "string" ? '""' : String(option)}`, { option: "name" });
    }
    return option;
  }
  const ctor = (store as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof ctor === "string" && ctor !== "" && ctor !== "Object" ? ctor : "Store";
}

/**
 * Wraps a store so that every call its limiters make is traced and timed. Decisions, state and
 * timing semantics are the wrapped store's: a synchronous store (`MemoryStore`) still answers
 * synchronously, errors are rethrown as they came, and extra work is a span and one histogram
 * measurement per call (no-ops without an SDK).
 *
 * - **Spans:** `sluice.store consume` (`peek`, `reset`, `refund`, `release`, `control`, `reserve`), kind `CLIENT`, with
 *   `sluice.store`, `sluice.operation`, `sluice.prefix`, `sluice.tier` (when set) and
 *   `sluice.cost`; when the store answers, the outcome: `sluice.allowed`, `sluice.policy` (the
 *   binding policy), `sluice.reason` (`ok`, `limit` or `cost-exceeds-limit`) and
 *   `sluice.remaining`. A denial is an outcome, not an error: the status stays unset. A failure
 *   sets the status to `ERROR` with the error's message, `error.type`, and records the exception.
 *   The span is the current span while the store runs, so the HTTP or Redis client spans of an
 *   instrumented client nest under it. It ends when the store answers — also when the limiter's
 *   `timeoutMs` gave up on it earlier: the span shows how long the round trip really took (the
 *   decision's `reason: "timeout"` is counted by {@link instrumentDecisions}).
 * - **Histogram** `sluice.store.duration` (unit `s`, buckets {@link STORE_DURATION_BUCKETS}):
 *   one measurement per call with `sluice.store`, `sluice.operation`, `sluice.tier` (when set)
 *   and, on failure, `error.type`.
 *
 * No key is recorded anywhere.
 *
 * @param store - Any Sluice store.
 * @param options - `tracerProvider`, `meterProvider` (default: the global ones), `name`.
 * @returns A store to give to `RateLimiter` or to a tiered guard instead of `store`.
 *
 * @example
 * ```ts
 * const store = instrumentStore(new RedisStore(new Redis(process.env.REDIS_URL!)));
 * const limiter = new RateLimiter({ store, limits: slidingWindow({ limit: 100, window: "1m" }) });
 * ```
 */
export function instrumentStore(store: Store, options: InstrumentStoreOptions = {}): Store {
  if (typeof store !== "object" || store === null || typeof (store as Partial<Store>).bind !== "function") {
    throw new SluiceConfigError(`[sluice] [otel] store must be a Store (an object with bind(namespace)); got ${String(store)}`, { option: "store" });
  }
  checkOptions(options);
  checkProvider(options.tracerProvider, "tracerProvider", "getTracer");
  checkProvider(options.meterProvider, "meterProvider", "getMeter");
  const storeName = storeNameOf(store, options.name);
  const histogram = lazyInstruments<Histogram>(options.meterProvider, (provider) =>
    provider.getMeter(INSTRUMENTATION_SCOPE, INSTRUMENTATION_VERSION).createHistogram(METRIC_SLUICE_STORE_DURATION, {
      description: "Duration of Sluice store calls (one call decides one request for all its policies)",
      unit: "s",
      advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
    }),
  );
  let tracer: Tracer | undefined;
  const tracerOf = (): Tracer =>
    (tracer ??= (options.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_SCOPE, INSTRUMENTATION_VERSION));

  return {
    bind(namespace: StoreNamespace): BoundStore {
      const bound = store.bind(namespace);
      const base: Attributes = { [ATTR_SLUICE_STORE]: storeName };
      if (namespace.tier !== undefined) base[ATTR_SLUICE_TIER] = namespace.tier;
      return instrumentBound(bound, store instanceof MemoryStore, { tracer: tracerOf, histogram, base, spanBase: { ...base, [ATTR_SLUICE_PREFIX]: namespace.prefix } });
    },
  };
}

/** What every traced call of one bound store shares: its instruments and their attributes. */
interface Tracing {
  readonly tracer: () => Tracer;
  readonly histogram: () => Histogram;
  /** The measurement's attributes: the store and, when set, the tier. */
  readonly base: Attributes;
  /** The span's: the same and the prefix. */
  readonly spanBase: Attributes;
}

/** `bound` with every call traced and measured; the methods it lacks stay absent. */
function instrumentBound(bound: BoundStore, memory: boolean, tracing: Tracing): BoundStore {
  const wrapped: BoundStore = {
    // the lease (a concurrency cap's) is passed on only when there is one: for a namespace without
    // a concurrency policy the store sees consume(key, cost), as the limiter calls it
    consume: (key, cost, lease) => traced(tracing, "consume", cost, () => (lease === undefined ? bound.consume(key, cost) : bound.consume(key, cost, lease))),
    peek: (key) => traced(tracing, "peek", undefined, () => bound.peek(key)),
    reset: (key) => traced(tracing, "reset", undefined, () => bound.reset(key)),
    refund: (key, cost, charge) => traced(tracing, "refund", cost, () => bound.refund(key, cost, charge)),
    release: (key, lease) => traced(tracing, "release", undefined, () => bound.release(key, lease)),
  };
  // a store that lacks a method of the contract is handed on without it, so that the RateLimiter
  // refuses it at construction as it would refuse the store itself, instead of failing at the
  // first refund
  for (const method of ["refund", "release"] as const) {
    if (typeof bound[method] !== "function") delete (wrapped as Partial<BoundStore>)[method];
  }
  // overrides and manual blocks (limiter.setOverride, block…): passed on when the store has
  // them, so a traced store keeps them; one that has none stays without, and the limiter's
  // override methods refuse it as they would refuse the store itself
  if (typeof bound.control === "function") {
    const control = bound.control;
    wrapped.control = (key, command) => traced(tracing, "control", undefined, () => control.call(bound, key, command));
  }
  // reservations (the limiter's reserve option): passed on when the store makes them, so that a
  // traced limiter still decides a hot key locally; a reservation's span has the units asked as
  // its cost. Not over a MemoryStore: a limiter never reserves over one (it is already local), and
  // would start to, at a cost and for nothing, only because it is traced
  if (typeof bound.reserve === "function" && !memory) {
    const reserve = bound.reserve;
    wrapped.reserve = (key, units, holdMs) => traced(tracing, "reserve", units, () => reserve.call(bound, key, units, holdMs));
  }
  // the default timeout asks the store whether it is busy rather than hung (the Redis stores
  // answer): the wrapper must not hide that, or a traced limiter falls back where an untraced
  // one would have waited
  if (typeof bound.extendTimeout === "function") {
    const extend = bound.extendTimeout;
    wrapped.extendTimeout = (waitedMs, timeoutMs) => extend.call(bound, waitedMs, timeoutMs);
  }
  return wrapped;
}

/** Runs one store call inside its span, and measures it. */
function traced<T>(tracing: Tracing, operation: Operation, cost: number | undefined, run: () => MaybePromise<T>): MaybePromise<T> {
  const attributes: Attributes = { ...tracing.spanBase, [ATTR_SLUICE_OPERATION]: operation };
  if (cost !== undefined) attributes[ATTR_SLUICE_COST] = cost;
  const span = tracing.tracer().startSpan(`sluice.store ${operation}`, { kind: SpanKind.CLIENT, attributes });
  const started = performance.now();
  const succeeded = (value: T): T => {
    done(tracing, span, operation, started, false, value);
    return value;
  };
  const failed = (error: unknown): never => {
    done(tracing, span, operation, started, true, error);
    throw error;
  };
  let result: MaybePromise<T>;
  try {
    result = context.with(trace.setSpan(context.active(), span), run);
  } catch (error) {
    return failed(error);
  }
  return isThenable(result) ? result.then(succeeded, failed) : succeeded(result);
}

/** Ends a call's span with its outcome (the decision, or the failure) and records its duration. */
function done(tracing: Tracing, span: Span, operation: Operation, started: number, failed: boolean, outcome: unknown): void {
  const seconds = (performance.now() - started) / 1000;
  const measured: Attributes = { ...tracing.base, [ATTR_SLUICE_OPERATION]: operation };
  if (failed) {
    const error = outcome;
    const type = errorType(error);
    measured[ATTR_ERROR_TYPE] = type;
    span.setAttribute(ATTR_ERROR_TYPE, type);
    if (error instanceof Error) span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  } else if (operation !== "reset" && isStoreResult(outcome)) {
    const decision = toDecision(outcome);
    span.setAttributes({
      [ATTR_SLUICE_ALLOWED]: decision.allowed,
      [ATTR_SLUICE_POLICY]: decision.policy,
      [ATTR_SLUICE_REASON]: decision.reason,
      [ATTR_SLUICE_REMAINING]: decision.remaining,
    });
  }
  span.end();
  tracing.histogram().record(seconds, measured);
}

/** A well-formed store answer (a malformed one is the limiter's to refuse, not ours to describe). */
function isStoreResult(value: unknown): value is StoreResult {
  const policies = (value as { policies?: unknown } | null | undefined)?.policies;
  return Array.isArray(policies) && policies.length > 0 && policies.every((p) => typeof p === "object" && p !== null);
}
