/**
 * The shapes an adapter deals in: {@link Platform} (what an adapter tells the pipeline about its
 * framework), {@link Outcome} (what a check found) and {@link Pipeline} (the request flow of one
 * adapter).
 *
 * @module
 */
import type { RateLimiter } from "../limiter/index.js";
import type { Decision, MaybePromise } from "../types.js";

/** What an adapter tells the pipeline about its framework. */
export interface Platform<Args extends unknown[]> {
  /** The adapter's entry point, e.g. `"rateLimiter"`: the reports of a throwing callback name it. */
  where: string;
  /**
   * The adapter's package, short, e.g. `"hono"`: every error the pipeline throws for it reads
   * `[sluice] [hono] <option> must be …`. Without it the messages are core's (`[sluice] …`).
   */
  tag?: string;
  /**
   * The framework's arguments as messages should write them, e.g. `"c"` or `"request, env, ctx"`.
   * @default "request"
   */
  params?: string;
  /** The Fetch `Request` among the framework's arguments (read by `trust`). */
  request(...args: Args): Request;
  /**
   * Where the decision's background work (`decision.pending`) goes for this request: the
   * platform's `waitUntil`, or `undefined` to await it before answering (so it is never lost).
   * Without this hook it is awaited.
   */
  waitUntil?(...args: Args): ((promise: Promise<unknown>) => void) | undefined;
  /**
   * The rate-limit headers an outer layer decided for this request and left to this one to write
   * (a Next.js proxy in front of a wrapped route handler): they are merged with this layer's own
   * (`mergeRateLimitHeaders`, outer first) into every response of the request — the 429 too — so
   * the response's headers agree with its body. Without this hook, or when it answers
   * `undefined`, only this layer's headers are written.
   */
  outerHeaders?(...args: Args): HeaderList | undefined;
}

/** Rate-limit headers as `[name, value]` pairs, in the order they were written. */
export type HeaderList = [name: string, value: string][];

/** What {@link Pipeline.check} found for one request. */
export interface Outcome {
  /** The decision; `undefined` when `skip` said so. In dry run it may be a denial (`dryRun: true`) with no `response`. */
  decision: Decision | undefined;
  /** The request's rate-limit key; `undefined` when skipped. */
  key: string | undefined;
  /** The limiter that decided (the tier's, with `tiers`); `undefined` when skipped. */
  limiter: RateLimiter | undefined;
  /**
   * The rate-limit headers for the response (empty when skipped), merged with an outer layer's
   * ({@link Platform.outerHeaders}) when there is one.
   */
  headers: HeaderList;
  /** The response to send instead of calling the handler: the 429, or `onLimited`'s. `undefined` when allowed, and always in dry run. */
  response: Response | undefined;
}

/** The request flow of one adapter. Its methods need no `this`. */
export interface Pipeline<Args extends unknown[]> {
  /** Skip, key, tier, cost, decision, `pending` to `waitUntil`, headers and the 429. */
  check(...args: Args): Promise<Outcome>;
  /**
   * {@link Pipeline.check} without the promise when every step answers in place (synchronous
   * `skip`, key, tier and cost, and a store that answers in place such as MemoryStore): then the
   * outcome itself, else a promise of it. What `check` would reject with may be thrown. For an
   * adapter on a hot path: a request on an in-memory limiter is then decided without a microtask
   * turn.
   */
  checkNow(...args: Args): MaybePromise<Outcome>;
  /** Waits the decision's `delayMs` (a shaping `leakyBucket` asks requests to wait before being served). */
  delay(outcome: Outcome): Promise<void>;
  /**
   * The handler's response with the rate-limit headers: headers it already has win; a response
   * with immutable headers (`Response.redirect()`, a `fetch()` response) is copied; a network
   * error (`Response.error()`) is returned as it is. Anything but a response is a `TypeError`.
   * With `countWhen`, a request that should not count is refunded first (then it returns a
   * promise); a `countWhen` that throws or rejects is reported (`onCallbackError`) and the response
   * goes out, counted.
   *
   * When the decision holds a concurrency lease (`decision.lease`), the slot is freed once the
   * response has been produced: a response with a body is returned as a copy whose body is the
   * handler's, passed through, releasing when it ends, fails or is cancelled (so the client sees
   * the end of the body only after the slot is free); a response without a body releases at once
   * (then it returns a promise). A failing release goes to the limiter's `onStoreFailure` (the slot
   * then frees when its lease expires). Without a lease nothing is wrapped.
   *
   * `headersWritten: true` skips the headers: for an adapter that has already put them where the
   * response will be built (Hono sets them with `c.header()` before the handler runs).
   */
  finish(outcome: Outcome, response: Response, headersWritten?: boolean): MaybePromise<Response>;
  /**
   * Frees the concurrency lease of `outcome`'s decision, if it holds one (`decision.lease`); never
   * rejects (a failing release goes to the limiter's `onStoreFailure`). For an adapter whose handler
   * threw before there was a response to `finish`.
   */
  release(outcome: Outcome): Promise<void>;
  /**
   * `check`, then the 429 or (after `delay`) `next(decision)`, then `finish`: a whole fetch-style
   * request. A concurrency lease is freed when the response's body ends, or at once if `next`
   * throws.
   */
  handle(args: Args, next: (decision: Decision | undefined) => MaybePromise<Response>): Promise<Response>;
}
