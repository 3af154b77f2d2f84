/**
 * The export list of each entry of `@sluice/core`, pinned: what `import()` gives at run time and
 * the names that exist only as types. Changing an entry means changing this file — a decision
 * written down, with the entry's audience in mind:
 *
 * - `@sluice/core` (`index.ts`): what an application calls — the factories, `RateLimiter`,
 *   `MemoryStore`, `createGuard`, the errors, `clientIp`, the header and 429 helpers — with the
 *   types of those calls, and the defaults and bounds of their options.
 * - `@sluice/core/adapter` (`adapter.ts`): the request pipeline and the header writers.
 * - `@sluice/core/store` (`store.ts`): the `Store` contract, the key schema, the pure decision over
 *   JSON state — never the engine's typed-array layout.
 */
import { fileURLToPath } from "node:url";
import { entryExports } from "@sluice/testing/entries";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL(".", import.meta.url));
const [root, adapter, store] = entryExports([`${dir}index.ts`, `${dir}adapter.ts`, `${dir}store.ts`], `${dir}../tsconfig.json`);

const ROOT_VALUES = [
  "DEFAULT_DENY_CACHE_MAX_KEYS",
  "DEFAULT_HEADER_STYLES",
  "DEFAULT_RESERVE_MAX_AGE_MS",
  "DEFAULT_RESERVE_SHARE",
  "DEFAULT_TIMEOUT_MS",
  "MAX_KEY_LENGTH",
  "MAX_POLICIES",
  "MAX_QUOTA",
  "MemoryStore",
  "QUOTA_EXCEEDED_TITLE",
  "QUOTA_EXCEEDED_TYPE",
  "RateLimiter",
  "SluiceConfigError",
  "SluiceError",
  "SluiceInputError",
  "SluiceStoreError",
  "SluiceTimeoutError",
  "UNKNOWN_CLIENT_KEY",
  "addRateLimitHeaders",
  "clientIp",
  "concurrency",
  "createGuard",
  "fixedWindow",
  "leakyBucket",
  "limitedResponse",
  "normalizeIp",
  "quotaExceededProblem",
  "setRateLimitHeaders",
  "slidingLog",
  "slidingWindow",
  "toMs",
  "tokenBucket",
];
const ROOT_TYPES = [
  "BlockOption",
  "BlockSpec",
  "CallbackName",
  "ClientIpOptions",
  "ClientIpTrust",
  "ConcurrencyOptions",
  "ConcurrencyPolicy",
  "Decision",
  "DecisionInfo",
  "DecisionReason",
  "DenyCacheOption",
  "DenyCacheOptions",
  "Duration",
  "DurationUnit",
  "FixedWindowPolicy",
  "Guard",
  "GuardOptions",
  "GuardResult",
  "HeaderSink",
  "HeaderStyle",
  "HeadersOption",
  "LeakyBucketOptions",
  "LeakyBucketPolicy",
  "LimitOptions",
  "LimiterMode",
  "MemoryStoreOptions",
  "Override",
  "OverrideOptions",
  "PartitionKeyOption",
  "Policy",
  "PolicyKind",
  "PolicyResult",
  "QuotaExceededProblem",
  "RateLimiterOptions",
  "RefundOptions",
  "ReserveOption",
  "ReserveOptions",
  "SlidingLogPolicy",
  "SlidingWindowPolicy",
  "SluiceErrorCode",
  "SluiceOptionErrorOptions",
  "Store",
  "StoreErrorMode",
  "TierConfig",
  "TierSettings",
  "TokenBucketOptions",
  "TokenBucketPolicy",
  "WindowOptions",
];
const ADAPTER_VALUES = [
  "HEADER_FORMATTERS",
  "compileRateLimitHeaders",
  "createPipeline",
  "describeValue",
  "holdsLeases",
  "ietfPolicyHeader",
  "isPolicy",
  "mergeRateLimitHeaders",
  "partitionKeyOf",
  "resolveHeaderStyles",
];
const ADAPTER_TYPES = [
  "CallbackName",
  "Decision",
  "DecisionInfo",
  "HeaderFormatter",
  "HeaderList",
  "HeaderSink",
  "HeaderStyle",
  "HeaderWriter",
  "MaybePromise",
  "Outcome",
  "Pipeline",
  "PipelineCommonOptions",
  "PipelineLimiterOptions",
  "PipelineOptions",
  "PipelineTieredOptions",
  "Platform",
  "TierConfig",
  "TierSettings",
];
const STORE_VALUES = [
  "BLOCK_FIELD",
  "CONCURRENCY_RETRY_MS",
  "MAX_AHEAD_US",
  "MAX_CLOCK_SKEW_MS",
  "MAX_GCRA_SHIFT_US",
  "MAX_KEY_LENGTH",
  "MAX_POLICIES",
  "MAX_QUOTA",
  "OVERRIDE_FIELD",
  "POLICY_KINDS",
  "allowedFromState",
  "assertKey",
  "assertNamespace",
  "assertPrefixAndTier",
  "assertStoreCommand",
  "blockDurationMs",
  "blockField",
  "controlState",
  "decideState",
  "effectivePolicies",
  "encodeKeyPart",
  "isPolicyKind",
  "liveOverride",
  "maxQuota",
  "namespaceKey",
  "overrideField",
  "overrideFromText",
  "peekState",
  "policyData",
  "policyField",
  "policyFromData",
  "quotaOf",
  "refundState",
  "releaseState",
  "reserveState",
  "storageKey",
  "storeClockProblem",
  "storeResultProblem",
  "toDecision",
];
const STORE_TYPES = [
  "BoundStore",
  "ControlDecision",
  "ControlResult",
  "Decision",
  "DecisionReason",
  "MaybePromise",
  "Override",
  "Policy",
  "PolicyKind",
  "PolicyResult",
  "RefundCharge",
  "ReplyExpectations",
  "ReserveDecision",
  "ReserveResult",
  "StateDecision",
  "Store",
  "StoreCommand",
  "StoreNamespace",
  "StoreResult",
  "StoredState",
];

