/**
 * The app for real: `next build` once, then `next start` twice on a free port — with the memory
 * store, then with `UpstashStore` against a private redis-server behind the Upstash REST bridge
 * (the store is picked from the environment at run time, so one build serves both) — and real
 * HTTP requests: 200s, then the 429, with exact header strings and the problem+json body, for the
 * path guarded by proxy.ts (Node.js runtime), a wrapped Node.js route handler and a wrapped edge
 * route handler.
 */
import { fileURLToPath } from "node:url";
import { RateLimiter, leakyBucket, tokenBucket } from "@sluice/core";
import { UpstashStore } from "@sluice/redis";
import { type NextServer, countdown, get, nextBuild, nextStart, problem, rateLimitHeaders, requireBuilt, sequence } from "@sluice/testing/next-app";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { disagreement } from "@sluice/testing/agreement";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const appDir = fileURLToPath(new URL("..", import.meta.url));

beforeAll(async () => {
  requireBuilt(appDir, ["core", "next", "redis"]);
  const { ms } = await nextBuild(appDir);
  console.info(`[sluice] next build took ${(ms / 1000).toFixed(1)} s`);
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
        // matched by the proxy but skipped: readiness costs no quota
        server = await nextStart(appDir, { readyPath: "/api/guarded/health", env: { UPSTASH_REDIS_REST_URL: bridge.url, UPSTASH_REDIS_REST_TOKEN: bridge.token } });
      } else {
        server = await nextStart(appDir, { readyPath: "/api/guarded/health" });
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
      // the next token comes 20.25 s after the first request: t=21 there, then what the clock allows
      const t = countdown(seen, "guarded", 20_250);
      expect(seen.map(rateLimitHeaders)).toEqual([
        { "ratelimit-policy": policy, ratelimit: `"guarded";r=2;t=${t[0]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2" },
        { "ratelimit-policy": policy, ratelimit: `"guarded";r=1;t=${t[1]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "1" },
        { "ratelimit-policy": policy, ratelimit: `"guarded";r=0;t=${t[2]}`, "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0" },
        {
          "ratelimit-policy": policy,
          ratelimit: `"guarded";r=0;t=${t[3]}`,
          "x-ratelimit-limit": "3",
          "x-ratelimit-remaining": "0",
          "retry-after": String(t[3]),
        },
      ]);
      // the route's own response, with the proxy's headers merged in
      expect(seen.slice(0, 3).map((s) => [s.headers["content-type"], s.body])).toEqual(
        Array(3).fill(["application/json", JSON.stringify({ route: "guarded", store })]),
      );
      expect(seen[3]?.headers["content-type"]).toBe("application/problem+json");
      expect(seen[3]?.body).toBe(problem("guarded", t[3] as number));
      // another key has its own quota
      expect((await get(base(), "/api/guarded/hello", `guarded-${store}-other`)).status).toBe(200);
    });

    it("two layers on /api/guarded/burst (proxy.ts with forwardHeaders + withRateLimit): one set of headers with both policies; the route's 429 agrees with its body", async () => {
      const seen = await sequence(base(), "/api/guarded/burst", `burst-${store}`, 2, 30_250);
      expect(seen.map((s) => s.status)).toEqual([200, 429]);
      const policy = '"guarded";q=3;w=61, "route-burst";q=1;w=31';
      // both count down from the first request: 21 (20.25 s) and 31 (30.25 s) there
      const g = countdown(seen, "guarded", 20_250);
      const t = countdown(seen, "route-burst", 30_250);
      expect(seen.map(rateLimitHeaders)).toEqual([
        // the legacy headers describe the binding policy: the route's (fewer remaining)
        { "ratelimit-policy": policy, ratelimit: `"guarded";r=2;t=${g[0]}, "route-burst";r=0;t=${t[0]}`, "x-ratelimit-limit": "1", "x-ratelimit-remaining": "0" },
        {
          "ratelimit-policy": policy,
          ratelimit: `"guarded";r=1;t=${g[1]}, "route-burst";r=0;t=${t[1]}`,
          "x-ratelimit-limit": "1",
          "x-ratelimit-remaining": "0",
          "retry-after": String(t[1]),
        },
      ]);
      expect(seen[0]?.body).toBe(JSON.stringify({ route: "burst", store, remaining: 0 }));
      // the route's own 429: what its body names violated is in the headers with r=0, Retry-After >= its t
      expect(seen[1]?.headers["content-type"]).toBe("application/problem+json");
      expect(seen[1]?.body).toBe(problem("route-burst", t[1] as number));
      const sent = new Headers(seen[1]?.headers);
      expect(disagreement(sent, JSON.parse(seen[1]?.body as string))).toBeUndefined();
      // nothing of the forwarding leaks to the client
      expect(Object.keys(seen[1]?.headers ?? {}).filter((name) => name.startsWith("x-sluice") || name.startsWith("x-middleware"))).toEqual([]);
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
        // t counts down from the first request: 31 (30.25 s) and 515 (1 h / 7 = 514.29 s) there
        const t = countdown(seen, "burst", 30_250);
        const h = countdown(seen, "hourly", 514_286);
        expect(seen.map(rateLimitHeaders)).toEqual([
          { "ratelimit-policy": policy, ratelimit: `"burst";r=1;t=${t[0]}, "hourly";r=6;t=${h[0]}`, "x-ratelimit-limit": "2", "x-ratelimit-remaining": "1" },
          { "ratelimit-policy": policy, ratelimit: `"burst";r=0;t=${t[1]}, "hourly";r=5;t=${h[1]}`, "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0" },
          {
            "ratelimit-policy": policy,
            ratelimit: `"burst";r=0;t=${t[2]}, "hourly";r=5;t=${h[2]}`,
            "x-ratelimit-limit": "2",
            "x-ratelimit-remaining": "0",
            "retry-after": String(t[2]),
          },
        ]);
        // the handler got its decision as its last argument
        expect(seen.slice(0, 2).map((s) => s.body)).toEqual([1, 0].map((remaining) => JSON.stringify({ route, store, path, remaining })));
        expect(seen[2]?.headers["content-type"]).toBe("application/problem+json");
        expect(seen[2]?.body).toBe(problem("burst", t[2] as number));
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
