import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // real servers and real clocks: a few tests wait seconds for the limiters' windows
  test: { name: "client", include: ["src/**/*.test.ts"], testTimeout: 30_000, hookTimeout: 30_000 },
});
