import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "repo-checks",
    include: ["test/**/*.test.ts"],
    // whole TypeScript programs over every README's code, and the runnable snippets as processes
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
