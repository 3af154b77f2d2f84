import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: { name: "testing", pool: "threads", include: ["src/**/*.test.ts"] },
});
