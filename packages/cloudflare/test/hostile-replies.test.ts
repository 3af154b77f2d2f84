/**
 * A hostile Durable Object: whatever the object answers over RPC — of any shape, type or range —
 * becomes a store failure (`reason: "store-error"`, `onStoreFailure` called once, `onStoreError`
 * honoured) or a decision that obeys the invariants, never an exception and never a `now` outside
 * the clock's range. The object (`HostileLimiter`, `fixtures/hostile-worker.ts`) runs in workerd,
 * and the `DurableObjectStore` that reads its replies runs in the Worker beside it, so every reply
 * crosses workerd's RPC serialization. Genuine replies come from the real `SluiceLimiter` for the
 * same call, replayed as they are (each must be a decision) or with one value replaced.
 *
 * `SLUICE_PROPERTY_RUNS` runs the property that many times (CONTRIBUTING.md, "Deeper property runs").
 */
import { type Policy, concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "@sluice/core";
import { T0 } from "@sluice/testing";
import { hostileCallArbitrary, hostileNumber, objectReplyArbitrary, unsoundOutcome } from "@sluice/testing/hostile-checks";
import type { HostileOutcome } from "@sluice/testing/hostile-replies";
import { type StartedWorker, startWorker } from "@sluice/testing/miniflare";
import { deepRuns } from "@sluice/testing/suite-shared";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { specOf } from "../src/protocol.js";
import { post } from "./helpers.js";

const NAMESPACES: Policy[][] = [
  [fixedWindow({ limit: 5, window: "1m", name: "fw" })],
  [slidingWindow({ limit: 5, window: "10s", name: "sw" })],
  [tokenBucket({ capacity: 5, refillRate: 1, name: "tb" })],
  [leakyBucket({ rate: 2, period: "1s", burst: 3, queue: 2, name: "lb" }), slidingLog({ limit: 4, window: "1m", name: "sl" })],
  [fixedWindow({ limit: 3, window: "1m", name: "login", block: "1m" }), concurrency({ limit: 2, name: "cc" })],
];

/** What happens to the key before the call whose genuine reply is replayed. */
const priorArbitrary = fc.record({
  afterMs: fc.integer({ min: 0, max: 5500 }),
  kind: fc.constantFrom("limit", "limit", "limit", "limit", "limit", "scale", "quotas", "unlimited", "block"),
  cost: fc.integer({ min: 1, max: 3 }),
});

const caseArbitrary = fc.integer({ min: 0, max: NAMESPACES.length - 1 }).chain((ns) =>
  fc.record({
    ns: fc.constant(ns),
    reply: fc.oneof(
      objectReplyArbitrary(NAMESPACES[ns] as Policy[]).map((template) => ({ template })),
      fc
        .record({ priors: fc.array(priorArbitrary, { maxLength: 10 }), mutation: fc.option(fc.tuple(fc.nat(), hostileNumber), { freq: 2, nil: undefined }) })
        .map((genuine) => ({ genuine })),
    ),
    call: hostileCallArbitrary,
    // a test clock a year and more from the real one: only the time sent may then be now
    clock: fc.option(fc.integer({ min: T0, max: T0 + 10 ** 9 }), { freq: 2, nil: undefined }),
  }),
);

/** `value` with every bigint as `{ $bigint }`, which JSON can carry (the Worker turns it back). */
function wire(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? { $bigint: String(v) } : v)));
}

let worker: StartedWorker;
beforeAll(async () => {
  worker = await startWorker({
    entry: new URL("./fixtures/hostile-worker.ts", import.meta.url),
    name: "sluice-hostile",
    durableObjects: { SLUICE: { className: "SluiceLimiter", useSQLite: true }, HOSTILE: { className: "HostileLimiter", useSQLite: true } },
    bindings: { SLUICE_ALLOW_TEST_CLOCK: "true" },
    directSocket: true,
  });
});
afterAll(() => worker?.stop());

describe("DurableObjectStore against a hostile object", () => {
  it("every RPC reply is a store failure or a sound decision, never an exception", async () => {
    await fc.assert(
      fc.asyncProperty(caseArbitrary, async ({ ns, reply, call, clock }) => {
        const policies = NAMESPACES[ns] as Policy[];
        const body = wire({ policies: policies.map(specOf), call, clockMs: clock, reply });
        const outcome = await post<HostileOutcome & { genuine?: unknown }>(new URL("/hostile", worker.directUrl).toString(), body);
        expect(await unsoundOutcome(outcome, call, policies, clock)).toBeUndefined();
        // a genuine reply, untouched, is a decision
        if ("genuine" in reply && reply.genuine.mutation === undefined) expect(outcome.decision?.reason, JSON.stringify(outcome.genuine)).not.toBe("store-error");
      }),
      { numRuns: deepRuns() ?? 300 },
    );
  }, deepRuns() === undefined ? 180_000 : 30 * 60_000);
});
