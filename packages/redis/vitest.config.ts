import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "redis",
    // the unit-test lane (see the root vitest.config.ts): its files run one after another in one
    // worker thread beside the forks, sharing the modules they import; each starts and stops its
    // own servers, and most of its time is spent waiting on them
    pool: "threads",
    include: ["src/**/*.test.ts"],
    // one private redis-server (and an Upstash bridge in front of it) for the project
    globalSetup: ["../testing/src/redis-global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
