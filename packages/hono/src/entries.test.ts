/**
 * The export list of each entry of `@sluice/hono`, pinned: what `import()` gives at run time and
 * the names that exist only as types (read from the source with the compiler). Changing an entry
 * means changing this file.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { entryExports } from "@sluice/testing/entries";

const dir = fileURLToPath(new URL(".", import.meta.url));
const [root] = entryExports([`${dir}index.ts`], `${dir}../tsconfig.json`);

const ROOT_VALUES = ["UNKNOWN_CLIENT_KEY", "rateLimiter"];
const ROOT_TYPES = ["Decision", "HonoRateLimiterOptions", "RateLimitVariables", "RateLimiterCommonOptions", "RateLimiterLimiterOptions", "RateLimiterTieredOptions"];

describe("@sluice/hono's entries export exactly their lists", () => {
  it("@sluice/hono", async () => {
    expect(Object.keys(await import("./index.js")).sort()).toEqual(ROOT_VALUES);
    expect(root).toEqual({ entry: `${dir}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });
});
