import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // test/: the middleware in workerd (Miniflare)
  // the unit-test lane: one worker thread that shares the modules between this project's files
  // (threads, not isolated: see the root vitest.config.ts)
  test: { name: "hono", include: ["src/**/*.test.ts", "test/**/*.test.ts"], hookTimeout: 60_000, pool: "threads" },
});
