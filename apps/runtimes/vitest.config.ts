import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

// The suite itself runs under Bun and Deno against the built packages; this project only spawns
// them (test/runtimes.test.ts). `pnpm run build` must have run first (`pnpm test` does).
export default defineProject({
  ...sourceConditions,
  test: { name: "runtimes", include: ["test/**/*.test.ts"], testTimeout: 180_000, hookTimeout: 60_000 },
});
