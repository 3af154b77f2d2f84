import { RateLimiter, fixedWindow, slidingWindow } from "@sluice/core";
import { rateLimiter } from "@sluice/hono";
import { Hono } from "hono";

const limiter = new RateLimiter({
  limits: [
    slidingWindow({ limit: 10, window: "1m", name: "per-minute" }),
    fixedWindow({ limit: 1000, window: "1d", name: "per-day" }),
  ],
});

const app = new Hono()
  .use("/api/*", rateLimiter({ limiter, key: (c) => c.req.header("x-api-key") ?? "anonymous" }))
  .get("/api/hello", (c) => c.json({ hello: "world", remaining: c.get("rateLimit")?.remaining }));

const server = Bun.serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 8787) });
console.log(`Listening on ${server.url}api/hello`);
