/**
 * The runtime smoke suite: one list of cases that `bun/smoke.test.ts` registers with `bun:test` and
 * `deno/smoke.test.ts` with `Deno.test`, so both runtimes run exactly the same checks against the
 * BUILT packages (`dist`, resolved through each package's `exports` without the `@sluice/source`
 * condition). Every expectation is exact: decisions on an injected clock, header strings, the 429
 * body. Only the web platform and `node:assert` are used here; what differs per runtime (serving
 * HTTP, reading the environment) comes in through {@link SmokeRuntime}.
 *
 * @module
 */
import { deepStrictEqual, equal, ok, rejects } from "node:assert/strict";
import { parseRateLimit } from "@sluice/client";
import {
  type Decision,
  type Guard,
  MemoryStore,
  type Policy,
  QUOTA_EXCEEDED_TITLE,
  QUOTA_EXCEEDED_TYPE,
  RateLimiter,
  SluiceConfigError,
  SluiceError,
  SluiceInputError,
  type Store,
  clientIp,
  createGuard,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@sluice/core";
import { type RateLimitVariables, rateLimiter } from "@sluice/hono";
import { UpstashStore } from "@sluice/redis";
import { createTestUpstashStore } from "@sluice/redis/testing";
import { Redis } from "@upstash/redis";
import { Hono } from "hono";

/** A server started by the runtime's own HTTP API (`Bun.serve`, `Deno.serve`). */
export interface Served {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  close(): Promise<void>;
}

/** What the suite needs from the runtime it runs on. */
export interface SmokeRuntime {
  /** `"bun"` or `"deno"`: named in test names and key prefixes. */
  readonly name: string;
  /** Serves `fetch` on 127.0.0.1, a free port, with the runtime's own server. */
  serve(fetch: (request: Request) => Response | Promise<Response>): Promise<Served>;
  /** Reads an environment variable. */
  env(name: string): string | undefined;
}

/** One test: a name and an async body that throws on failure. */
export interface SmokeCase {
  readonly name: string;
  run(): Promise<void>;
}

/** The environment variables that point the suite at the Upstash REST bridge (set by the harness). */
export const UPSTASH_URL_ENV = "SLUICE_SMOKE_UPSTASH_URL";
export const UPSTASH_TOKEN_ENV = "SLUICE_SMOKE_UPSTASH_TOKEN";

/** 2026-01-01T00:00:00Z: a multiple of every window used below, so window edges are known. */
const T0 = Date.UTC(2026, 0, 1);
const T0_SECONDS = T0 / 1000;

/** The packages under test and the built file each must resolve to (never `src`). */
const BUILT_ENTRIES: ReadonlyArray<readonly [string, string]> = [
  ["@sluice/core", "/packages/core/dist/index.js"],
  ["@sluice/core/store", "/packages/core/dist/store.js"],
  ["@sluice/hono", "/packages/hono/dist/index.js"],
  ["@sluice/redis", "/packages/redis/dist/index.js"],
  ["@sluice/redis/testing", "/packages/redis/dist/testing.js"],
  ["@sluice/client", "/packages/client/dist/index.js"],
];

/** The fields of a decision an exact sequence pins; `resetAt` relative to {@link T0}. */
interface Expected {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  delayMs: number;
  resetAt: number;
  reason: Decision["reason"];
}

/**
 * One step of a sequence: at `T0 + at`, a request of `cost` is answered with the
 * `[allowed, remaining, retryAfterMs, resetAt - T0, delayMs?]` given. `reason` follows: `"ok"` when
 * allowed, `"cost-exceeds-limit"` when `retryAfterMs` is `Infinity`, else `"limit"`.
 */
type Step = readonly [at: number, cost: number, allowed: boolean, remaining: number, retryAfterMs: number, resetAt: number, delayMs?: number];

interface Sequence {
  readonly algorithm: string;
  readonly limits: () => Policy | Policy[];
  /** The policy name the decisions carry (checks the readable default names too). */
  readonly policy: string;
  readonly steps: readonly Step[];
}

/** The exact sequences of the contract, one per algorithm (plus the shaping leaky bucket). */
const SEQUENCES: readonly Sequence[] = [
  {
    // GCRA, T = 1000 ms, burst 3: starts full, one token back per second, tight retry.
    algorithm: "tokenBucket",
    limits: () => tokenBucket({ capacity: 3, refillRate: 1 }),
    policy: "3-burst-1-per-1s",
    steps: [
      [0, 1, true, 2, 0, 1000],
      [0, 1, true, 1, 0, 2000],
      [0, 1, true, 0, 0, 3000],
      [0, 1, false, 0, 1000, 3000],
      [999, 1, false, 0, 1, 3000],
      [1000, 1, true, 0, 0, 4000],
      [1000, 4, false, 0, Infinity, 4000],
      [4000, 3, true, 0, 0, 7000],
    ],
  },
  {
    // W = 10 s, limit 4: the previous window's count weighs (W - r)/W.
    algorithm: "slidingWindow",
    limits: () => slidingWindow({ limit: 4, window: "10s" }),
    policy: "4-per-10s",
    steps: [
      [0, 1, true, 3, 0, 20_000],
      [1000, 1, true, 2, 0, 20_000],
      [1000, 2, true, 0, 0, 20_000],
      [1000, 1, false, 0, 11_500, 20_000],
      [12_499, 1, false, 0, 1, 20_000],
      [12_500, 1, true, 0, 0, 30_000],
      [12_500, 5, false, 0, Infinity, 30_000],
    ],
  },
  {
    // Exact log of (time, cost) in (now - W, now].
    algorithm: "slidingLog",
    limits: () => slidingLog({ limit: 3, window: "10s" }),
    policy: "3-per-10s",
    steps: [
      [0, 1, true, 2, 0, 10_000],
      [2000, 2, true, 0, 0, 12_000],
      [3000, 1, false, 0, 7000, 12_000],
      [9999, 1, false, 0, 1, 12_000],
      [10_000, 1, true, 0, 0, 20_000],
      [10_000, 4, false, 0, Infinity, 20_000],
    ],
  },
  {
    algorithm: "fixedWindow",
    limits: () => fixedWindow({ limit: 2, window: "1m" }),
    policy: "2-per-1m",
    steps: [
      [0, 1, true, 1, 0, 60_000],
      [30_000, 1, true, 0, 0, 60_000],
      [59_999, 1, false, 0, 1, 60_000],
      [60_000, 2, true, 0, 0, 120_000],
      [60_000, 3, false, 0, Infinity, 120_000],
    ],
  },
  {
    // The contract's example: five pass at t=0, the sixth waits 100 ms.
    algorithm: "leakyBucket",
    limits: () => leakyBucket({ rate: 10, period: "1s", burst: 5 }),
    policy: "5-burst-10-per-1s",
    steps: [
      [0, 1, true, 4, 0, 100],
      [0, 1, true, 3, 0, 200],
      [0, 1, true, 2, 0, 300],
      [0, 1, true, 1, 0, 400],
      [0, 1, true, 0, 0, 500],
      [0, 1, false, 0, 100, 500],
      [99, 1, false, 0, 1, 500],
      [100, 1, true, 0, 0, 600],
      [100, 6, false, 0, Infinity, 600],
    ],
  },
  {
    // With queue 3 the sixth to eighth pass with delayMs 100, 200, 300; the ninth waits 100 ms.
    algorithm: "leakyBucket (queue)",
    limits: () => leakyBucket({ rate: 10, period: "1s", burst: 5, queue: 3 }),
    policy: "5-burst-10-per-1s-queue-3",
    steps: [
      [0, 5, true, 0, 0, 500],
      [0, 1, true, 0, 0, 600, 100],
      [0, 1, true, 0, 0, 700, 200],
      [0, 1, true, 0, 0, 800, 300],
      [0, 1, false, 0, 100, 800],
      [100, 1, true, 0, 0, 900, 300],
      [100, 9, false, 0, Infinity, 900],
    ],
  },
];

function expected(step: Step): Expected {
  const [, , allowed, remaining, retryAfterMs, resetAt, delayMs = 0] = step;
  return {
    allowed,
    remaining,
    retryAfterMs,
    delayMs,
    resetAt,
    reason: allowed ? "ok" : retryAfterMs === Infinity ? "cost-exceeds-limit" : "limit",
  };
}

function actual(decision: Decision): Expected {
  return {
    allowed: decision.allowed,
    remaining: decision.remaining,
    retryAfterMs: decision.retryAfterMs,
    delayMs: decision.delayMs,
    resetAt: decision.resetAt - T0,
    reason: decision.reason,
  };
}

/** A controllable clock for the stores that accept one. */
interface Clock {
  now: number;
  readonly read: () => number;
}

function clockAt(now: number): Clock {
  const clock: Clock = { now, read: () => clock.now };
  return clock;
}

function uniquePrefix(runtime: SmokeRuntime, what: string): string {
  return `smoke-${runtime.name}-${what}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

async function runSequence(sequence: Sequence, store: Store, clock: Clock, prefix: string): Promise<void> {
  // no deny cache: it would answer a repeated denial locally, by the real clock, without the store
  const limiter = new RateLimiter({ store, limits: sequence.limits(), prefix, onStoreError: "deny", denyCache: false });
  for (const [i, step] of sequence.steps.entries()) {
    clock.now = T0 + step[0];
    const decision = await limiter.limit("client", { cost: step[1] });
    deepStrictEqual(actual(decision), expected(step), `${sequence.algorithm}, step ${i + 1} (t=${step[0]} ms, cost ${step[1]})`);
    equal(decision.policy, sequence.policy, `${sequence.algorithm}, step ${i + 1}: binding policy`);
    equal(decision.now, clock.now, `${sequence.algorithm}, step ${i + 1}: decision.now is the store's clock`);
  }
}

