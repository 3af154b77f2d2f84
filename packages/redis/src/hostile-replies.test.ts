/**
 * Hostile servers: every reply a script call can get — of any length, type or range — becomes a
 * store failure (`reason: "store-error"`, `onStoreFailure` called once, `onStoreError` honoured) or
 * a decision that obeys the invariants, never an exception and never a `now` outside the clock's
 * range. The clients are the real ones, parsing real bytes: a RESP impostor
 * (`@sluice/testing/hostile-redis`) for ioredis 5 and 6 and node-redis 5 (RESP2) and 6 (RESP3, its
 * default), and the Upstash bridge in hostile mode for `@upstash/redis`.
 *
 * `SLUICE_PROPERTY_RUNS` runs each property that many times (CONTRIBUTING.md, "Deeper property runs").
 */
import { type Policy, RateLimiter, type Store, concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { T0, uniquePrefix } from "@sluice/testing";
import { type ListLayout, hostileCallArbitrary, hostileNumber, listReplyArbitrary, unsoundOutcome } from "@sluice/testing/hostile-checks";
import { type HostileRedis, startHostileRedis } from "@sluice/testing/hostile-redis";
import { type HostileCall, type Template, runHostileCall, toJsonText, toResp } from "@sluice/testing/hostile-replies";
import { deepRuns } from "@sluice/testing/suite-shared";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis as UpstashRedis } from "@upstash/redis";
import fc from "fast-check";
import IORedis from "ioredis";
import IORedis6 from "ioredis6";
import { createClient } from "redis";
import { createClient as createClient6 } from "redis6";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RedisStore, UpstashStore } from "./index.js";
import type { IORedisLike, RedisClientLike } from "./redis-store.js";
import { replyLengths } from "./replies.js";
import { createTestRedisStore, createTestUpstashStore } from "./testing.js";

/** Namespaces whose replies take every shape: each algorithm, a state or an answer in the fast path, marks, a penalty box, leases. */
const NAMESPACES: Policy[][] = [
  [fixedWindow({ limit: 5, window: "1m", name: "fw" })],
  [slidingWindow({ limit: 5, window: "10s", name: "sw" })],
  [tokenBucket({ capacity: 5, refillRate: 1, name: "tb" })],
  [leakyBucket({ rate: 2, period: "1s", burst: 3, queue: 2, name: "lb" }), slidingLog({ limit: 4, window: "1m", name: "sl" })],
  [fixedWindow({ limit: 3, window: "1m", name: "login", block: "1m" }), concurrency({ limit: 2, name: "cc" })],
];
const LAYOUTS: ListLayout[] = NAMESPACES.map((policies) => ({ ...replyLengths(policies), policies }));

/** What happens to the key before the call whose reply is recorded: requests, overrides, a manual block. */
const priorArbitrary = fc.record({
  afterMs: fc.integer({ min: 0, max: 5500 }),
  kind: fc.constantFrom("limit", "limit", "limit", "limit", "limit", "scale", "quotas", "unlimited", "block"),
  cost: fc.integer({ min: 1, max: 3 }),
});
type Prior = { afterMs: number; kind: string; cost: number };

/**
 * A genuine reply: the one the real script on the real Redis gives the same call after `priors`,
 * replayed as it is (it must then be a decision) or with one value replaced (`mutation`).
 */
const genuineArbitrary = fc.record({
  priors: fc.array(priorArbitrary, { maxLength: 10 }),
  mutation: fc.option(fc.tuple(fc.nat(), hostileNumber), { freq: 2, nil: undefined }),
});

/** One case: a namespace, a reply (random, or genuine), a call, and the clock (a test clock the store sends, or none: the server's). */
const caseArbitrary = fc.integer({ min: 0, max: NAMESPACES.length - 1 }).chain((ns) =>
  fc.record({
    ns: fc.constant(ns),
    reply: fc.oneof(
      listReplyArbitrary(LAYOUTS[ns] as ListLayout).map((template) => ({ template, genuine: undefined })),
      genuineArbitrary.map((genuine) => ({ template: undefined, genuine })),
    ),
    call: hostileCallArbitrary,
    // a test clock a year and more from the real one: only the time sent may then be now
    clock: fc.option(fc.integer({ min: T0, max: T0 + 10 ** 9 }), { freq: 2, nil: undefined }),
  }),
);

/** Each property's time limit: a deep run's takes minutes. */
const TIMEOUT_MS = deepRuns() === undefined ? 120_000 : 30 * 60_000;

/** What the server answers the next script call with, and at which now. */
const next: { reply: Template; clockMs: number | undefined } = { reply: null, clockMs: undefined };
const nowOfAnswer = () => next.clockMs ?? Date.now();

/** The real Redis, and the last reply a script call got from it (what the recording client passes on). */
const real: { client?: IORedis; reply?: unknown } = {};
const recording: IORedisLike = {
  evalsha: async (...args) => (real.reply = await (real.client as IORedis).evalsha(...args)),
  eval: async (...args) => (real.reply = await (real.client as IORedis).eval(...args)),
  del: (...keys) => (real.client as IORedis).del(...keys),
  defineCommand: () => undefined,
};
beforeAll(() => {
  real.client = new IORedis(inject("sluiceRedisUrl"), { maxRetriesPerRequest: 1 });
});
afterAll(() => real.client?.disconnect());

