import { defineConfig } from "tsup";
import { sharedOptions } from "../../tsup.config.base.js";

export default defineConfig({
  ...sharedOptions,
  entry: ["src/index.ts"],
  // peer dependencies: resolved by the app's bundler, never inlined
  external: ["@sluice/core", "next", /^next\//],
});
