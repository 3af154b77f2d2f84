import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // real servers and real clocks: a few tests wait seconds for the limiters' windows. In the
  // unit-test lane: one worker thread that shares the modules between this project's files
  // (threads, not isolated: see the root vitest.config.ts)
  test: { name: "client", include: ["src/**/*.test.ts"], testTimeout: 30_000, hookTimeout: 30_000, pool: "threads" },
});
