/**
 * A Vitest `globalSetup` module: one private redis-server and one Upstash bridge in front of it for
 * a whole test project, handed to the test files through `inject()`.
 *
 * Tests that stop, pause or restart Redis, or that read the bridge's request counters, start their
 * own with {@link startRedisServer} / {@link startUpstashBridge} instead: the shared ones live in
 * the main Vitest process.
 *
 * @example
 * ```ts
 * // vitest.config.ts
 * export default defineProject({
 *   test: { globalSetup: ["@sluice/testing/redis-global-setup"] },
 * });
 * // some.test.ts
 * import { inject } from "vitest";
 * const client = await createClient({ url: inject("sluiceRedisUrl") }).connect();
 * const redis = new Redis({ url: inject("sluiceUpstashUrl"), token: inject("sluiceUpstashToken") });
 * ```
 *
 * @module
 */
import { startRedisServer } from "./redis-server.js";
import { startUpstashBridge } from "./upstash-bridge.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** `redis://127.0.0.1:<port>` of the project's private redis-server. */
    sluiceRedisUrl: string;
    /** `http://127.0.0.1:<port>` of the Upstash bridge in front of it. */
    sluiceUpstashUrl: string;
    /** The bridge's bearer token. */
    sluiceUpstashToken: string;
  }
}

/** The part of Vitest's `TestProject` this setup uses. */
export interface ProvideTarget {
  provide(key: "sluiceRedisUrl" | "sluiceUpstashUrl" | "sluiceUpstashToken", value: string): void;
}

/**
 * Starts the shared redis-server and bridge, provides their addresses, and returns the teardown
 * that stops both.
 */
export default async function setup(project: ProvideTarget): Promise<() => Promise<void>> {
  const server = await startRedisServer();
  let bridge;
  try {
    bridge = await startUpstashBridge({ redisUrl: server.url });
  } catch (error) {
    await server.stop();
    throw error;
  }
  project.provide("sluiceRedisUrl", server.url);
  project.provide("sluiceUpstashUrl", bridge.url);
  project.provide("sluiceUpstashToken", bridge.token);
  return async () => {
    await bridge.close();
    await server.stop();
  };
}
