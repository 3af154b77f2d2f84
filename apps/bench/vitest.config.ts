import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // the smoke test starts a few child processes (TypeScript through tsx), hence the longer timeout
  test: { name: "bench", include: ["src/*.test.ts"], testTimeout: 120_000 },
});
