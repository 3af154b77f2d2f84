/**
 * On `@hono/node-server` the middleware writes the rate-limit headers through Hono (`c.header()`
 * before the handler runs), as on every runtime: a middleware registered before it reads them from
 * `c.res.headers` after `await next()`. Checked over real HTTP, header by header, against what the
 * same app answers through `app.request()`.
 */
import type { AddressInfo } from "node:net";
import { request as httpRequest } from "node:http";
import { type ServerType, serve } from "@hono/node-server";
import { MemoryStore, RateLimiter, concurrency, fixedWindow } from "@sluice/core";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimiter } from "./index.js";

/** Fixed clock: windows and `t` values are exact. */
const T0 = Date.UTC(2026, 0, 1, 0, 0, 10); // 10 s into a minute
const limiterOf = (limit = 3) => new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: fixedWindow({ limit, window: "1m", name: "api" }) });

/** One HTTP/1.1 exchange: status, raw header lines (name lowercased, in order) and body. */
interface Wire {
  status: number;
  headers: [string, string][];
  body: string;
}

function get(port: number, path: string, method = "GET", agent?: import("node:http").Agent): Promise<Wire> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method, agent }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => {
        const headers: [string, string][] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) headers.push([(res.rawHeaders[i] as string).toLowerCase(), res.rawHeaders[i + 1] as string]);
        resolve({ status: res.statusCode ?? 0, headers, body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** The header lines a test cares about: all but the ones Node adds (date, connection, keep-alive). */
const own = (w: Wire) => w.headers.filter(([name]) => name !== "date" && name !== "connection" && name !== "keep-alive");
/** The same from a Fetch response (`app.request()`), sorted like Node's would be compared. */
const fetchHeaders = (r: Response) => [...r.headers].filter(([name]) => name !== "date");
const sorted = (list: [string, string][]) => [...list].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

let servers: ServerType[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  servers = [];
});

async function listen(app: Hono): Promise<number> {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve(info.port));
    servers.push(server);
  });
}

