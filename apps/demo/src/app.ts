/**
 * The demo API: a Hono app on Node.js limited by Sluice with the memory store.
 *
 * - `GET /health` is never limited.
 * - `GET /api/*` is limited per API key (`x-api-key`) by the key's plan, or per client address as
 *   `free` when there is no key. An API key that is not in the table gets 401. `GET /api/whoami`
 *   shows the caller's quota without spending it (a peek). `GET /api/export` is also limited to 2
 *   exports in flight per key (a concurrency limit, checked before the plan's).
 * - `POST /auth/login` counts failed attempts only (a successful login is refunded, `countWhen`):
 *   5 failures per 5 minutes per address; the next attempt is refused and blocks the address for
 *   15 minutes (a penalty box). It fails closed.
 * - `POST /admin/overrides` and `POST /admin/blocks` (behind `Authorization: Bearer <admin key>`)
 *   set, clear or lift a per-key override or a manual block on the `/api` plans' limiters.
 *
 * `createApp()` builds the app without listening, so tests can inject the store or its clock and
 * drive it with `app.request()`; `main.ts` serves it.
 *
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { getConnInfo } from "@hono/node-server/conninfo";
import {
  DEFAULT_HEADER_STYLES,
  type Decision,
  type Duration,
  MemoryStore,
  type Override,
  type Policy,
  RateLimiter,
  SluiceInputError,
  type Store,
  concurrency,
  fixedWindow,
  normalizeIp,
  setRateLimitHeaders,
  slidingLog,
  slidingWindow,
  toMs,
  tokenBucket,
} from "@sluice/core";
import { type RateLimitVariables, rateLimiter } from "@sluice/hono";
import { instrumentDecisions, instrumentStore } from "@sluice/otel";
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { logger } from "hono/logger";

/** The plans, as in the seed: requests per minute, per day, and the burst a client may spend at once. */
export const PLANS = {
  free: { perMinute: 30, perDay: 1_000, burst: 10 },
  pro: { perMinute: 300, perDay: 50_000, burst: 50 },
  enterprise: { perMinute: 3_000, perDay: 500_000, burst: 200 },
} as const;

/** A plan name. */
export type Tier = keyof typeof PLANS;

/**
 * The demo's API keys, one per plan: an in-memory table standing in for a database. The `tier`
 * resolver reads it through {@link findAccount}; the middleware caches its answers per key.
 */
export const DEMO_API_KEYS: Readonly<Record<string, { owner: string; tier: Tier }>> = Object.freeze({
  "free-demo-key": { owner: "Ada (free plan)", tier: "free" },
  "pro-demo-key": { owner: "Grace (pro plan)", tier: "pro" },
  "enterprise-demo-key": { owner: "Initech (enterprise plan)", tier: "enterprise" },
});

/** The limits of one plan: a token bucket for bursts, a sliding window per minute, a fixed window per day. */
export function planLimits(tier: Tier): Policy[] {
  const { perMinute, perDay, burst } = PLANS[tier];
  return [
    tokenBucket({ capacity: burst, refillRate: perMinute, interval: "1m", name: "burst" }),
    slidingWindow({ limit: perMinute, window: "1m", name: "per-minute" }),
    fixedWindow({ limit: perDay, window: "1d", name: "per-day" }),
  ];
}

/** The namespace prefix of the `/api` limiters (each plan counts in `{ prefix, tier }`). */
export const API_PREFIX = "demo-api";

/** Failed login attempts per client address: 5 per 5 minutes; one more blocks the address for 15 minutes. */
export const LOGIN_LIMIT = slidingLog({ limit: 5, window: "5m", name: "login", block: "15m" });

/**
 * Exports in flight per key (API key, else address): a concurrency limit, on top of the plan's
 * limits. A slot is held until the export's response has been sent; a slot nobody frees (a crashed
 * process) comes back after the lease, 1 minute.
 */
export const EXPORT_CONCURRENCY = concurrency({ limit: 2, lease: "1m", name: "exports" });

/** Units each `/api` route costs; everything else costs 1. */
export const ROUTE_COSTS: Readonly<Record<string, number>> = Object.freeze({ "/api/export": 5 });

