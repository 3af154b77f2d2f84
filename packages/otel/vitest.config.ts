import { defineProject } from "vitest/config";
import { sourceConditions } from "../../vitest.shared.js";

export default defineProject({
  ...sourceConditions,
  // the Redis and Upstash tests start their own redis-server (and the REST bridge in front of it);
  // test/: the Durable Object store and the Workers adapter in workerd (Miniflare)
  // the unit-test lane: one worker thread that shares the modules between this project's files
  // (threads, not isolated: see the root vitest.config.ts)
  test: { name: "otel", include: ["src/**/*.test.ts", "test/**/*.test.ts"], testTimeout: 30_000, hookTimeout: 60_000, pool: "threads" },
});
