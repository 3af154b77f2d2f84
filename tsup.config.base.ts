/**
 * The build options every published package shares: ESM and CommonJS with type declarations for
 * both, source maps, ES2022, platform-neutral output (no Node built-ins assumed: the packages run in
 * Workers and edge runtimes too), tree-shaken. Each `packages/<name>/tsup.config.ts` spreads these
 * and adds only its entry points and the modules it must leave external.
 *
 * @example
 * ```ts
 * import { defineConfig } from "tsup";
 * import { sharedOptions } from "../../tsup.config.base.js";
 *
 * export default defineConfig({ ...sharedOptions, entry: ["src/index.ts"] });
 * ```
 *
 * @module
 */
import type { Options } from "tsup";

export const sharedOptions = {
  format: ["esm", "cjs"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  platform: "neutral",
  treeshake: true,
} as const satisfies Options;
