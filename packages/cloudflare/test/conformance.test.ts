import { testStore } from "@sluice/testing";
import { type StartedWorker, WorkerStore, startStoreWorker } from "./helpers.js";

// The same suite and recorded vectors as MemoryStore and the Redis stores. The suite runs here in
// Vitest; each store call is an HTTP request to a Worker in workerd that calls DurableObjectStore,
// so every decision is made by the SluiceLimiter object (with the test clock, behind its fence).
// One object per key here; the sharded store in conformance-sharded.test.ts (a file of its own, so
// that a run can take the two at once).

let perKey: StartedWorker | undefined;
testStore({
  name: "DurableObjectStore (one object per key, workerd)",
  makeStore: async ({ clock }) => {
    const started = await startStoreWorker({ testClock: true });
    perKey = started;
    return new WorkerStore(started.url, { clock });
  },
  teardown: async () => {
    await perKey?.stop();
  },
  numRuns: 40,
  // each call is an HTTP request into workerd and an RPC to the object
  invariantRuns: 20,
  // a few hundred calls per test: seconds alone, up to ~20 s on a loaded 2-core machine
  timeoutMs: 90_000,
});
