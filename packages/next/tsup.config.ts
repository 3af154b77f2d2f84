import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  platform: "neutral",
  treeshake: true,
  // peer dependencies: resolved by the app's bundler, never inlined
  external: ["@sluice/core", "next", /^next\//],
});
