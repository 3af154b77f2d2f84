import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { LUA_FILES, renderLuaFile } from "../test/lua-files.js";

// The committed scripts under packages/redis/lua/ are what the generator produces today. If this
// fails after a change to src/scripts.ts, review the diff and run `pnpm --filter @sluice/redis gen:lua`.
describe("committed Lua (packages/redis/lua)", () => {
  it.each(LUA_FILES.map((entry) => [entry.file, entry] as const))("%s matches the generator", (file, entry) => {
    const committed = readFileSync(new URL(`../lua/${file}`, import.meta.url), "utf8");
    expect(committed, `lua/${file} is stale: run \`pnpm --filter @sluice/redis gen:lua\``).toBe(renderLuaFile(entry));
  });

  it("covers one limit, a three-limit tier, a sliding log and a concurrency cap with a rate limit", () => {
    const kinds = LUA_FILES.map((entry) => entry.policies().map((p) => p.kind));
    expect(kinds).toEqual([["tokenBucket"], ["slidingWindow", "fixedWindow", "tokenBucket"], ["slidingLog"], ["concurrency", "fixedWindow"]]);
  });
});
