import { defineConfig } from "tsup";
import { sharedOptions } from "../../tsup.config.base.js";

export default defineConfig({
  ...sharedOptions,
  entry: ["src/index.ts", "src/testing.ts"],
  // a peer dependency: the application's copy, never inlined
  external: ["@sluice/core"],
});
