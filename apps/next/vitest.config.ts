import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: {
    name: "next-app",
    include: ["test/**/*.test.ts"],
    // one `next build` (about 35 s on 2 cores), then two `next start`s
    testTimeout: 30_000,
    hookTimeout: 600_000,
  },
});