/** Options of {@link createApp}. */
export interface DemoAppOptions {
  /**
   * Where every limiter keeps its state.
   * @default new MemoryStore({ clock })
   */
  store?: Store;
  /**
   * The memory store's clock, in epoch ms (ignored when `store` is given).
   * @default Date.now
   */
  clock?: () => number;
  /** Logs one line per request and response (Hono's `logger`), e.g. `console.log`. */
  log?: (line: string) => void;
  /**
   * How long `GET /api/export` takes to build its export, in ms (the demo's stand-in for real
   * work, so that exports are in flight long enough to meet the concurrency limit).
   * @default 0
   */
  exportMs?: number;
  /**
   * The export's work itself, awaited while its slot is held (instead of waiting `exportMs`): tests
   * pass a function whose promise they settle, so that exports are in flight exactly as long as the
   * test needs.
   * @default waits `exportMs`
   */
  buildExport?: () => Promise<void>;
  /**
   * The admin key: `POST /admin/overrides` and `POST /admin/blocks` answer only requests with
   * `Authorization: Bearer <adminKey>` (401 otherwise). `main.ts` passes `SLUICE_ADMIN_KEY`, or a
   * random key it prints.
   * @default a random key nobody is told: every admin request gets 401
   */
  adminKey?: string;
}

/** Whether `key` may be an admin key: RFC 6750's `b64token` (what may follow `Bearer `), so it pastes into a shell as is. */
export function isValidAdminKey(key: string): boolean {
  return /^[A-Za-z0-9._~+/-]+=*$/.test(key);
}

/** A new random admin key: 32 hexadecimal digits (128 bits). */
export function randomAdminKey(): string {
  return randomBytes(16).toString("hex");
}

/** The app's context variables: `c.get("rateLimit")` on limited routes. */
export type DemoEnv = { Variables: RateLimitVariables };

/** Looks an API key up, as a database would (asynchronously). */
export async function findAccount(apiKey: string): Promise<{ owner: string; tier: Tier } | undefined> {
  return Object.hasOwn(DEMO_API_KEYS, apiKey) ? DEMO_API_KEYS[apiKey] : undefined;
}

/**
 * The client's address as a rate-limit key, from the socket (no proxy headers are trusted: the
 * demo is meant to be called directly). IPv4-mapped IPv6 is written as IPv4; other IPv6 addresses
 * by their /64.
 */
export function clientAddress(c: Context): string {
  const address = getConnInfo(c).remote.address;
  return `ip:${(address === undefined ? undefined : normalizeIp(address)) ?? "unknown"}`;
}

/** The rate-limit key of an `/api` request: `key:<api key>` with a key, else `ip:<address>`. */
export function apiClientKey(c: Context): string {
  const apiKey = c.req.header("x-api-key");
  return apiKey === undefined ? clientAddress(c) : `key:${apiKey}`;
}

/**
 * The plan of a rate-limit key: `free` for an address, else the API key's plan. An unknown API key
 * throws the 401, so nothing is consumed (or cached) for it.
 */
export async function tierOf(key: string): Promise<Tier> {
  if (key.startsWith("ip:")) return "free";
  const account = await findAccount(key.slice("key:".length));
  if (account === undefined) {
    throw new HTTPException(401, {
      res: problem(401, "Unauthorized", "Unknown API key. Send one of the demo keys in x-api-key, or none to be limited by address."),
    });
  }
  return account.tier;
}

function problem(status: number, title: string, detail: string): Response {
  return new Response(JSON.stringify({ type: "about:blank", title, status, detail }), {
    status,
    headers: { "Content-Type": "application/problem+json" },
  });
}

/** The decision on a limited route: always set there, since these limiters skip nothing. */
function decisionOf(c: Context<DemoEnv>): Decision {
  const decision = c.get("rateLimit");
  if (decision === undefined) throw new Error("no rate-limit decision: this route is not behind rateLimiter()");
  return decision;
}

/** What the `/api` handlers show of a decision. */
function summary(decision: Decision) {
  return {
    policy: decision.policy,
    limit: decision.limit,
    remaining: decision.remaining,
    resetAt: new Date(decision.resetAt).toISOString(),
    policies: Object.fromEntries(decision.policies.map((p) => [p.policy, { limit: p.limit, remaining: p.remaining }])),
  };
}

