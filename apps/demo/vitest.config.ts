import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  test: { name: "demo", include: ["src/**/*.test.ts", "test/**/*.test.ts"], testTimeout: 20_000, hookTimeout: 20_000 },
});
