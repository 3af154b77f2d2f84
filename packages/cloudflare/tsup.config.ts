import { defineConfig } from "tsup";
import { sharedOptions } from "../../tsup.config.base.js";

export default defineConfig({
  ...sharedOptions,
  entry: ["src/index.ts", "src/testing.ts"],
  // the Workers runtime provides this module; @sluice/core is a peer dependency
  external: ["cloudflare:workers", "@sluice/core"],
});
