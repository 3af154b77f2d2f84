/**
 * The export list of each entry of `@sluice/otel`, pinned: what `import()` gives at run time and
 * the names that exist only as types (read from the source with the compiler). Changing an entry
 * means changing this file.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { entryExports } from "@sluice/testing/entries";

const dir = fileURLToPath(new URL(".", import.meta.url));
const [root] = entryExports([`${dir}index.ts`], `${dir}../tsconfig.json`);

const ROOT_VALUES = [
  "ATTR_ERROR_TYPE",
  "ATTR_SLUICE_ALLOWED",
  "ATTR_SLUICE_COST",
  "ATTR_SLUICE_DRY_RUN",
  "ATTR_SLUICE_OPERATION",
  "ATTR_SLUICE_POLICY",
  "ATTR_SLUICE_PREFIX",
  "ATTR_SLUICE_REASON",
  "ATTR_SLUICE_REMAINING",
  "ATTR_SLUICE_STORE",
  "ATTR_SLUICE_TIER",
  "INSTRUMENTATION_SCOPE",
  "INSTRUMENTATION_VERSION",
  "METRIC_SLUICE_DECISIONS",
  "METRIC_SLUICE_STORE_DURATION",
  "STORE_DURATION_BUCKETS",
  "errorType",
  "instrumentDecisions",
  "instrumentStore",
];
const ROOT_TYPES = ["InstrumentDecisionsOptions", "InstrumentStoreOptions", "OnDecision"];

describe("@sluice/otel's entries export exactly their lists", () => {
  it("@sluice/otel", async () => {
    expect(Object.keys(await import("./index.js")).sort()).toEqual(ROOT_VALUES);
    expect(root).toEqual({ entry: `${dir}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });
});
