import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts", "src/testing.ts"],
  format: ["esm", "cjs"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  platform: "neutral",
  treeshake: true,
  // the Workers runtime provides this module; @sluice/core is a peer dependency
  external: ["cloudflare:workers", "@sluice/core"],
});
