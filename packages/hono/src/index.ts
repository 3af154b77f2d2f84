/**
 * @module
 * Rate Limiter Middleware for Hono, built on `@sluice/core`: one limiter or per-plan tiers, IETF
 * `RateLimit` headers (plus draft-7, draft-6 and legacy `X-RateLimit-*`), an RFC 9457
 * `application/problem+json` 429, and the decision at `c.get("rateLimit")`.
 */
import { type Decision, UNKNOWN_CLIENT_KEY } from "@sluice/core";
import { type Outcome, type Platform, createPipeline } from "@sluice/core/adapter";
import type { Context, Env, MiddlewareHandler, Next } from "hono";
import type { HonoRateLimiterOptions } from "./options.js";

export type { Decision } from "@sluice/core";
export type { HonoRateLimiterOptions, RateLimiterCommonOptions, RateLimiterLimiterOptions, RateLimiterTieredOptions } from "./options.js";
export { UNKNOWN_CLIENT_KEY };

/** The context variables the middleware sets: `c.get("rateLimit")`, the request's {@link Decision} (`undefined` when `skip` said so). */
export type RateLimitVariables = {
  rateLimit: Decision | undefined;
};

/** Outside Workers there is no invocation to keep alive: the background work simply runs. */
const letRun = (): void => {};

const platform: Platform<[c: Context]> = {
  where: "rateLimiter",
  tag: "hono",
  params: "c",
  request: (c) => c.req.raw,
  waitUntil(c) {
    try {
      const ctx = c.executionCtx; // a getter that throws where there is none (Node.js, Bun, app.request())
      return (promise) => ctx.waitUntil(promise);
    } catch {
      return letRun;
    }
  },
};

/**
 * Each header name as a `Headers` keeps it, lowercase: `c.header()` writes into a Fetch `Headers`,
 * which lowercases the name of every `set` (a new string each time, hashed again) unless it is
 * lowercase already. Names are case-insensitive and a `Headers` iterates them in lowercase, so
 * nothing visible changes. Bounded: the names come from the pipeline's header styles.
 */
const lowercaseNames = new Map<string, string>();

function lowercase(name: string): string {
  let lower = lowercaseNames.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    if (lowercaseNames.size < 64) lowercaseNames.set(name, lower);
  }
  return lower;
}

/**
 * Sets the rate-limit headers through Hono, before the handler runs: `c.header()` then puts them
 * on every response built with `c` (`c.json()`, `c.text()`, `c.body()`…), under the handler's own
 * headers of the same name, and the middleware before this one sees them on `c.res` after
 * `await next()` — on every runtime, `@hono/node-server` included. The values were formatted once
 * per request by the pipeline (and everything static, such as `RateLimit-Policy`, once per
 * limiter): this is one `set` per header on the one `Headers` object the response is built from.
 *
 * Returns the index of the header that tells a response built from them (see {@link carriesOwn}):
 * the IETF `RateLimit`, which names the policy and says what is left, else the last one.
 */
function writeHeaders(c: Context, headers: readonly (readonly [string, string])[]): number {
  let own = headers.length - 1;
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i] as readonly [string, string];
    const name = lowercase(header[0]);
    if (name === "ratelimit") own = i;
    c.header(name, header[1]);
  }
  return own;
}

/**
 * Whether `response` was built from the headers this request wrote with `c.header()` (by `c.text()`,
 * `c.json()`… or from a copy of `c.res.headers`): it carries this request's own value of the one
 * {@link writeHeaders} chose. Then it has them all, as the handler left them: one `Headers` read
 * instead of one per header. A response built without `c` (`new Response()`, a `fetch()` response)
 * does not, and `finish` adds the headers it lacks (those it has win).
 */
function carriesOwn(response: Response, own: readonly [string, string]): boolean {
  // (a network error, Response.error(), has empty headers: it carries none)
  return response.headers.get(lowercase(own[0])) === own[1];
}

