import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // test/: the middleware in workerd (Miniflare)
  test: { name: "hono", include: ["src/**/*.test.ts", "test/**/*.test.ts"], hookTimeout: 60_000 },
});
