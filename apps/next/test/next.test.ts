/**
 * The app for real: `next build` once, then `next start` twice on a free port — with the memory
 * store, then with `UpstashStore` against a private redis-server behind the Upstash REST bridge
 * (the store is picked from the environment at run time, so one build serves both) — and real
 * HTTP requests: 200s, then the 429, with exact header strings and the problem+json body, for the
 * path guarded by proxy.ts (Node.js runtime), a wrapped Node.js route handler and a wrapped edge
 * route handler.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { RateLimiter, leakyBucket, tokenBucket } from "@sluice/core";
import { UpstashStore } from "@sluice/redis";
import { type RedisServer, freePort, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const appDir = fileURLToPath(new URL("..", import.meta.url));
const nextBin = createRequire(join(appDir, "package.json")).resolve("next/dist/bin/next");

/** Next.js resolves the workspace packages to their dist: they must be built. */
const DIST = ["core", "next", "redis"].map((name) => [`@sluice/${name}`, join(appDir, `../../packages/${name}/dist/index.js`)] as const);

function requireBuilt(): void {
  const missing = DIST.filter(([, file]) => !existsSync(file));
  if (missing.length > 0) {
    throw new Error(
      `[sluice] apps/next resolves the workspace packages to their built dist, and ${missing.map(([name]) => name).join(", ")} ` +
        `${missing.length === 1 ? "is" : "are"} not built. Run \`pnpm run build\` at the repository root first (\`pnpm test\` does).`,
    );
  }
}

/** The environment of `next build` / `next start`: no Upstash unless asked, no test NODE_ENV. */
function nextEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // vitest sets NODE_ENV=test; next build and next start set their own
  const dropped = new Set(["NODE_ENV", ...(extra.UPSTASH_REDIS_REST_URL === undefined ? ["UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN"] : [])]);
  const inherited = Object.entries(process.env).filter(([name]) => !dropped.has(name));
  // (Next.js's types declare NODE_ENV on ProcessEnv as required; this environment has none on purpose)
  return { ...Object.fromEntries(inherited), NEXT_TELEMETRY_DISABLED: "1", ...extra } as unknown as NodeJS.ProcessEnv;
}

/** Every `next` process started here, killed (with its group) if the test process exits first. */
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

