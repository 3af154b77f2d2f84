import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "redis",
    include: ["src/**/*.test.ts"],
    // one private redis-server (and an Upstash bridge in front of it) for the project
    globalSetup: ["@sluice/testing/redis-global-setup"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
