/**
 * The export list of each entry of `@sluice/cloudflare`, pinned: what `import()` gives at run time
 * (in workerd: the main entry imports `cloudflare:workers`) and the names that exist only as types
 * (read from the source with the compiler). The RPC wire types between `DurableObjectStore` and
 * `SluiceLimiter` (`protocol.ts`) are internal: no entry exports them. Changing an entry means
 * changing this file.
 */
import { fileURLToPath } from "node:url";
import { entryExports } from "@sluice/testing/entries";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedWorker, startWorker } from "./helpers.js";

const src = fileURLToPath(new URL("../src/", import.meta.url));
const [root, testing] = entryExports([`${src}index.ts`, `${src}testing.ts`], `${src}../tsconfig.json`);

const ROOT_VALUES = ["DurableObjectStore", "MAX_SHARDS", "SluiceLimiter", "UNKNOWN_CLIENT_KEY", "withRateLimit"];
const ROOT_TYPES = [
  "Decision",
  "DurableObjectStoreOptions",
  "RateLimitedFetch",
  "RateLimitedHandler",
  "SluiceLimiterEnv",
  "SluiceLimiterNamespace",
  "WithRateLimitCommonOptions",
  "WithRateLimitHandler",
  "WithRateLimitLimiterOptions",
  "WithRateLimitOptions",
  "WithRateLimitTieredOptions",
];
const TESTING_VALUES = ["createTestDurableObjectStore"];
const TESTING_TYPES = ["TestDurableObjectStoreOptions"];
/** The wire format (protocol.ts): internal. */
const WIRE_TYPES = ["PolicySpec", "LimiterCall", "ConsumeCall", "RefundCall", "ReleaseCall", "ResetCall", "DecisionReply", "ResetReply", "Refusal", "RefusalName", "SluiceLimiterStub"];

let worker: StartedWorker;
beforeAll(async () => {
  worker = await startWorker("./fixtures/entries-worker.ts");
});
afterAll(async () => {
  await worker?.stop();
});

describe("@sluice/cloudflare's entries export exactly their lists", () => {
  it("at run time, in workerd", async () => {
    const response = await fetch(worker.url);
    expect(await response.json()).toEqual({ main: ROOT_VALUES, testing: TESTING_VALUES });
  });

  it("@sluice/cloudflare", () => {
    expect(root).toEqual({ entry: `${src}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });

  it("@sluice/cloudflare/testing", () => {
    expect(testing).toEqual({ entry: `${src}testing.ts`, values: TESTING_VALUES, types: TESTING_TYPES });
  });

  it("no entry exports the RPC wire types", () => {
    for (const name of WIRE_TYPES) expect([...(root?.types ?? []), ...(testing?.types ?? [])]).not.toContain(name);
  });
});
