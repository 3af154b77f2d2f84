/**
 * The Next.js quick starts from the packed tarballs in new projects outside the repository, run
 * with `next dev` as a reader runs them (production builds of the same packages are the apps/next
 * and apps/next15 tests): Next 16 with a wrapped route handler; Next 15 (TypeScript 5.9.3 named in
 * its install line) with middleware.ts on the edge runtime; and the Vercel edge page, which turns
 * that Next 15 project's middleware to Upstash (against `pnpm upstash:local`).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "@sluice/testing/redis-server";
import { describe, expect, it } from "vitest";
import { expectRetryAfter } from "../src/expectations.js";
import { type Seen, addQuickStart, createProject, keysOf, problemOf, requests, startServer, startUpstashLocalCommand, useWorkspace } from "../src/harness.js";

const workspace = useWorkspace();

/** `next dev` on a free port (Next.js reads PORT), ready once it says so. */
async function nextDev(project: string, id: "next16" | "next15" | "vercel-edge") {
  const port = await freePort();
  return startServer(project, id, { ...workspace().env, PORT: String(port) }, {
    ready: (output) => (/Ready in/.test(output) ? `http://127.0.0.1:${port}` : undefined),
  });
}

/** Five 200s (with `body(remaining)`), then the 429 of the "per-minute" policy, 5 per minute. */
function expectFiveThen429(seen: Seen[], body: (remaining: number) => unknown, output: string): void {
  expect(seen.map((s) => s.status), output).toEqual([200, 200, 200, 200, 200, 429]);
  expect(seen.slice(0, 5).map((s) => JSON.parse(s.body))).toEqual([4, 3, 2, 1, 0].map(body));
  expect(seen.slice(0, 5).map((s) => s.headers["x-ratelimit-remaining"])).toEqual(["4", "3", "2", "1", "0"]);
  const limited = seen[5] as Seen;
  expect(problemOf(limited)["violated-policies"]).toEqual(["per-minute"]);
  expect(limited.headers["ratelimit-policy"]).toBe('"per-minute";q=5;w=60');
  expect(limited.headers.ratelimit).toMatch(/^"per-minute";r=0;t=\d+$/);
  expectRetryAfter(limited, 1, 72);
}

describe("next16: a route handler wrapped with withRateLimit", () => {
  it("next dev serves five requests, then the 429", async () => {
    const project = await createProject(workspace(), "next16", ["next16"]);
    const server = await nextDev(project, "next16");
    try {
      const seen = await requests(`${server.base}/api/hello`, 6, { "x-api-key": "quick-start" });
      expectFiveThen429(seen, (remaining) => ({ hello: "world", remaining }), server.output());
      expect(server.output()).toContain("Next.js 16.4.6");
    } finally {
      await server.stop();
    }
  });
});

describe("next15, then vercel-edge: middleware.ts on the edge runtime", () => {
  let project: string;

  it("next15: next dev with TypeScript 5.9.3, the middleware lets five through to the route, then the 429", async () => {
    project = await createProject(workspace(), "next15", ["next15"]);
    const server = await nextDev(project, "next15");
    try {
      const seen = await requests(`${server.base}/api/hello`, 6, { "x-api-key": "quick-start" });
      expectFiveThen429(seen, () => ({ hello: "world" }), server.output());
      expect(server.output()).toContain("Next.js 15.5.29");
    } finally {
      await server.stop();
    }
  });

  it("vercel-edge: the same project with UpstashStore in the middleware counts in Upstash, per client address", async () => {
    expect(project, "the next15 project").toBeDefined();
    await addQuickStart(workspace(), project, "vercel-edge");
    const local = await startUpstashLocalCommand();
    try {
      // the reader pastes the printed lines into .env.local
      writeFileSync(join(project, ".env.local"), `${local.envLines.join("\n")}\n`);
      const server = await nextDev(project, "vercel-edge");
      try {
        const seen = await requests(`${server.base}/api/hello`, 6, { "x-vercel-forwarded-for": "203.0.113.7" });
        expectFiveThen429(seen, () => ({ hello: "world" }), server.output());
        const other = await requests(`${server.base}/api/hello`, 1, { "x-vercel-forwarded-for": "203.0.113.8" });
        expect(other.map((s) => [s.status, s.headers["x-ratelimit-remaining"]])).toEqual([[200, "4"]]);
      } finally {
        await server.stop();
      }
      expect(await keysOf(local.vars.REDIS_URL as string)).toEqual([expect.stringMatching(/203\.0\.113\.7/), expect.stringMatching(/203\.0\.113\.8/)]);
    } finally {
      await local.stop("SIGINT");
    }
  });
});