/** The reply the real script gives `call` at `nowMs` for a key that went through `priors` in the minute before. */
async function genuineReply(policies: Policy[], call: HostileCall, priors: readonly Prior[], nowMs: number): Promise<Template> {
  const clock = { ms: nowMs - 60_000 };
  const store = createTestRedisStore(recording, { clock: () => clock.ms });
  const prefix = uniquePrefix("genuine");
  const limiter = new RateLimiter({ store, limits: policies, prefix, denyCache: false, onStoreError: "deny" });
  const name = (policies[0] as Policy).name;
  for (const prior of priors) {
    clock.ms += prior.afterMs;
    if (prior.kind === "limit") await limiter.limit("k", { cost: prior.cost });
    else if (prior.kind === "block") await limiter.block("k", 1500 * prior.cost);
    else {
      const override = prior.kind === "scale" ? { scale: prior.cost / 2 } : prior.kind === "quotas" ? { quotas: { [name]: prior.cost } } : { unlimited: true as const };
      await limiter.setOverride("k", override, { ttl: 20_000 });
    }
  }
  clock.ms = nowMs;
  await runHostileCall(store, policies, call, prefix);
  return real.reply as Template;
}

/** `reply` with the value at `mutation[0]` (modulo its length) replaced by `mutation[1]`. */
function mutate(reply: Template, mutation: readonly [number, Template] | undefined): Template {
  if (mutation === undefined || !Array.isArray(reply) || reply.length === 0) return reply;
  const list = [...(reply as Template[])];
  list[mutation[0] % list.length] = mutation[1];
  return list;
}

/** Runs the property on the stores `make` builds: a test store sending `clock`, or, without one, a production store. */
async function property(make: (clock: number | undefined) => Store): Promise<void> {
  await fc.assert(
    fc.asyncProperty(caseArbitrary, async ({ ns, reply, call, clock }) => {
      const policies = NAMESPACES[ns] as Policy[];
      const { template, genuine } = reply;
      next.clockMs = clock;
      next.reply = genuine === undefined ? (template as Template) : mutate(await genuineReply(policies, call, genuine.priors, clock ?? Date.now()), genuine.mutation);
      const outcome = await runHostileCall(make(clock), policies, call);
      expect(await unsoundOutcome(outcome, call, policies, clock)).toBeUndefined();
      // a genuine reply, untouched, is a decision
      if (genuine !== undefined && genuine.mutation === undefined) expect(outcome.decision?.reason, JSON.stringify(next.reply)).not.toBe("store-error");
    }),
    { numRuns: deepRuns() ?? 300 },
  );
}

const redisStore = (client: RedisClientLike) => (clock: number | undefined) =>
  clock === undefined ? new RedisStore(client) : createTestRedisStore(client, { clock: () => clock });

describe("RedisStore against a hostile server", () => {
  let server: HostileRedis;
  beforeAll(async () => {
    server = await startHostileRedis((_command, _protocol) => toResp(next.reply, nowOfAnswer()));
  });
  afterAll(() => server.close());

  it("ioredis 5: every reply is a store failure or a sound decision", async () => {
    const client = new IORedis(server.url, { maxRetriesPerRequest: 1 });
    await property(redisStore(client)).finally(() => client.disconnect());
  }, TIMEOUT_MS);

  it("ioredis 6: every reply is a store failure or a sound decision", async () => {
    const client = new IORedis6(server.url, { maxRetriesPerRequest: 1 });
    await property(redisStore(client as never)).finally(() => client.disconnect());
  }, TIMEOUT_MS);

  it("node-redis 5 (RESP2): every reply is a store failure or a sound decision", async () => {
    const client = await createClient({ url: server.url, RESP: 2 }).connect();
    await property(redisStore(client)).finally(() => client.destroy());
  }, TIMEOUT_MS);

  it("node-redis 6 (RESP3, its default: doubles, booleans, maps, big numbers): every reply is a store failure or a sound decision", async () => {
    const client = await createClient6({ url: server.url }).connect();
    await property(redisStore(client as never)).finally(() => client.destroy());
  }, TIMEOUT_MS);
});

describe("UpstashStore against a hostile REST server", () => {
  let bridge: UpstashBridge;
  beforeAll(async () => {
    bridge = await startUpstashBridge({ redisUrl: inject("sluiceRedisUrl"), scriptReply: (_command, base64) => toJsonText(next.reply, nowOfAnswer(), base64) });
  });
  afterAll(() => bridge.close());

  it("@upstash/redis: every reply is a store failure or a sound decision", async () => {
    const redis = new UpstashRedis({ url: bridge.url, token: bridge.token, retry: false });
    await property((clock) => (clock === undefined ? new UpstashStore(redis) : createTestUpstashStore(redis, { clock: () => clock })));
  }, TIMEOUT_MS);
});
