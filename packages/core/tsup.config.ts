import { defineConfig } from "tsup";
import { sharedOptions } from "../../tsup.config.base.js";

export default defineConfig({
  ...sharedOptions,
  entry: ["src/index.ts", "src/adapter.ts", "src/store.ts"],
  // shared chunks in the CommonJS build too: one copy of each class (RateLimiter, the errors) for
  // all three entries, so `instanceof` holds across them
  splitting: true,
});
