/**
 * The export list of each entry of `@sluice/redis`, pinned: what `import()` gives at run time and
 * the names that exist only as types (read from the source with the compiler). Changing an entry
 * means changing this file.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { entryExports } from "@sluice/testing/entries";

const dir = fileURLToPath(new URL(".", import.meta.url));
const [root, testing] = entryExports([`${dir}index.ts`, `${dir}testing.ts`], `${dir}../tsconfig.json`);

const ROOT_VALUES = ["RedisStore", "UpstashStore"];
const ROOT_TYPES = ["IORedisLike", "NodeRedisLike", "RedisClientLike", "RedisClock", "ScriptStoreOptions", "UpstashRedisLike"];
const TESTING_VALUES = ["createTestRedisStore", "createTestUpstashStore"];
const TESTING_TYPES: string[] = [];

describe("@sluice/redis's entries export exactly their lists", () => {
  it("@sluice/redis", async () => {
    expect(Object.keys(await import("./index.js")).sort()).toEqual(ROOT_VALUES);
    expect(root).toEqual({ entry: `${dir}index.ts`, values: ROOT_VALUES, types: ROOT_TYPES });
  });

  it("@sluice/redis/testing", async () => {
    expect(Object.keys(await import("./testing.js")).sort()).toEqual(TESTING_VALUES);
    expect(testing).toEqual({ entry: `${dir}testing.ts`, values: TESTING_VALUES, types: TESTING_TYPES });
  });
});