const QUOTES = [
  "Make it work, make it right, make it fast.",
  "Premature optimization is the root of all evil.",
  "Simplicity is prerequisite for reliability.",
];

/**
 * Builds the demo app.
 *
 * @example
 * ```ts
 * const app = createApp({ clock: () => t });
 * const res = await app.request("/api/whoami", { headers: { "x-api-key": "pro-demo-key" } });
 * ```
 */
export function createApp(options: DemoAppOptions = {}): Hono<DemoEnv> {
  // OpenTelemetry: a span and a duration per store call, a count per decision; no-ops unless an
  // SDK is registered (main.ts does with SLUICE_OTEL=console)
  const store = instrumentStore(options.store ?? new MemoryStore({ clock: options.clock ?? Date.now }));
  const onDecision = instrumentDecisions();
  const app = new Hono<DemoEnv>();
  if (options.log !== undefined) app.use(logger(options.log));

  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    console.error(error);
    return c.json({ error: "internal error" }, 500);
  });

  app.get("/health", (c) => c.json({ status: "ok" }));

  // At most 2 exports in flight per key, checked before the plan's limits (registered first), so
  // an export refused here spends nothing of the plan; one the plan refuses frees its slot as its
  // 429 goes out. Allowed, the plan's middleware writes the rate-limit headers the client sees;
  // refused here, the 429 carries this limit's own: RateLimit-Policy: "exports";q=2;qu="concurrent-requests".
  const exportSlots = new RateLimiter({ store, prefix: "demo-export", limits: EXPORT_CONCURRENCY });
  app.use("/api/export", rateLimiter({ limiter: exportSlots, key: apiClientKey, onDecision }));

  const tiers = { free: planLimits("free"), pro: planLimits("pro"), enterprise: planLimits("enterprise") };
  app.use(
    "/api/*",
    rateLimiter({
      store,
      prefix: API_PREFIX,
      tiers,
      key: apiClientKey,
      // Callers without a key are limited as free by address. An API key is looked up in the
      // "database"; the middleware caches the answer per key for 5 minutes. An unknown key is
      // rejected with 401 here: the lookup throws, so nothing is cached or consumed for it.
      tier: (_c, key) => tierOf(key),
      // a path is looked up as an own entry only (a request path is the caller's choice)
      cost: (c) => (Object.hasOwn(ROUTE_COSTS, c.req.path) ? (ROUTE_COSTS[c.req.path] as number) : 1),
      // whoami only looks: it peeks below instead of spending a request
      skip: (c) => c.req.path === "/api/whoami",
      // the busiest routes: a hot key's requests are decided from units reserved ahead, without a
      // round trip each, once the store is one a round trip away (createApp({ store })). Over the
      // demo's own memory store it changes nothing: a limiter never reserves over a MemoryStore
      reserve: true,
      onDecision,
    }),
  );

  // One limiter per plan over the same store, prefix and tier namespace as the middleware's: the
  // same counters, read without consuming.
  const planLimiters: Record<Tier, RateLimiter> = {
    free: new RateLimiter({ store, prefix: API_PREFIX, tier: "free", limits: tiers.free }),
    pro: new RateLimiter({ store, prefix: API_PREFIX, tier: "pro", limits: tiers.pro }),
    enterprise: new RateLimiter({ store, prefix: API_PREFIX, tier: "enterprise", limits: tiers.enterprise }),
  };

  app.get("/api/whoami", async (c) => {
    const key = apiClientKey(c);
    const tier = await tierOf(key); // the 401 for an unknown key
    const limiter = planLimiters[tier];
    const decision = await limiter.peek(key);
    setRateLimitHeaders({ set: (name, value) => c.header(name, value) }, decision, DEFAULT_HEADER_STYLES, limiter.policies);
    const apiKey = c.req.header("x-api-key");
    const account = apiKey === undefined ? undefined : await findAccount(apiKey);
    return c.json({
      client: key,
      owner: account?.owner ?? null,
      tier,
      // the key's override that applies (set with POST /admin/overrides), as the store reported it
      override: decision.override ?? null,
      // "blocked" while a manual block (POST /admin/blocks) or a penalty box holds
      rateLimit: { ...summary(decision), reason: decision.reason },
    });
  });

  app.get("/api/quote", (c) => {
    const decision = decisionOf(c);
    return c.json({ quote: QUOTES[decision.remaining % QUOTES.length], remaining: decision.remaining, override: decision.override ?? null });
  });

  const exportMs = options.exportMs ?? 0;
  const buildExport = options.buildExport ?? (() => (exportMs > 0 ? new Promise<void>((resolve) => setTimeout(resolve, exportMs)) : undefined));
  app.get("/api/export", async (c) => {
    const decision = decisionOf(c);
    await buildExport();
    // this export's slot is still held: it is freed once this response has been sent
    const slots = await exportSlots.peek(apiClientKey(c));
    return c.json({
      export: "ok",
      cost: ROUTE_COSTS["/api/export"],
      rateLimit: summary(decision),
      exportsInFlight: { limit: EXPORT_CONCURRENCY.limit, free: slots.remaining },
    });
  });

  const loginLimiter = new RateLimiter({ store, prefix: "demo-login", limits: LOGIN_LIMIT, onStoreError: "deny" });
  // only failed attempts count: a successful login's unit is given back after the handler
  const countFailures = (_c: Context, response: Response) => response.status >= 400;
  app.post("/auth/login", rateLimiter({ limiter: loginLimiter, key: clientAddress, onDecision, countWhen: countFailures }), async (c) => {
    const body: unknown = await c.req.json().catch(() => undefined);
    const { username, password } = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
    if (username === "demo" && password === "demo") {
      // this attempt is refunded: the attempts left are those before it
      return c.json({ ok: true, token: "demo-token", attemptsLeft: decisionOf(c).remaining + 1 });
    }
    return c.json({ ok: false, error: "invalid credentials", attemptsLeft: decisionOf(c).remaining }, 401);
  });

  // Admin: per-key overrides and manual blocks on the /api plans. They act through planLimiters,
  // the same store, prefix and tier namespace as the middleware's own limiters: the override or
  // block lands in the key's record, which the middleware's next decision for that key reads (in
  // the same store call that decides). With the memory store nothing is cached between the two:
  // the change applies at the key's very next request; over a store that reserves (see reserve
  // above), within a second (the reservations' maxAgeMs).
  const adminKeyHash = sha256(options.adminKey ?? randomAdminKey());
  app.use("/admin/*", async (c, next) => {
    const match = /^Bearer +(\S+) *$/i.exec(c.req.header("authorization") ?? "");
    if (match === null) return unauthorized('Send the admin key as "Authorization: Bearer <key>".', 'Bearer realm="sluice-demo-admin"');
    if (!timingSafeEqual(sha256(match[1] as string), adminKeyHash)) {
      return unauthorized("Wrong admin key.", 'Bearer realm="sluice-demo-admin", error="invalid_token"');
    }
    await next();
  });

  // { key, tier?, override: { scale } | { quotas } | { unlimited: true } | null, ttl? }
  app.post("/admin/overrides", async (c) => {
    try {
      const body = await adminBody(c, ["key", "tier", "override", "ttl"]);
      const { key, tier, limiter } = await adminTarget(body, planLimiters);
      if (!("override" in body)) {
        throw new SluiceInputError("override is required: { scale }, { quotas }, { unlimited: true }, or null to clear the key's override", { option: "override" });
      }
      if (body.override === null) {
        if (body.ttl !== undefined) throw new SluiceInputError("ttl goes with an override to set; override: null clears the key's override", { option: "ttl" });
        await limiter.clearOverride(key);
      } else {
        // checked by the limiter against the plan's policies: a SluiceInputError naming the field, nothing stored
        await limiter.setOverride(key, body.override as Override, body.ttl === undefined ? undefined : { ttl: body.ttl as Duration });
      }
      // what is now in force, as the next decision will see it: a peek (spends nothing)
      const now = await limiter.peek(key);
      const override = now.override ?? null;
      return c.json({
        key,
        tier,
        override,
        // by the store's clock at this answer
        expiresAt: override === null || body.ttl === undefined ? null : new Date(now.now + toMs(body.ttl as Duration, "ttl")).toISOString(),
        // each policy's quota under the override; null while unlimited (nothing is counted)
        quotas: override !== null && "unlimited" in override ? null : Object.fromEntries(now.policies.map((p) => [p.policy, p.limit])),
      });
    } catch (error) {
      return badRequest(error);
    }
  });

  // { key, tier?, duration: "15m" } or { key, tier?, unblock: true }
  app.post("/admin/blocks", async (c) => {
    try {
      const body = await adminBody(c, ["key", "tier", "duration", "unblock"]);
      const { key, tier, limiter } = await adminTarget(body, planLimiters);
      if (body.unblock !== undefined) {
        if (body.unblock !== true) throw new SluiceInputError(`unblock must be true; got ${JSON.stringify(body.unblock)}`, { option: "unblock" });
        if (body.duration !== undefined) throw new SluiceInputError('give either duration (to block) or unblock: true (to lift the block), not both', { option: "duration" });
        await limiter.unblock(key);
      } else {
        if (body.duration === undefined) throw new SluiceInputError('duration is required (like "15m"), or unblock: true to lift the block', { option: "duration" });
        await limiter.block(key, body.duration as Duration);
      }
      const now = await limiter.peek(key);
      const blockedUntil = Math.max(0, ...now.policies.map((p) => (p.blocked === true ? (p.blockedUntil ?? 0) : 0)));
      return c.json({
        key,
        tier,
        blocked: blockedUntil > now.now,
        blockedUntil: blockedUntil > now.now ? new Date(blockedUntil).toISOString() : null,
        // seconds until the key's next request may pass (the block's end, or later if its limits say so)
        retryAfter: blockedUntil > now.now ? Math.ceil(now.retryAfterMs / 1000) : null,
      });
    } catch (error) {
      return badRequest(error);
    }
  });

  return app;
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

