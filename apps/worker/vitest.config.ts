import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "worker-app",
    // Node-side: starts the Worker in workerd through Miniflare and sends it real HTTP requests
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
