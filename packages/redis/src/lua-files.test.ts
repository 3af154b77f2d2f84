import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { LUA_FILES, renderLuaFile } from "../test/lua-files.js";

// The committed scripts under packages/redis/lua/ are what the generator produces today. If this
// fails after a change to src/scripts.ts or src/algorithms/, review the diff and run
// `pnpm --filter @sluice/redis gen:lua`.
describe("committed Lua (packages/redis/lua)", () => {
  it.each(LUA_FILES.map((entry) => [entry.file, entry] as const))("%s matches the generator", (file, entry) => {
    const committed = readFileSync(new URL(`../lua/${file}`, import.meta.url), "utf8");
    expect(committed, `lua/${file} is stale: run \`pnpm --filter @sluice/redis gen:lua\``).toBe(renderLuaFile(entry));
  });

  it("covers one limit, a three-limit tier, a sliding log, a concurrency cap with a rate limit, a leaky bucket's queue and a penalty box", () => {
    const kinds = LUA_FILES.map((entry) => entry.policies().map((p) => p.kind));
    expect(kinds).toEqual([
      ["tokenBucket"],
      ["slidingWindow", "fixedWindow", "tokenBucket"],
      ["slidingLog"],
      ["concurrency", "fixedWindow"],
      ["leakyBucket"],
      ["fixedWindow"],
    ]);
    const [shaper] = LUA_FILES[4]!.policies();
    expect(shaper).toMatchObject({ kind: "leakyBucket", queue: 3 });
    expect(LUA_FILES.map((entry) => entry.policies().some((p) => p.block !== undefined))).toEqual([false, false, false, false, false, true]);
    // the samples show the branches they are there for
    const text = (file: string) => renderLuaFile(LUA_FILES.find((entry) => entry.file === file)!);
    expect(text("leaky-bucket-queue.lua")).toContain("-- within the queue: no unit left, served after a delay");
    expect(text("penalty-box.lua")).toContain("its penalty box starts, longer for a repeat");
    expect(text("one-limit.lua")).not.toContain("within the queue");
    expect(text("one-limit.lua")).not.toContain("its penalty box starts");
  });
});
