/**
 * What the site needs before VitePress builds or serves it, all generated (none of it committed):
 *
 * - `api/`: the API reference, TypeDoc over every published entry point (scripts/api.ts);
 * - `public/playground-app/`: the playground (apps/playground) built by Vite, which the playground
 *   page embeds.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { generateApi } from "./api.js";

const docsDir = fileURLToPath(new URL("..", import.meta.url));
const playgroundDir = join(docsDir, "..", "playground");

const started = performance.now();
const { modules, warnings } = await generateApi();
console.log(`[docs] API reference: ${modules.join(", ")} (${warnings.length} TypeDoc warnings)`);

await build({
  root: playgroundDir,
  configFile: join(playgroundDir, "vite.config.ts"),
  logLevel: "warn",
  build: { outDir: join(docsDir, "public", "playground-app"), emptyOutDir: true },
});
console.log(`[docs] playground built into public/playground-app (${Math.round(performance.now() - started)} ms in all)`);