function unauthorized(detail: string, challenge: string): Response {
  const res = problem(401, "Unauthorized", detail);
  res.headers.set("WWW-Authenticate", challenge);
  return res;
}

/** The 400 of bad admin input: the `SluiceInputError`'s message and `option`. Anything else is rethrown (a 500). */
function badRequest(error: unknown): Response {
  if (!(error instanceof SluiceInputError)) throw error;
  return new Response(JSON.stringify({ type: "about:blank", title: "Bad Request", status: 400, detail: error.message, option: error.option }), {
    status: 400,
    headers: { "Content-Type": "application/problem+json" },
  });
}

/** An admin request's JSON body: an object with no fields but `allowed`. */
async function adminBody(c: Context, allowed: readonly string[]): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new SluiceInputError("body must be a JSON object", { option: "body" });
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new SluiceInputError(`body must be a JSON object; got ${JSON.stringify(body)}`, { option: "body" });
  }
  for (const field of Object.keys(body)) {
    if (!allowed.includes(field)) throw new SluiceInputError(`${field} is not a field of this request: it takes ${allowed.join(", ")}`, { option: field });
  }
  return body as Record<string, unknown>;
}

/**
 * The rate-limit key of an admin request and the plan whose limiter it acts on: `tier` when given,
 * else the key's own plan (`ip:<address>` is free; `key:<api key>` is the key's plan).
 */
async function adminTarget(body: Record<string, unknown>, limiters: Record<Tier, RateLimiter>): Promise<{ key: string; tier: Tier; limiter: RateLimiter }> {
  const { key, tier } = body;
  if (typeof key !== "string" || key === "") {
    throw new SluiceInputError(`key must be the rate-limit key as the API uses it ("key:<api key>" or "ip:<address>"); got ${JSON.stringify(key)}`, { option: "key" });
  }
  let plan: Tier;
  if (tier !== undefined) {
    if (typeof tier !== "string" || !Object.hasOwn(PLANS, tier)) {
      throw new SluiceInputError(`tier must be one of ${Object.keys(PLANS).join(", ")}; got ${JSON.stringify(tier)}`, { option: "tier" });
    }
    plan = tier as Tier;
  } else if (key.startsWith("ip:")) {
    plan = "free";
  } else {
    const account = key.startsWith("key:") ? await findAccount(key.slice("key:".length)) : undefined;
    if (account === undefined) {
      throw new SluiceInputError(`tier is required for key ${JSON.stringify(key)}: it is neither an address ("ip:…") nor a demo API key ("key:<api key>")`, { option: "tier" });
    }
    plan = account.tier;
  }
  return { key, tier: plan, limiter: limiters[plan] };
}
