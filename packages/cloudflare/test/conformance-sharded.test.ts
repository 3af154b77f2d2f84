import { testStore } from "@sluice/testing";
import { type StartedWorker, WorkerStore, startStoreWorker } from "./helpers.js";

// The conformance suite (see conformance.test.ts) on the sharded Durable Object store: keys hash
// onto three objects.

let sharded: StartedWorker | undefined;
testStore({
  name: "DurableObjectStore (shards: 3, workerd)",
  makeStore: async ({ clock }) => {
    const started = await startStoreWorker({ testClock: true });
    sharded = started;
    return new WorkerStore(started.url, { clock, shards: 3 });
  },
  teardown: async () => {
    await sharded?.stop();
  },
  numRuns: 10,
  invariantRuns: 8,
  timeoutMs: 90_000,
});