describe("rateLimiter on @hono/node-server: headers through Hono", () => {
  /** An app whose first middleware records, after `await next()`, the rate-limit headers on `c.res`. */
  function outerApp() {
    const app = new Hono();
    const seen: [string, string | null, string | null][] = [];
    app.use(async (c, next) => {
      await next();
      seen.push([c.req.path, c.res.headers.get("RateLimit"), c.res.headers.get("Retry-After")]);
    });
    app.use(rateLimiter({ limiter: limiterOf(2), key: () => "k" }));
    app.get("/", (c) => c.text("ok"));
    app.get("/raw", () => new Response("raw")); // built without c: the headers are added after it
    return { app, seen };
  }
  const expectedSeen = [
    ["/", '"api";r=1;t=50', null],
    ["/raw", '"api";r=0;t=50', null],
    ["/", '"api";r=0;t=50', "50"],
  ];

  it("a middleware registered before rateLimiter reads RateLimit from c.res.headers after await next(): allowed, raw Response, 429", async () => {
    const { app, seen } = outerApp();
    const port = await listen(app);
    const wire = [await get(port, "/"), await get(port, "/raw"), await get(port, "/")];
    expect(wire.map((w) => w.status)).toEqual([200, 200, 429]);
    expect(seen).toEqual(expectedSeen);
    // what the outer middleware saw is what went out
    expect(wire.map((w) => w.headers.find(([n]) => n === "ratelimit")?.[1])).toEqual(seen.map(([, ratelimit]) => ratelimit));
  });

  it("the same under app.request(): the outer middleware sees exactly what goes out", async () => {
    const { app, seen } = outerApp();
    const responses = [await app.request("/"), await app.request("/raw"), await app.request("/")];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(seen).toEqual(expectedSeen);
    expect(responses.map((r) => r.headers.get("RateLimit"))).toEqual(seen.map(([, ratelimit]) => ratelimit));
  });

  it("a c.text response carries exactly the IETF and legacy headers, once each, with the handler's content type and length", async () => {
    const app = new Hono();
    app.use(rateLimiter({ limiter: limiterOf(3), key: () => "k" }));
    app.get("/", (c) => c.text("ok"));
    const port = await listen(app);
    const first = await get(port, "/");
    expect(first.status).toBe(200);
    expect(first.body).toBe("ok");
    expect(sorted(own(first))).toEqual([
      ["content-length", "2"],
      ["content-type", "text/plain; charset=UTF-8"],
      ["ratelimit", '"api";r=2;t=50'],
      ["ratelimit-policy", '"api";q=3;w=60'],
      ["x-ratelimit-limit", "3"],
      ["x-ratelimit-remaining", "2"],
      ["x-ratelimit-reset", "1767225660"], // epoch seconds: back to full quota
    ]);
  });

  it("the wire headers equal app.request()'s for a whole sequence: allowed, allowed, allowed, 429, 429 (one keep-alive connection)", async () => {
    const build = () => {
      const app = new Hono();
      app.use(rateLimiter({ limiter: limiterOf(3), key: () => "k" }));
      app.get("/", (c) => c.json({ ok: true }, 201, { "x-handler": "yes" }));
      return app;
    };
    const viaRequest: [number, [string, string][]][] = [];
    const inProcess = build();
    for (let i = 0; i < 5; i++) {
      const r = await inProcess.request("/");
      await r.text();
      viaRequest.push([r.status, sorted(fetchHeaders(r).filter(([n]) => n !== "content-length"))]);
    }
    const port = await listen(build());
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const viaWire: [number, [string, string][]][] = [];
    for (let i = 0; i < 5; i++) {
      const w = await get(port, "/", "GET", agent);
      viaWire.push([w.status, sorted(own(w).filter(([n]) => n !== "content-length"))]);
    }
    agent.destroy();
    expect(viaWire).toEqual(viaRequest);
    expect(viaWire.map(([status]) => status)).toEqual([201, 201, 201, 429, 429]);
    // the 429 is the middleware's own response: its headers once, Retry-After included
    expect(viaWire[3]?.[1]).toEqual([
      ["content-type", "application/problem+json"],
      ["ratelimit", '"api";r=0;t=50'],
      ["ratelimit-policy", '"api";q=3;w=60'],
      ["retry-after", "50"],
      ["x-ratelimit-limit", "3"],
      ["x-ratelimit-remaining", "0"],
      ["x-ratelimit-reset", "1767225660"],
    ]);
  });

  it("headers the handler sets itself win, and are sent once", async () => {
    const app = new Hono();
    app.use(rateLimiter({ limiter: limiterOf(3), key: () => "k", headers: "ietf" }));
    app.get("/", (c) => {
      c.header("RateLimit", '"own";r=7;t=1');
      return c.text("mine");
    });
    app.get("/new", () => new Response("raw", { headers: { ratelimit: '"raw";r=9;t=2', "set-cookie": "a=1" } }));
    const port = await listen(app);
    const w = await get(port, "/");
    expect(own(w).filter(([n]) => n.startsWith("ratelimit"))).toEqual(
      expect.arrayContaining([
        ["ratelimit", '"own";r=7;t=1'],
        ["ratelimit-policy", '"api";q=3;w=60'],
      ]),
    );
    expect(own(w).filter(([n]) => n === "ratelimit")).toHaveLength(1);
    const raw = await get(port, "/new");
    // (@hono/node-server sends a string body with plain-object headers without a content type)
    expect(sorted(own(raw).filter(([n]) => n !== "content-length" && n !== "content-type"))).toEqual([
      ["ratelimit", '"raw";r=9;t=2'],
      ["ratelimit-policy", '"api";q=3;w=60'],
      ["set-cookie", "a=1"],
    ]);
  });

  it("immutable-header responses (Response.redirect), streamed bodies, HEAD and a throwing handler all go out with the headers", async () => {
    const app = new Hono();
    app.use(rateLimiter({ limiter: limiterOf(100), key: (c) => c.req.path, headers: "ietf" }));
    app.get("/redirect", () => Response.redirect("http://127.0.0.1/elsewhere", 302));
    app.get("/stream", (c) => c.body(new ReadableStream({ start: (controller) => (controller.enqueue(new TextEncoder().encode("abc")), controller.close()) })));
    app.get("/head", (c) => c.text("body"));
    app.get("/throws", () => {
      throw new Error("boom");
    });
    const port = await listen(app);
    const ietf = (w: Wire) => own(w).filter(([n]) => n.startsWith("ratelimit"));
    const redirect = await get(port, "/redirect");
    expect([redirect.status, own(redirect).find(([n]) => n === "location")?.[1]]).toEqual([302, "http://127.0.0.1/elsewhere"]);
    expect(sorted(ietf(redirect))).toEqual([
      ["ratelimit", '"api";r=99;t=50'],
      ["ratelimit-policy", '"api";q=100;w=60'],
    ]);
    const streamed = await get(port, "/stream");
    expect([streamed.status, streamed.body]).toEqual([200, "abc"]);
    expect(sorted(ietf(streamed))).toEqual([
      ["ratelimit", '"api";r=99;t=50'],
      ["ratelimit-policy", '"api";q=100;w=60'],
    ]);
    const head = await get(port, "/head", "HEAD");
    expect([head.status, head.body]).toEqual([200, ""]);
    expect(sorted(ietf(head))).toEqual([
      ["ratelimit", '"api";r=99;t=50'],
      ["ratelimit-policy", '"api";q=100;w=60'],
    ]);
    // Hono's error handler answers 500; the request was counted, so the headers say so
    const thrown = await get(port, "/throws");
    expect(thrown.status).toBe(500);
    expect(sorted(ietf(thrown))).toEqual([
      ["ratelimit", '"api";r=99;t=50'],
      ["ratelimit-policy", '"api";q=100;w=60'],
    ]);
  });

  it("headers: false writes none; a skipped request gets none; a concurrency lease is still freed when the response ends", async () => {
    const app = new Hono();
    const leases = new RateLimiter({ store: new MemoryStore({ clock: () => T0 }), limits: concurrency({ limit: 1, name: "slots" }) });
    app.use("/off", rateLimiter({ limiter: limiterOf(3), key: () => "k", headers: false }));
    app.use("/skip", rateLimiter({ limiter: limiterOf(3), key: () => "k", skip: () => true }));
    app.use("/slot", rateLimiter({ limiter: leases, key: () => "k", headers: "ietf" }));
    app.get("*", (c) => c.text("ok"));
    const port = await listen(app);
    for (const path of ["/off", "/skip"]) {
      expect(sorted(own(await get(port, path)))).toEqual([
        ["content-length", "2"],
        ["content-type", "text/plain; charset=UTF-8"],
      ]);
    }
    for (let i = 0; i < 3; i++) {
      const w = await get(port, "/slot");
      expect([w.status, ...sorted(own(w).filter(([n]) => n.startsWith("ratelimit")))]).toEqual([
        200,
        ["ratelimit", '"slots";r=0;t=1'],
        ["ratelimit-policy", '"slots";q=1;qu="concurrent-requests"'],
      ]);
      // freed before the end of the body reached the client
      expect((await leases.peek("k")).remaining).toBe(1);
    }
  });
});