/** What no entry hands out: internals, and what left the root entry for good. */
const INTERNAL = [
  // the engine's typed-array layout (MemoryStore's, through a relative import inside core)
  "NUM_WIDTH",
  "OBJ_WIDTH",
  "layoutOf",
  "consumeAll",
  "peekAll",
  "refundAll",
  "releaseAll",
  "evaluate",
  "expiresAtUs",
  "ALGORITHMS",
  // validation and decision helpers used inside core only
  "validateClientIpOptions",
  "denyCacheMarginMs",
  "STORE_FAILURE_RETRY_MS",
  "formatMs",
  "MAX_DURATION_MS",
];

describe("@sluice/core's entries export exactly their lists", () => {
  it("@sluice/core: what an application calls", async () => {
    expect(Object.keys(await import("./index.js")).sort()).toEqual(ROOT_VALUES);
    expect(root).toEqual({ entry: `${dir}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });

  it("@sluice/core/adapter: the pipeline and the header writers", async () => {
    expect(Object.keys(await import("./adapter.js")).sort()).toEqual(ADAPTER_VALUES);
    expect(adapter).toEqual({ entry: `${dir}adapter.ts`, values: ADAPTER_VALUES, types: ADAPTER_TYPES });
  });

  it("@sluice/core/store: the contract, the key schema and the state functions", async () => {
    expect(Object.keys(await import("./store.js")).sort()).toEqual(STORE_VALUES);
    expect(store).toEqual({ entry: `${dir}store.ts`, values: STORE_VALUES, types: STORE_TYPES });
  });

  it("no entry hands out the engine's layout or core's internal helpers", () => {
    for (const entry of [root, adapter, store]) {
      for (const name of INTERNAL) expect([...(entry?.values ?? []), ...(entry?.types ?? [])], `${entry?.entry}: ${name}`).not.toContain(name);
    }
  });

  it("the package's exports map has these three entries, each pointing at its source", async () => {
    const manifest = (await import("../package.json", { with: { type: "json" } })).default as { exports: Record<string, unknown> };
    expect(Object.keys(manifest.exports)).toEqual([".", "./adapter", "./store", "./package.json"]);
    expect((manifest.exports["."] as Record<string, string>)["@sluice/source"]).toBe("./src/index.ts");
    expect((manifest.exports["./adapter"] as Record<string, string>)["@sluice/source"]).toBe("./src/adapter.ts");
    expect((manifest.exports["./store"] as Record<string, string>)["@sluice/source"]).toBe("./src/store.ts");
  });
});
