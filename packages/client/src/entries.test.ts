/**
 * The export list of each entry of `@sluice/client`, pinned: what `import()` gives at run time and
 * the names that exist only as types (read from the source with the compiler). Changing an entry
 * means changing this file.
 */
import { fileURLToPath } from "node:url";
import { entryExports } from "@sluice/testing/entries";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL(".", import.meta.url));
const [root] = entryExports([`${dir}index.ts`], `${dir}../tsconfig.json`);

const ROOT_VALUES = ["parseRateLimit", "rateLimitedFetch"];
const ROOT_TYPES = [
  "FetchLike",
  "HeadersLike",
  "ParseRateLimitOptions",
  "RateLimitInfo",
  "RateLimitPolicy",
  "RateLimitStyle",
  "RateLimitedFetchOptions",
  "WaitInfo",
];

describe("@sluice/client's entries export exactly their lists", () => {
  it("@sluice/client", async () => {
    expect(Object.keys(await import("./index.js")).sort()).toEqual(ROOT_VALUES);
    expect(root).toEqual({ entry: `${dir}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });
});
