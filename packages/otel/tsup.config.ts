import { defineConfig } from "tsup";
import { sharedOptions } from "../../tsup.config.base.js";

export default defineConfig({
  ...sharedOptions,
  entry: ["src/index.ts"],
});
