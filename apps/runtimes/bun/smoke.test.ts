/**
 * The smoke suite under Bun's own test runner: `bun test ./bun/smoke.test.ts` (the harness passes
 * the Upstash bridge's address; see ../README.md). Every case of ../src/suite.ts, plus serving
 * through `Bun.serve`.
 */
import { test } from "bun:test";
import { type Served, smokeCases } from "../src/suite.ts";

async function serve(fetch: (request: Request) => Response | Promise<Response>): Promise<Served> {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch });
  return {
    url: `http://127.0.0.1:${server.port}`,
    close: () => server.stop(true),
  };
}

for (const c of smokeCases({ name: "bun", serve, env: (name) => process.env[name] })) {
  test(c.name, () => c.run(), 30_000);
}
