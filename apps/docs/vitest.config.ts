import { defineProject } from "vitest/config";

export default defineProject({
  // builds the whole site (TypeDoc, the playground, VitePress), checks its links, then drives it in
  // headless Chromium: one file, so the build is made once
  test: { name: "docs", include: ["test/**/*.test.ts"], testTimeout: 60_000, hookTimeout: 240_000 },
});
