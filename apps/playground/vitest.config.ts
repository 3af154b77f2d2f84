import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // the browser test builds the page with Vite and drives headless Chromium: bounded at 60 s
  test: { name: "playground", include: ["test/**/*.test.ts"], testTimeout: 60_000, hookTimeout: 60_000 },
});
