import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // the Redis and Upstash tests start their own redis-server (and the REST bridge in front of it)
  test: { name: "otel", include: ["src/**/*.test.ts"], testTimeout: 30_000, hookTimeout: 30_000 },
});
