import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // the unit-test lane: one worker thread that shares the modules between this project's files
  // (threads, not isolated: see the root vitest.config.ts)
  test: { name: "core", include: ["src/**/*.test.ts"], pool: "threads" },
});
