import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "next15-app",
    include: ["test/**/*.test.ts"],
    // one `next build` (about 35 s on 2 cores), then one `next start`
    testTimeout: 30_000,
    hookTimeout: 600_000,
  },
});
