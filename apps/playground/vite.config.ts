import { defaultClientConditions, defineConfig } from "vite";

/**
 * The playground is a static page. `@sluice/core` resolves to its TypeScript sources through the
 * `@sluice/source` export condition, so neither `dev` nor `build` needs core built first.
 */
export default defineConfig({
  base: "./",
  resolve: { conditions: ["@sluice/source", ...defaultClientConditions] },
  build: { outDir: "dist", target: "es2022", emptyOutDir: true },
  preview: { host: "127.0.0.1" },
  server: { host: "127.0.0.1" },
});
