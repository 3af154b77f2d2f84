import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "quickstarts",
    include: ["test/**/*.test.ts"],
    // the public packages packed once per run (built by `pnpm test` before)
    globalSetup: ["./src/global-setup.ts"],
    // each quick start: a pnpm install from the store, then a server or script driven to its 429
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
