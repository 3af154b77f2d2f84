/**
 * @sluice/next on Next.js 15, for real: `next build` (Next.js 15's, from this app's node_modules),
 * then `next start` on a free port, and real HTTP requests — 200s, then the 429, with exact header
 * strings and the problem+json body — for the path guarded by middleware.ts (on the edge runtime,
 * Next.js 15's default for middleware) and for a route handler wrapped with withRateLimit
 * (Node.js runtime). Memory store: each entry point has its own.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type NextServer, countdown, get, nextBuild, nextStart, problem, rateLimitHeaders, requireBuilt, sequence } from "@sluice/testing/next-app";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const appDir = fileURLToPath(new URL("..", import.meta.url));

let server: NextServer | undefined;
let buildOutput = "";

beforeAll(async () => {
  requireBuilt(appDir, ["core", "next"]);
  const build = await nextBuild(appDir);
  buildOutput = build.output;
  console.info(`[sluice] next build (Next.js 15) took ${(build.ms / 1000).toFixed(1)} s`);
  // matched by the middleware but skipped: readiness costs no quota
  server = await nextStart(appDir, { readyPath: "/api/guarded/health" });
}, 600_000);

afterAll(async () => {
  await server?.stop();
}, 30_000);

const base = () => server?.base as string;

describe("Next.js 15", () => {
  it("is what built the app, with middleware.ts compiled for the edge runtime", () => {
    expect(buildOutput).toMatch(/Next\.js 15\.\d+\.\d+/);
    const manifest = JSON.parse(readFileSync(join(appDir, ".next/server/middleware-manifest.json"), "utf8")) as {
      middleware: Record<string, { files: string[]; matchers: { originalSource: string }[] }>;
    };
    // an edge function: Next.js lists it in the middleware manifest with the edge runtime's webpack chunk
    expect(manifest.middleware["/"]?.files).toContain("server/edge-runtime-webpack.js");
    expect(manifest.middleware["/"]?.matchers.map((m) => m.originalSource)).toEqual(["/api/guarded/:path*"]);
  });

  it("middleware.ts (rateLimitMiddleware, edge) guards /api/guarded/*: 3 allowed, then the problem+json 429, with exact headers", async () => {
    const seen = await sequence(base(), "/api/guarded/hello", "guarded", 4, 20_250);
    expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 429]);
    const policy = '"guarded";q=3;w=61';
    // the next token comes 20.25 s after the first request: t=21 there, then what the clock allows
    const t = countdown(seen, "guarded", 20_250);
    expect(seen.map(rateLimitHeaders)).toEqual([
      { "ratelimit-policy": policy, ratelimit: `"guarded";r=2;t=${t[0]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2" },
      { "ratelimit-policy": policy, ratelimit: `"guarded";r=1;t=${t[1]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "1" },
      { "ratelimit-policy": policy, ratelimit: `"guarded";r=0;t=${t[2]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0" },
      { "ratelimit-policy": policy, ratelimit: `"guarded";r=0;t=${t[3]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0", "retry-after": String(t[3]) },
    ]);
    // the route's own response, with the middleware's headers merged in
    expect(seen.slice(0, 3).map((s) => [s.headers["content-type"], s.body])).toEqual(Array(3).fill(["application/json", JSON.stringify({ route: "guarded", next: 15 })]));
    expect(seen[3]?.headers["content-type"]).toBe("application/problem+json");
    expect(seen[3]?.body).toBe(problem("guarded", t[3] as number));
    // another key has its own quota
    expect((await get(base(), "/api/guarded/hello", "guarded-other")).status).toBe(200);
  });

  it("a matched path that skip() excludes is never limited; paths outside the matcher never reach the middleware", async () => {
    for (let i = 0; i < 5; i++) {
      const health = await get(base(), "/api/guarded/health", "health");
      expect(health.status).toBe(200);
      expect(rateLimitHeaders(health)).toEqual({});
    }
    const page = await get(base(), "/", "page");
    expect(page.status).toBe(200);
    expect(page.body).toContain("Sluice on Next.js 15");
    expect(rateLimitHeaders(page)).toEqual({});
  });

  it("withRateLimit on a Node.js route handler: 2 allowed, then the 429; the handler gets its decision", async () => {
    const seen = await sequence(base(), "/api/wrapped", "wrapped", 3, 30_250);
    expect(seen.map((s) => s.status)).toEqual([200, 200, 429]);
    const policy = '"burst";q=2;w=61';
    const t = countdown(seen, "burst", 30_250);
    expect(seen.map(rateLimitHeaders)).toEqual([
      { "ratelimit-policy": policy, ratelimit: `"burst";r=1;t=${t[0]}`, "x-ratelimit-limit": "2", "x-ratelimit-remaining": "1" },
      { "ratelimit-policy": policy, ratelimit: `"burst";r=0;t=${t[1]}`, "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0" },
      { "ratelimit-policy": policy, ratelimit: `"burst";r=0;t=${t[2]}`, "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0", "retry-after": String(t[2]) },
    ]);
    expect(seen.slice(0, 2).map((s) => s.body)).toEqual([1, 0].map((remaining) => JSON.stringify({ route: "wrapped", path: "/api/wrapped", remaining })));
    expect(seen[2]?.headers["content-type"]).toBe("application/problem+json");
    expect(seen[2]?.body).toBe(problem("burst", t[2] as number));
  });
});
