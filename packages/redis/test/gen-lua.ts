/** Rewrites `packages/redis/lua/*.lua` from the generator: `pnpm --filter @sluice/redis gen:lua`. */
import { writeFileSync } from "node:fs";
import { LUA_FILES, renderLuaFile } from "./lua-files.js";

for (const entry of LUA_FILES) {
  const url = new URL(`../lua/${entry.file}`, import.meta.url);
  writeFileSync(url, renderLuaFile(entry));
  console.log(`wrote lua/${entry.file}`);
}
