/**
 * The Cloudflare Workers quick start from the packed tarballs in a new project outside the
 * repository: `pnpm exec wrangler dev` with the wrangler the install line pins (4.86.0, the last
 * for Node.js 20), the Durable Object local in workerd, driven to its 429 and stopped with its
 * process group. The test adds `--ip`, `--port` and `--inspector-port` (free ports: other test
 * files run at the same time) and turns wrangler's metrics and update check off.
 */
import { freePort } from "@sluice/testing/redis-server";
import { describe, expect, it } from "vitest";
import { expectRetryAfter } from "../src/expectations.js";
import { type Seen, createProject, problemOf, requests, startServer, useWorkspace } from "../src/harness.js";

const workspace = useWorkspace();

describe("workers: withRateLimit and the SluiceLimiter Durable Object", () => {
  it("wrangler dev serves five requests from the burst, then the 429; stopping it leaves no process", async () => {
    const project = await createProject(workspace(), "workers", ["workers"]);
    const [port, inspectorPort] = [await freePort(), await freePort()];
    const env = {
      ...workspace().env,
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_SEND_ERROR_REPORTS: "false",
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      WRANGLER_HIDE_BANNER: "true",
      XDG_CONFIG_HOME: `${workspace().dir}/wrangler-config`,
    };
    const server = await startServer(project, "workers", env, {
      extraArgs: ["--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort)],
      ready: (output) => (new RegExp(`Ready on http://127\\.0\\.0\\.1:${port}`).test(output) ? `http://127.0.0.1:${port}` : undefined),
    });
    try {
      const seen = await requests(`${server.base}/`, 6);
      expect(seen.map((s) => s.status), server.output()).toEqual([200, 200, 200, 200, 200, 429]);
      expect(seen.slice(0, 5).map((s) => JSON.parse(s.body))).toEqual([4, 3, 2, 1, 0].map((remaining) => ({ hello: "world", remaining })));
      const limited = seen[5] as Seen;
      expect(problemOf(limited)["violated-policies"]).toEqual(["burst"]);
      expect(limited.headers["ratelimit-policy"]).toBe('"burst";q=5;w=300, "per-hour";q=60;w=3600');
      expect(limited.headers.ratelimit).toMatch(/^"burst";r=0;t=\d+, "per-hour";r=55;t=\d+$/);
      expectRetryAfter(limited, 1, 60);
      // another client address (CF-Connecting-IP, which wrangler sets from the socket otherwise) has its own quota
      const other = await requests(`${server.base}/`, 1, { "cf-connecting-ip": "198.51.100.20" });
      expect(other.map((s) => [s.status, JSON.parse(s.body)])).toEqual([[200, { hello: "world", remaining: 4 }]]);
      expect(server.output()).toMatch(/env\.SLUICE \(SluiceLimiter\)\s+Durable Object\s+local/);
    } finally {
      await server.stop();
    }
  });
});