function spawnNext(args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  // its own process group, so that stopping it stops whatever it forked
  const child = spawn(process.execPath, [nextBin, ...args], { cwd: appDir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let output = "";
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<number | null>((resolve) => {
    child.once("close", (code) => {
      children.delete(child);
      resolve(code);
    });
  });
  return { child, output: () => output, exited };
}

async function nextBuild(): Promise<number> {
  const startedAt = performance.now();
  const build = spawnNext(["build"], nextEnv());
  const code = await build.exited;
  if (code !== 0) throw new Error(`[sluice] next build exited with ${code}:\n${build.output()}`);
  return performance.now() - startedAt;
}

interface NextServer {
  base: string;
  stop(): Promise<void>;
}

async function nextStart(extraEnv: Record<string, string> = {}): Promise<NextServer> {
  const port = await freePort();
  const server = spawnNext(["start", "--port", String(port), "--hostname", "127.0.0.1"], nextEnv(extraEnv));
  const base = `http://127.0.0.1:${port}`;
  let exitCode: number | null | undefined;
  void server.exited.then((code) => {
    exitCode = code;
  });
  const stop = async () => {
    if (exitCode !== undefined || server.child.pid === undefined) return;
    process.kill(-server.child.pid, "SIGTERM");
    const timer = setTimeout(() => {
      try {
        process.kill(-(server.child.pid as number), "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }, 5_000);
    await server.exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`[sluice] next start exited with ${exitCode}:\n${server.output()}`);
    try {
      // matched by the proxy but skipped: readiness costs no quota
      if ((await fetch(`${base}/api/guarded/health`)).status === 200) return { base, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`[sluice] next start did not answer within 60 s:\n${server.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Seen {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function get(base: string, path: string, apiKey: string): Promise<Seen> {
  const response = await fetch(`${base}${path}`, { headers: { "x-api-key": apiKey } });
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

const RATE_LIMIT_HEADERS = ["ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "retry-after"];

function rateLimitHeaders(seen: Seen): Record<string, string> {
  return Object.fromEntries(Object.entries(seen.headers).filter(([name]) => RATE_LIMIT_HEADERS.includes(name)));
}

function problem(policy: string, retryAfterSeconds: number): string {
  return JSON.stringify({
    type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: 429,
    detail: `Quota of policy "${policy}" exceeded; retry after ${retryAfterSeconds} seconds.`,
    retryAfter: retryAfterSeconds,
    "violated-policies": [policy],
  });
}

/**
 * Sends `count` requests with one fresh key (after one warm-up request with another key, so the
 * route is loaded and the sequence runs within a few ms) and checks X-RateLimit-Reset against the
 * binding policy's period: the i-th request's reset is i periods after the first one's `now`.
 */
async function sequence(base: string, path: string, apiKey: string, count: number, periodMs: number): Promise<Seen[]> {
  await get(base, path, `${apiKey}-warm-up`);
  const startMs = Date.now();
  const out: Seen[] = [];
  for (let i = 0; i < count; i++) out.push(await get(base, path, apiKey));
  const endMs = Date.now();
  out.forEach((seen, index) => {
    const units = Math.min(index + 1, count - 1);
    const reset = Number(seen.headers["x-ratelimit-reset"]);
    expect(reset).toBeGreaterThanOrEqual(Math.ceil((startMs + units * periodMs) / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil((endMs + units * periodMs) / 1000));
  });
  return out;
}

let buildMs = 0;

beforeAll(async () => {
  requireBuilt();
  buildMs = await nextBuild();
  console.info(`[sluice] next build took ${(buildMs / 1000).toFixed(1)} s`);
}, 600_000);

for (const store of ["memory", "upstash"] as const) {
  describe(`next start with the ${store} store`, () => {
    let server: NextServer | undefined;
    let redisServer: RedisServer | undefined;
    let bridge: UpstashBridge | undefined;

    beforeAll(async () => {
      if (store === "upstash") {
        redisServer = await startRedisServer();
        bridge = await startUpstashBridge({ redisUrl: redisServer.url });
        server = await nextStart({ UPSTASH_REDIS_REST_URL: bridge.url, UPSTASH_REDIS_REST_TOKEN: bridge.token });
      } else {
        server = await nextStart();
      }
    }, 120_000);

    afterAll(async () => {
      await server?.stop();
      await bridge?.close();
      await redisServer?.stop();
    }, 30_000);

    const base = () => server?.base as string;

    it("proxy.ts guards /api/guarded/*: 3 allowed, then the problem+json 429, with exact headers", async () => {
      const seen = await sequence(base(), "/api/guarded/hello", `guarded-${store}`, 4, 20_250);
      expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 429]);
      const policy = '"guarded";q=3;w=61';
      expect(seen.map(rateLimitHeaders)).toEqual([
        { "ratelimit-policy": policy, ratelimit: '"guarded";r=2;t=21', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2" },
        { "ratelimit-policy": policy, ratelimit: '"guarded";r=1;t=21', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "1" },
        { "ratelimit-policy": policy, ratelimit: '"guarded";r=0;t=21', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0" },
        {
          "ratelimit-policy": policy,
          ratelimit: '"guarded";r=0;t=21',
          "x-ratelimit-limit": "3",
          "x-ratelimit-remaining": "0",
          "retry-after": "21",
        },
      ]);
      // the route's own response, with the proxy's headers merged in
      expect(seen.slice(0, 3).map((s) => [s.headers["content-type"], s.body])).toEqual(
        Array(3).fill(["application/json", JSON.stringify({ route: "guarded", store })]),
      );
      expect(seen[3]?.headers["content-type"]).toBe("application/problem+json");
      expect(seen[3]?.body).toBe(problem("guarded", 21));
      // another key has its own quota
      expect((await get(base(), "/api/guarded/hello", `guarded-${store}-other`)).status).toBe(200);
    });

    it("a matched path that skip() excludes is never limited and gets no headers", async () => {
      for (let i = 0; i < 5; i++) {
        const seen = await get(base(), "/api/guarded/health", `health-${store}`);
        expect(seen.status).toBe(200);
        expect(rateLimitHeaders(seen)).toEqual({});
      }
    });

    it("paths outside config.matcher never reach the proxy", async () => {
      const page = await get(base(), "/", `page-${store}`);
      expect(page.status).toBe(200);
      expect(page.body).toContain("Sluice on Next.js");
      expect(rateLimitHeaders(page)).toEqual({});
    });

    for (const [path, route] of [
      ["/api/wrapped", "wrapped"],
      ["/api/edge", "edge"],
    ] as const) {
      it(`withRateLimit on ${path} (${route === "edge" ? "edge" : "Node.js"} runtime): 2 allowed, then the 429, with both policies in the headers`, async () => {
        const seen = await sequence(base(), path, `${route}-${store}`, 3, 30_250);
        expect(seen.map((s) => s.status)).toEqual([200, 200, 429]);
        const policy = '"burst";q=2;w=61, "hourly";q=7;w=3600';
        expect(seen.map(rateLimitHeaders)).toEqual([
          { "ratelimit-policy": policy, ratelimit: '"burst";r=1;t=31, "hourly";r=6;t=515', "x-ratelimit-limit": "2", "x-ratelimit-remaining": "1" },
          { "ratelimit-policy": policy, ratelimit: '"burst";r=0;t=31, "hourly";r=5;t=515', "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0" },
          {
            "ratelimit-policy": policy,
            ratelimit: '"burst";r=0;t=31, "hourly";r=5;t=515',
            "x-ratelimit-limit": "2",
            "x-ratelimit-remaining": "0",
            "retry-after": "31",
          },
        ]);
        // the handler got its decision as its last argument
        expect(seen.slice(0, 2).map((s) => s.body)).toEqual([1, 0].map((remaining) => JSON.stringify({ route, store, path, remaining })));
        expect(seen[2]?.headers["content-type"]).toBe("application/problem+json");
        expect(seen[2]?.body).toBe(problem("burst", 31));
      });
    }

    if (store === "upstash") {
      it("the counters live in Redis: a limiter over the same store and prefixes sees them", async () => {
        const redis = new Redis({ url: (bridge as UpstashBridge).url, token: (bridge as UpstashBridge).token, retry: false, enableTelemetry: false });
        const upstash = new UpstashStore(redis);
        const guarded = new RateLimiter({
          store: upstash,
          prefix: "next-app:guarded",
          limits: tokenBucket({ name: "guarded", capacity: 3, refillRate: 1, interval: "20250ms" }),
        });
        expect((await guarded.peek("guarded-upstash")).remaining).toBe(0);
        expect((await guarded.peek("never-seen")).remaining).toBe(3);
        for (const prefix of ["next-app:wrapped", "next-app:edge"]) {
          const wrapped = new RateLimiter({
            store: upstash,
            prefix,
            limits: [
              tokenBucket({ name: "burst", capacity: 2, refillRate: 1, interval: "30250ms" }),
              leakyBucket({ name: "hourly", rate: 7, period: "1h", burst: 7 }),
            ],
          });
          const state = await wrapped.peek(prefix.endsWith("edge") ? "edge-upstash" : "wrapped-upstash");
          expect(state.policies.map((p) => [p.policy, p.remaining])).toEqual([
            ["burst", 0],
            ["hourly", 5],
          ]);
        }
      });
    }
  });
}