/**
 * Rate Limiter Middleware for Hono.
 *
 * Each request is keyed (`key`, or the client address with `trust`), checked against the limiter
 * (or its tier's limits), and then either passed on — with `c.get("rateLimit")` set and the
 * rate-limit headers on the final response, whatever the handler returned (headers it sets
 * itself win), written through Hono (`c.header()`), so a middleware registered before this one
 * reads them from `c.res.headers` after `await next()` on every runtime — or answered with the 429
 * (or `onLimited`'s response) without calling the handler.
 * A decision that asks to be shaped (`delayMs > 0`, a `leakyBucket` with a `queue`) waits
 * `delayMs` first. With a `concurrency()` limit, the request's lease is freed when the response
 * has been produced: when its body ends or is cancelled (a streamed `c.body(stream)` or
 * `stream(c, ...)` response holds its slot until the stream ends), at once for a response without
 * a body, or when the handler throws. On Workers, `decision.pending` goes to
 * `c.executionCtx.waitUntil`.
 * Misconfiguration throws `SluiceConfigError` when `rateLimiter()` is called.
 *
 * Generic over the app's `Env`, so callbacks see a typed `c.env`: `rateLimiter<{ Bindings: Bindings }>(...)`.
 *
 * @param options - `limiter` (or `tiers` + `tier`), `key` (or `trust`), `cost`, `skip`, `headers`,
 *   `onLimited`, `countWhen`, `onDecision`, `onCallbackError`, and with tiers `store`, `prefix`,
 *   `tierCacheTtlMs`…: see {@link RateLimiterCommonOptions} and `TierSettings` in `@sluice/core`.
 *   Callbacks get `c`, then what Sluice adds: `tier(c, key)`, `onLimited(c, decision)`,
 *   `countWhen(c, response, decision)`, `onDecision(c, decision, info)`,
 *   `onCallbackError(c, error, callback)`.
 * @returns The middleware; it sets `c.get("rateLimit")`.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { RateLimiter, slidingWindow } from "@sluice/core";
 * import { rateLimiter } from "@sluice/hono";
 *
 * const app = new Hono();
 *
 * app.use(
 *   "/api/*",
 *   rateLimiter({
 *     limiter: new RateLimiter({ limits: slidingWindow({ limit: 100, window: "1m" }) }),
 *     trust: "cloudflare", // key by CF-Connecting-IP
 *   }),
 * );
 *
 * app.get("/api/hello", (c) => c.json({ remaining: c.get("rateLimit")?.remaining }));
 * ```
 *
 * @example Tiers by API key, on Workers
 * ```ts
 * type AppEnv = { Bindings: { PLANS: KVNamespace } };
 *
 * app.use(
 *   "/api/*",
 *   rateLimiter<AppEnv>({
 *     tiers: {
 *       free: [slidingWindow({ limit: 30, window: "1m" }), fixedWindow({ limit: 1000, window: "1d" })],
 *       pro: [slidingWindow({ limit: 300, window: "1m" }), fixedWindow({ limit: 50_000, window: "1d" })],
 *     },
 *     key: (c) => c.req.header("x-api-key") ?? "anonymous",
 *     tier: async (c, key) => (await c.env.PLANS.get(key)) ?? "free",
 *     skip: (c) => c.req.method === "OPTIONS",
 *     onLimited: (c, decision) => c.json({ error: "slow down", retryAfterMs: decision.retryAfterMs }, 429),
 *   }),
 * );
 * ```
 */
export function rateLimiter<E extends Env = Env>(options: HonoRateLimiterOptions<E>): MiddlewareHandler<E & { Variables: RateLimitVariables }> {
  const { checkNow, delay, finish, release } = createPipeline<[c: Context<E>]>(options, platform);
  // only countWhen makes finish asynchronous (a lease too, handled apart)
  const finishes = options.countWhen !== undefined;

  return function rateLimiter(c, next) {
    // an in-memory limiter with synchronous callbacks decides in place: no promise, no microtask turn
    let checked: Outcome | Promise<Outcome>;
    try {
      checked = checkNow(c as unknown as Context<E>);
    } catch (error) {
      return Promise.reject(error); // a middleware answers with a promise, also when it fails
    }
    return "then" in checked ? checked.then((outcome) => proceed(outcome, c, next)) : proceed(checked, c, next);
  };

  function proceed(outcome: Outcome, c: Context, next: Next): Promise<Response | void> {
    const { decision } = outcome;
    if (decision === undefined) return next();
    c.set("rateLimit", decision);
    if (outcome.response !== undefined) return Promise.resolve(outcome.response);
    // before next(): on every response built with c, under the handler's own headers
    const own = writeHeaders(c, outcome.headers);
    if (decision.lease !== undefined) return leased(outcome, c, next);
    if (finishes || decision.delayMs > 0) return served(outcome, c, next);
    if (outcome.headers.length === 0) return next();
    return completed(outcome, c, next, own);
  }

  /** A request with nothing to do after the handler but the headers of a response built without `c`. */
  async function completed(outcome: Outcome, c: Context, next: Next, own: number): Promise<void> {
    await next();
    const response = c.res;
    // built with c: nothing is left to finish (no countWhen, no lease on this path)
    if (carriesOwn(response, outcome.headers[own] as [string, string])) return;
    const finished = finish(outcome, response) as Response; // synchronous without countWhen or a lease
    if (finished !== response) c.res = finished;
  }

  /** A request that waits `delayMs`, or whose response `finish` completes (headers, countWhen). */
  async function served(outcome: Outcome, c: Context, next: Next): Promise<void> {
    if (outcome.decision !== undefined && outcome.decision.delayMs > 0) await delay(outcome);
    await next();
    // only countWhen makes finish asynchronous, and a plain value is not awaited (a microtask turn saved)
    const finished = finish(outcome, c.res);
    const response = finished instanceof Promise ? await finished : finished;
    if (response !== c.res) c.res = response;
  }

  /**
   * A request that holds a concurrency lease: `finish` hands Hono a response whose body frees it
   * when it ends (or frees it now when there is no body); if the handler or `finish` throws, it is
   * freed here.
   */
  async function leased(outcome: Outcome, c: Context, next: Next): Promise<void> {
    try {
      if (outcome.decision !== undefined && outcome.decision.delayMs > 0) await delay(outcome);
      await next();
      const finished = finish(outcome, c.res);
      const response = finished instanceof Promise ? await finished : finished;
      if (response !== c.res) c.res = response;
    } catch (error) {
      await release(outcome);
      throw error;
    }
  }
}