/** Lower-cased header names and values, sorted: the exact set a response or guard produced. */
function headerList(headers: Headers): Array<[string, string]> {
  return [...headers].map(([name, value]): [string, string] => [name.toLowerCase(), value]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function sortedHeaders(entries: Record<string, string>): Array<[string, string]> {
  return headerList(new Headers(entries));
}

/** The three-limit plan of the tier case, and a bigger one to show the namespaces are apart. */
const TIERS = {
  free: [
    tokenBucket({ capacity: 3, refillRate: 1, name: "burst" }),
    slidingWindow({ limit: 5, window: "1m", name: "minute" }),
    fixedWindow({ limit: 6, window: "1d", name: "day" }),
  ],
  pro: [
    tokenBucket({ capacity: 30, refillRate: 10, name: "burst" }),
    slidingWindow({ limit: 300, window: "1m", name: "minute" }),
    fixedWindow({ limit: 10_000, window: "1d", name: "day" }),
  ],
};
const TIER_POLICY_HEADER = `"burst";q=3;w=3, "minute";q=5;w=60, "day";q=6;w=86400`;

function request(headers: Record<string, string> = {}, url = "http://sluice.test/api"): Request {
  return new Request(url, { headers });
}

function upstashClient(runtime: SmokeRuntime): Redis {
  const url = runtime.env(UPSTASH_URL_ENV);
  const token = runtime.env(UPSTASH_TOKEN_ENV);
  if (url === undefined || url === "" || token === undefined || token === "") {
    throw new Error(
      `${UPSTASH_URL_ENV} / ${UPSTASH_TOKEN_ENV} are not set: run this suite through \`pnpm --filter @sluice/runtimes smoke ${runtime.name}\` ` +
        "(or `pnpm test`), which starts a private redis-server and the Upstash REST bridge and passes their address.",
    );
  }
  // retry: false — a failed request is a failure now, never a replay after the store came back
  return new Redis({ url, token, retry: false, enableTelemetry: false });
}

/** Every case, in order. Names are unique; the harness checks that each one passed. */
export function smokeCases(runtime: SmokeRuntime): SmokeCase[] {
  const cases: SmokeCase[] = [];
  const test = (name: string, run: () => Promise<void>) => cases.push({ name, run });

  test("resolves the built packages (dist), never the sources", async () => {
    for (const [specifier, file] of BUILT_ENTRIES) {
      const resolved = import.meta.resolve(specifier);
      ok(resolved.endsWith(file), `${specifier} resolved to ${resolved}, expected …${file}`);
    }
  });

  for (const sequence of SEQUENCES) {
    test(`${sequence.algorithm}: exact decisions on MemoryStore (injected clock)`, async () => {
      const clock = clockAt(T0);
      await runSequence(sequence, new MemoryStore({ clock: clock.read }), clock, "smoke");
    });
  }

  for (const sequence of SEQUENCES) {
    test(`${sequence.algorithm}: the same decisions on UpstashStore (@upstash/redis → REST bridge → redis-server, test clock)`, async () => {
      const clock = clockAt(T0);
      const store = createTestUpstashStore(upstashClient(runtime), { clock: clock.read });
      await runSequence(sequence, store, clock, uniquePrefix(runtime, sequence.algorithm.replace(/\W+/g, "-")));
    });
  }

  test("UpstashStore with Redis TIME: all or nothing over three limits, peek, reset, tight errors", async () => {
    const limiter = new RateLimiter({
      store: new UpstashStore(upstashClient(runtime)),
      limits: [
        tokenBucket({ capacity: 3, refillRate: 1, interval: "1h", name: "burst" }),
        slidingLog({ limit: 4, window: "1h", name: "hour" }),
        fixedWindow({ limit: 1000, window: "1d", name: "day" }),
      ],
      prefix: uniquePrefix(runtime, "time"),
      onStoreError: "deny", // a broken store must fail this test, never fall back to memory
    });
    const before = Date.now();
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await limiter.limit("user:42");
      equal(d.reason, "ok");
      equal(d.policy, "burst");
      remaining.push(d.remaining);
    }
    deepStrictEqual(remaining, [2, 1, 0]);
    const denied = await limiter.limit("user:42");
    equal(denied.allowed, false);
    equal(denied.reason, "limit");
    equal(denied.policy, "burst");
    deepStrictEqual(
      denied.policies.map((p) => [p.policy, p.allowed, p.remaining]),
      [
        ["burst", false, 0],
        ["hour", true, 1],
        ["day", true, 997],
      ],
    );
    // one token per hour: Redis's clock, so allow for the time the requests took
    ok(denied.retryAfterMs > 3_590_000 && denied.retryAfterMs <= 3_600_000, `retryAfterMs ${denied.retryAfterMs}`);
    ok(Math.abs(denied.now - before) < 60_000, `decision.now ${denied.now} is Redis TIME, near ${before}`);
    const peek = await limiter.peek("user:42");
    deepStrictEqual([peek.allowed, peek.remaining, peek.reason], [false, 0, "limit"]);
    // the denial consumed nothing: the hour log still has 1 left
    deepStrictEqual(
      peek.policies.map((p) => [p.policy, p.remaining]),
      [
        ["burst", 0],
        ["hour", 1],
        ["day", 997],
      ],
    );
    await limiter.reset("user:42");
    const fresh = await limiter.limit("user:42", { cost: 2 });
    deepStrictEqual([fresh.allowed, fresh.remaining, fresh.reason, fresh.policy], [true, 1, "ok", "burst"]);
    const never = await limiter.limit("user:42", { cost: 4 });
    deepStrictEqual([never.allowed, never.retryAfterMs, never.reason], [false, Infinity, "cost-exceeds-limit"]);
    await rejects(limiter.limit("user:42", { cost: 0 }), SluiceInputError);
    await rejects(limiter.limit("", {}), SluiceInputError);
  });

  test("errors: SluiceConfigError at construction, SluiceInputError before any state is touched", async () => {
    let thrown: unknown;
    try {
      tokenBucket({ capacity: 0, refillRate: 1 });
    } catch (error) {
      thrown = error;
    }
    ok(thrown instanceof SluiceConfigError && thrown instanceof SluiceError, `got ${String(thrown)}`);
    ok(/capacity/.test((thrown as Error).message), (thrown as Error).message);
    const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit: 1, window: "1m" }) });
    for (const cost of [0, -1, 1.5, Number.NaN, Infinity, "1" as unknown as number]) {
      await rejects(limiter.limit("k", { cost }), SluiceInputError, `cost ${String(cost)}`);
    }
    equal((await limiter.limit("k")).remaining, 0, "the refused calls consumed nothing");
  });

  test("three-limit tier (createGuard): all or nothing, binding policy, exact headers and 429s", async () => {
    const clock = clockAt(T0 + 500);
    const guard: Guard = createGuard({
      store: new MemoryStore({ clock: clock.read }),
      tiers: TIERS,
      key: (req) => req.headers.get("x-api-key") ?? "anonymous",
      tier: (req) => req.headers.get("x-plan") ?? "free",
      tierCacheTtlMs: 0, // ask on every request: the same key changes plans below
    });
    const call = (plan = "free") => guard(request({ "x-api-key": "k1", "x-plan": plan }));
    const policies = (d: Decision | undefined) => d?.policies.map((p) => [p.policy, p.allowed, p.remaining]);

    for (const left of [2, 1]) equal((await call()).decision?.remaining, left);
    const third = await call();
    deepStrictEqual(policies(third.decision), [
      ["burst", true, 0],
      ["minute", true, 2],
      ["day", true, 3],
    ]);
    equal(third.response, undefined);
    deepStrictEqual(
      headerList(third.headers),
      sortedHeaders({
        "RateLimit-Policy": TIER_POLICY_HEADER,
        RateLimit: `"burst";r=0;t=1, "minute";r=2;t=80, "day";r=3;t=86400`,
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(T0_SECONDS + 4),
      }),
    );

    // the fourth: the burst denies; the minute and day policies report their state unchanged
    const fourth = await call();
    const d4 = fourth.decision as Decision;
    deepStrictEqual(
      [d4.allowed, d4.reason, d4.policy, d4.limit, d4.remaining, d4.retryAfterMs, d4.resetAt - T0],
      [false, "limit", "burst", 3, 0, 1000, 3500],
    );
    deepStrictEqual(policies(d4), [
      ["burst", false, 0],
      ["minute", true, 2],
      ["day", true, 3],
    ]);
    const response = fourth.response as Response;
    equal(response.status, 429);
    deepStrictEqual(
      headerList(response.headers),
      sortedHeaders({
        "Content-Type": "application/problem+json",
        "RateLimit-Policy": TIER_POLICY_HEADER,
        RateLimit: `"burst";r=0;t=1, "minute";r=2;t=80, "day";r=3;t=86400`,
        "Retry-After": "1",
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(T0_SECONDS + 4),
      }),
    );
    deepStrictEqual(await response.json(), {
      type: QUOTA_EXCEEDED_TYPE,
      title: QUOTA_EXCEEDED_TITLE,
      status: 429,
      detail: 'Quota of policy "burst" exceeded; retry after 1 second.',
      retryAfter: 1,
      "violated-policies": ["burst"],
    });

    // one token later: allowed, and the denial had consumed from none of the three
    clock.now = T0 + 1500;
    deepStrictEqual(policies((await call()).decision), [
      ["burst", true, 0],
      ["minute", true, 1],
      ["day", true, 2],
    ]);

    // the burst is full again; the minute's last unit goes, and it binds (least remaining)
    clock.now = T0 + 10_000;
    const fifth = (await call()).decision as Decision;
    deepStrictEqual([fifth.allowed, fifth.policy, fifth.remaining], [true, "minute", 0]);
    const sixth = await call();
    const d6 = sixth.decision as Decision;
    deepStrictEqual([d6.allowed, d6.policy, d6.retryAfterMs], [false, "minute", 62_000]);
    deepStrictEqual(policies(d6), [
      ["burst", true, 2],
      ["minute", false, 0],
      ["day", true, 1],
    ]);
    equal(sixth.response?.headers.get("Retry-After"), "62");
    deepStrictEqual((await sixth.response?.json())["violated-policies"], ["minute"]);

    // tight retry: 1 ms early is still denied, on time passes (day's last unit: a tie, the first binds)
    clock.now = T0 + 71_999;
    deepStrictEqual([(await call()).decision?.allowed, (await call()).decision?.retryAfterMs], [false, 1]);
    clock.now = T0 + 72_000;
    const seventh = (await call()).decision as Decision;
    deepStrictEqual([seventh.allowed, seventh.policy], [true, "minute"]);
    deepStrictEqual(policies(seventh), [
      ["burst", true, 2],
      ["minute", true, 0],
      ["day", true, 0],
    ]);

    // two policies deny: the one with the longest wait binds
    const eighth = await call();
    const d8 = eighth.decision as Decision;
    deepStrictEqual([d8.allowed, d8.policy, d8.retryAfterMs], [false, "day", 86_328_000]);
    deepStrictEqual(
      d8.policies.map((p) => [p.policy, p.allowed, p.retryAfterMs]),
      [
        ["burst", true, 0],
        ["minute", false, 12_000],
        ["day", false, 86_328_000],
      ],
    );
    deepStrictEqual(await eighth.response?.json(), {
      type: QUOTA_EXCEEDED_TYPE,
      title: QUOTA_EXCEEDED_TITLE,
      status: 429,
      detail: 'Quota of policy "day" exceeded; retry after 86328 seconds.',
      retryAfter: 86_328,
      "violated-policies": ["minute", "day"],
    });

    // the same API key on another plan counts in that plan's own namespace
    const pro = (await call("pro")).decision as Decision;
    deepStrictEqual(policies(pro), [
      ["burst", true, 29],
      ["minute", true, 299],
      ["day", true, 9999],
    ]);
    // a plan that is not configured: SluiceConfigError at the first request that names it
    await rejects(call("gold"), (error: unknown) => error instanceof SluiceConfigError && /gold/.test((error as Error).message));
  });

  test('header styles: exact "ietf", "draft-7", "draft-6" and "legacy" fields', async () => {
    const clock = clockAt(T0 + 42_000);
    const styles = {
      ietf: { "RateLimit-Policy": `"100-per-1m";q=100;w=60`, RateLimit: `"100-per-1m";r=42;t=18` },
      "draft-7": { RateLimit: "limit=100, remaining=42, reset=18", "RateLimit-Policy": "100;w=60" },
      "draft-6": { "RateLimit-Limit": "100", "RateLimit-Remaining": "42", "RateLimit-Reset": "18" },
      legacy: { "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "42", "X-RateLimit-Reset": String(T0_SECONDS + 60) },
    } as const;
    for (const [style, fields] of Object.entries(styles)) {
      const guard = createGuard({
        limiter: new RateLimiter({ store: new MemoryStore({ clock: clock.read }), limits: fixedWindow({ limit: 100, window: "1m" }) }),
        key: () => "k",
        cost: 58,
        headers: style as keyof typeof styles,
      });
      const { headers, response } = await guard(request());
      equal(response, undefined);
      deepStrictEqual(headerList(headers), sortedHeaders(fields), `headers: "${style}"`);
    }
    // the default is ["ietf", "legacy"]; a token bucket's w is the seconds to refill it, a leaky bucket's to drain it
    const guard = createGuard({
      limiter: new RateLimiter({
        store: new MemoryStore({ clock: clock.read }),
        limits: [tokenBucket({ capacity: 10, refillRate: 4 }), leakyBucket({ rate: 2, period: "1s", burst: 5 })],
      }),
      key: () => "k",
    });
    deepStrictEqual(
      headerList((await guard(request())).headers),
      sortedHeaders({
        "RateLimit-Policy": `"10-burst-4-per-1s";q=10;w=3, "5-burst-2-per-1s";q=5;w=3`,
        RateLimit: `"10-burst-4-per-1s";r=9;t=1, "5-burst-2-per-1s";r=4;t=1`,
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "4",
        "X-RateLimit-Reset": String(T0_SECONDS + 43),
      }),
    );
  });

  test("429 problem+json: a cost that can never pass has no Retry-After and retryAfter null", async () => {
    const guard = createGuard({
      limiter: new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: slidingWindow({ limit: 5, window: "1m" }) }),
      key: () => "k",
      cost: 6,
      headers: "draft-6",
    });
    const { decision, response } = await guard(request());
    deepStrictEqual([decision?.reason, decision?.retryAfterMs], ["cost-exceeds-limit", Infinity]);
    ok(response !== undefined);
    equal(response.status, 429);
    deepStrictEqual(
      headerList(response.headers),
      sortedHeaders({
        "Content-Type": "application/problem+json",
        "RateLimit-Limit": "5",
        "RateLimit-Remaining": "5",
        "RateLimit-Reset": "0",
      }),
    );
    equal(
      await response.text(),
      JSON.stringify({
        type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
        title: "Request cannot be satisfied as assigned quota has been exceeded",
        status: 429,
        detail: 'The request\'s cost exceeds the quota of policy "5-per-1m" and can never be allowed.',
        retryAfter: null,
        "violated-policies": ["5-per-1m"],
      }),
    );
  });

  test("clientIp: nothing trusted by default; cloudflare, vercel, N proxies; IPv6 prefixes", async () => {
    const headers = {
      "cf-connecting-ip": "203.0.113.7",
      "x-vercel-forwarded-for": "198.51.100.2",
      "x-real-ip": "198.51.100.3",
      "x-forwarded-for": "192.0.2.1, 192.0.2.2, 192.0.2.3",
    };
    equal(clientIp(request(headers)), undefined);
    equal(clientIp(request(headers), {}), undefined);
    equal(clientIp(request(headers), { trust: "cloudflare" }), "203.0.113.7");
    equal(clientIp(request(headers), { trust: "vercel" }), "198.51.100.2");
    equal(clientIp(request({ "x-real-ip": "198.51.100.3" }), { trust: "vercel" }), "198.51.100.3");
    equal(clientIp(request(headers), { trust: 1 }), "192.0.2.3");
    equal(clientIp(request(headers), { trust: 3 }), "192.0.2.1");
    equal(clientIp(request(headers), { trust: 4 }), undefined);
    equal(clientIp(request({ "cf-connecting-ip": "2001:db8:1:2:3:4:5:6" }), { trust: "cloudflare" }), "2001:db8:1:2::/64");
    equal(clientIp(request({ "cf-connecting-ip": "2001:db8:1:2:3:4:5:6" }), { trust: "cloudflare", ipv6Subnet: 48 }), "2001:db8:1::/48");
    equal(clientIp(request({ "cf-connecting-ip": "::ffff:192.0.2.1" }), { trust: "cloudflare" }), "192.0.2.1");
    equal(clientIp(request({ "cf-connecting-ip": "not-an-ip" }), { trust: "cloudflare" }), undefined);
    equal(clientIp(request({}), { trust: "cloudflare" }), undefined);
  });

  test("@sluice/client parseRateLimit reads Sluice's own headers and every other style", async () => {
    const clock = clockAt(T0 + 500);
    const guard = createGuard({ store: new MemoryStore({ clock: clock.read }), tiers: TIERS, key: () => "k", tier: () => "free" });
    for (let i = 0; i < 3; i++) await guard(request());
    const { response } = await guard(request());
    ok(response !== undefined);
    deepStrictEqual(parseRateLimit(response.headers), {
      style: "ietf",
      retryAfterSeconds: 1,
      policies: [
        { policy: "burst", quota: 3, window: 3, remaining: 0, resetSeconds: 1 },
        { policy: "minute", quota: 5, window: 60, remaining: 2, resetSeconds: 80 },
        { policy: "day", quota: 6, window: 86400, remaining: 3, resetSeconds: 86400 },
      ],
    });
    deepStrictEqual(parseRateLimit(new Headers({ RateLimit: "limit=100, remaining=42, reset=18", "RateLimit-Policy": "100;w=60" })), {
      style: "draft-7",
      retryAfterSeconds: undefined,
      policies: [{ policy: "default", quota: 100, window: 60, remaining: 42, resetSeconds: 18 }],
    });
    deepStrictEqual(parseRateLimit({ "ratelimit-limit": "10", "ratelimit-remaining": "0", "ratelimit-reset": "7", "retry-after": "7" }), {
      style: "draft-6",
      retryAfterSeconds: 7,
      policies: [{ policy: "default", quota: 10, remaining: 0, resetSeconds: 7 }],
    });
    deepStrictEqual(
      parseRateLimit(
        [
          ["X-RateLimit-Limit", "60"],
          ["X-RateLimit-Remaining", "59"],
          ["X-RateLimit-Reset", String(T0_SECONDS + 30)],
        ],
        { now: T0 + 250 },
      ),
      { style: "legacy", retryAfterSeconds: undefined, policies: [{ policy: "default", quota: 60, remaining: 59, resetSeconds: 30 }] },
    );
    deepStrictEqual(parseRateLimit(new Headers()), { style: undefined, retryAfterSeconds: undefined, policies: [] });
  });

  test(`Hono + @sluice/hono served by ${runtime.name === "bun" ? "Bun.serve" : runtime.name === "deno" ? "Deno.serve" : runtime.name}: real HTTP to a 429 with exact headers`, async () => {
    const clock = clockAt(T0 + 250);
    const limiter = new RateLimiter({
      store: new MemoryStore({ clock: clock.read }),
      limits: [tokenBucket({ capacity: 2, refillRate: 1, name: "burst" }), fixedWindow({ limit: 100, window: "1h", name: "hourly" })],
    });
    const app = new Hono<{ Variables: RateLimitVariables }>()
      .use("/api/*", rateLimiter({ limiter, key: (c) => c.req.header("x-api-key") ?? "anonymous" }))
      .get("/api/hello", (c) => c.json({ hello: runtime.name, remaining: c.get("rateLimit")?.remaining }))
      .get("/health", (c) => c.text("ok"));
    const served = await runtime.serve(app.fetch);
    try {
      const get = (path: string, key = "alice") => fetch(`${served.url}${path}`, { headers: { "x-api-key": key } });
      const policy = `"burst";q=2;w=2, "hourly";q=100;w=3600`;
      const expectHeaders = (response: Response, extra: Record<string, string>) => {
        const mine = headerList(response.headers).filter(([name]) => !["date", "content-length"].includes(name));
        deepStrictEqual(mine, sortedHeaders({ "RateLimit-Policy": policy, ...extra }));
      };

      const health = await get("/health");
      equal(health.status, 200);
      equal(await health.text(), "ok");
      equal(health.headers.get("RateLimit"), null, "routes outside /api/* are not limited");

      const first = await get("/api/hello");
      equal(first.status, 200);
      deepStrictEqual(await first.json(), { hello: runtime.name, remaining: 1 });
      expectHeaders(first, {
        "Content-Type": "application/json",
        RateLimit: `"burst";r=1;t=1, "hourly";r=99;t=3600`,
        "X-RateLimit-Limit": "2",
        "X-RateLimit-Remaining": "1",
        "X-RateLimit-Reset": String(T0_SECONDS + 2),
      });

      const second = await get("/api/hello");
      equal(second.status, 200);
      deepStrictEqual(await second.json(), { hello: runtime.name, remaining: 0 });
      expectHeaders(second, {
        "Content-Type": "application/json",
        RateLimit: `"burst";r=0;t=1, "hourly";r=98;t=3600`,
        "X-RateLimit-Limit": "2",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(T0_SECONDS + 3),
      });

      const limited = await get("/api/hello");
      equal(limited.status, 429);
      expectHeaders(limited, {
        "Content-Type": "application/problem+json",
        RateLimit: `"burst";r=0;t=1, "hourly";r=98;t=3600`,
        "Retry-After": "1",
        "X-RateLimit-Limit": "2",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": String(T0_SECONDS + 3),
      });
      deepStrictEqual(await limited.json(), {
        type: QUOTA_EXCEEDED_TYPE,
        title: QUOTA_EXCEEDED_TITLE,
        status: 429,
        detail: 'Quota of policy "burst" exceeded; retry after 1 second.',
        retryAfter: 1,
        "violated-policies": ["burst"],
      });

      // another key has its own quota; one second later alice has one token again
      const bob = await get("/api/hello", "bob");
      equal(bob.status, 200);
      deepStrictEqual(await bob.json(), { hello: runtime.name, remaining: 1 });
      clock.now += 1000;
      const again = await get("/api/hello");
      equal(again.status, 200);
      deepStrictEqual(await again.json(), { hello: runtime.name, remaining: 0 });
    } finally {
      await served.close();
    }
  });

  return cases;
}
