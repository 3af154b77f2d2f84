/**
 * `rateLimitedFetch`: retries after `Retry-After` within its bounds, replayable bodies only,
 * abort at every wait, and pacing by `r`/`t` (sequential and concurrent). Retries, bodies and
 * aborts run against a real HTTP server on 127.0.0.1; pacing runs against a model server (a
 * `fetch` function with a fixed-window counter on a fake clock) whose every decision is checked.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
// core's classes: the client has no dependency on core, yet its errors answer to them
import { SluiceConfigError, SluiceError } from "@sluice/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FetchLike, type RateLimitedFetchOptions, type WaitInfo, rateLimitedFetch } from "./index.js";
import { type Running, fakeClock, listen } from "./test/servers.js";

/** 2023-11-14T22:14:00Z */
const T0 = 1_700_000_040_000;

// ---------------------------------------------------------------------------------------------
// A real server whose answers the tests script: GET /status/<code>?retry-after=<value>&hold=<ms>
// answers <code> with that Retry-After after <ms>; POST /echo answers 429 (Retry-After: 1) until
// the third attempt of a given id, then 200 with the body it received.

interface Received {
  method: string;
  path: string;
  body: string;
}
let server: Running;
const received: Received[] = [];
const attemptsById = new Map<string, number>();

async function handler(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString();
  const url = new URL(request.url ?? "/", "http://127.0.0.1");
  received.push({ method: request.method ?? "", path: url.pathname, body });
  const hold = Number(url.searchParams.get("hold") ?? 0);
  if (hold > 0) await new Promise((resolve) => setTimeout(resolve, hold));
  if (url.pathname === "/echo") {
    const id = url.searchParams.get("id") ?? "";
    const n = (attemptsById.get(id) ?? 0) + 1;
    attemptsById.set(id, n);
    if (n < 3) {
      response.writeHead(429, { "retry-after": "1" }).end("slow down");
    } else {
      response.writeHead(200, { "content-type": "text/plain" }).end(`got ${body}`);
    }
    return;
  }
  const status = Number(url.pathname.split("/")[2] ?? 200);
  const headers: Record<string, string> = {};
  for (const [name, value] of url.searchParams) if (name !== "hold") headers[name] = value;
  response.writeHead(status, headers).end(`status ${status}`);
}

beforeAll(async () => {
  server = await listen((request, response) => {
    handler(request, response).catch((error: unknown) => response.destroy(error as Error));
  });
});
afterAll(async () => {
  await server.close();
});

/** A client on a fake clock whose raw responses (below the retries) are recorded. */
function client(options: Parameters<typeof rateLimitedFetch>[0] = {}) {
  const clock = fakeClock(T0);
  const statuses: number[] = [];
  const waits: WaitInfo[] = [];
  const api = rateLimitedFetch({
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    },
    now: clock.now,
    sleep: clock.sleep,
    onWait: (info) => waits.push(info),
    ...options,
  });
  return { clock, statuses, waits, api };
}

describe("options", () => {
  it("are checked when the function is made, with messages that name them", () => {
    expect(() => rateLimitedFetch({ maxRetries: -1 })).toThrow("[sluice] [client] maxRetries must be a non-negative integer; got -1");
    expect(() => rateLimitedFetch({ maxRetries: 1.5 })).toThrow(TypeError);
    expect(() => rateLimitedFetch({ maxTotalWaitMs: Number.NaN })).toThrow("maxTotalWaitMs must be a non-negative number");
    expect(() => rateLimitedFetch({ retryOn: [429, 1000] })).toThrow("retryOn must be an array of HTTP status codes; got [429,1000]");
    expect(() => rateLimitedFetch({ fetch: "nope" as unknown as FetchLike })).toThrow('fetch must be a function; got "nope"');
    expect(() => rateLimitedFetch({ pace: 1 as unknown as boolean })).toThrow("pace must be a boolean; got 1");
    expect(() => rateLimitedFetch({ maxTotalWaitMs: Number.POSITIVE_INFINITY, maxRetries: 0, retryOn: [] })).not.toThrow();
  });

  // [options, option]: every option of rateLimitedFetch, refused with code and option
  it.each([
    [null, "options"],
    [5, "options"],
    [{ maxRetries: -1 }, "maxRetries"],
    [{ maxRetries: "3" }, "maxRetries"],
    [{ maxWaitMs: 1.5 }, "maxWaitMs"],
    [{ maxTotalWaitMs: -1 }, "maxTotalWaitMs"],
    [{ retryOn: 429 }, "retryOn"],
    [{ retryOn: [99] }, "retryOn"],
    [{ pace: "yes" }, "pace"],
    [{ fetch: {} }, "fetch"],
    [{ onWait: "log" }, "onWait"],
    [{ now: 0 }, "now"],
    [{ sleep: true }, "sleep"],
  ])("%j: a SluiceConfigError (code SLUICE_CONFIG) naming %s", (options, option) => {
    const make = () => rateLimitedFetch(options as RateLimitedFetchOptions);
    expect(make).toThrow(expect.objectContaining({ name: "SluiceConfigError", code: "SLUICE_CONFIG", option }));
    expect(make).toThrow(new RegExp(`^\\[sluice\\] \\[client\\] ${option} must be `));
    // core's classes recognise it (no dependency: the same mark as a second copy of core's module)
    expect(make).toThrow(SluiceConfigError);
    expect(make).toThrow(SluiceError);
    expect(make).toThrow(TypeError);
  });

  it("the default fetch is globalThis.fetch, looked up at each call", async () => {
    const api = rateLimitedFetch();
    const response = await api(`${server.url}/status/200`);
    expect(await response.text()).toBe("status 200");
  });
});

describe("retry after Retry-After", () => {
  it("at most maxRetries times, each after Retry-After; then the last 429 is returned", async () => {
    const { clock, statuses, waits, api } = client();
    const url = `${server.url}/status/429?retry-after=1`;
    const response = await api(url);
    expect(response.status).toBe(429);
    expect(await response.text()).toBe("status 429");
    expect(statuses).toEqual([429, 429, 429, 429]);
    expect(waits).toEqual([
      { url, waitMs: 1000, reason: "retry-after", attempt: 2 },
      { url, waitMs: 1000, reason: "retry-after", attempt: 3 },
      { url, waitMs: 1000, reason: "retry-after", attempt: 4 },
    ]);
    expect(clock.t - T0).toBe(3000);
  });

  it("never waits past maxTotalWaitMs in all: the 429 whose wait would exceed it is returned", async () => {
    const long = client();
    expect((await long.api(`${server.url}/status/429?retry-after=120`)).status).toBe(429);
    expect(long.statuses).toEqual([429]);
    expect(long.waits).toEqual([]);
    expect(long.clock.t).toBe(T0);

    const some = client({ maxRetries: 10 });
    expect((await some.api(`${server.url}/status/503?retry-after=25`)).status).toBe(503);
    expect(some.statuses).toEqual([503, 503, 503]); // 25 s + 25 s; a third wait would reach 75 s > 60 s
    expect(some.waits.map((w) => w.waitMs)).toEqual([25_000, 25_000]);
  });

  it("reads an HTTP-date; without Retry-After it waits for the t of the exhausted policy", async () => {
    const dated = client({ maxRetries: 1 });
    const date = new Date(T0 + 7_000).toUTCString();
    await dated.api(`${server.url}/status/429?retry-after=${encodeURIComponent(date)}`);
    expect(dated.waits.map((w) => w.waitMs)).toEqual([7_000]);

    const byT = client({ maxRetries: 1 });
    await byT.api(`${server.url}/status/429?ratelimit=${encodeURIComponent('"a";r=0;t=4, "b";r=3;t=50')}`);
    expect(byT.waits.map((w) => [w.reason, w.waitMs])).toEqual([["retry-after", 4_000]]);

    const blind = client();
    expect((await blind.api(`${server.url}/status/429`)).status).toBe(429);
    expect(blind.statuses).toEqual([429]); // nothing says how long: no blind retry
  });

  it("only the statuses of retryOn", async () => {
    const a = client();
    expect((await a.api(`${server.url}/status/500?retry-after=1`)).status).toBe(500);
    expect(a.statuses).toEqual([500]);
    const b = client({ retryOn: [500], maxRetries: 1 });
    await b.api(`${server.url}/status/500?retry-after=1`);
    expect(b.statuses).toEqual([500, 500]);
    const c = client({ retryOn: [429], maxRetries: 1 });
    await c.api(`${server.url}/status/503?retry-after=1`);
    expect(c.statuses).toEqual([503]);
  });
});

describe("bodies", () => {
  it("replayable bodies are sent again on every attempt: string, bytes, Blob, URLSearchParams, FormData", async () => {
    const bodies: [string, BodyInit, string][] = [
      ["string", "hello", "got hello"],
      ["bytes", new TextEncoder().encode("bytes!"), "got bytes!"],
      ["blob", new Blob(["a blob"]), "got a blob"],
      ["params", new URLSearchParams({ a: "1", b: "2" }), "got a=1&b=2"],
    ];
    for (const [id, body, expected] of bodies) {
      const { statuses, api } = client();
      const response = await api(`${server.url}/echo?id=${id}`, { method: "POST", body });
      expect(await response.text()).toBe(expected);
      expect(statuses).toEqual([429, 429, 200]);
    }
    const form = new FormData();
    form.set("field", "value");
    const { statuses, api } = client();
    const response = await api(`${server.url}/echo?id=form`, { method: "POST", body: form });
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(/name="field"\r\n\r\nvalue/);
    expect(statuses).toEqual([429, 429, 200]);
    expect(received.filter((r) => r.path === "/echo" && r.body.includes('name="field"'))).toHaveLength(3);
  });

  it("a Request with a body is cloned for each attempt", async () => {
    const { statuses, api } = client();
    const request = new Request(`${server.url}/echo?id=request`, { method: "POST", body: "from a Request" });
    const response = await api(request);
    expect(await response.text()).toBe("got from a Request");
    expect(statuses).toEqual([429, 429, 200]);
  });

  it("a stream body is sent once: its 429 is returned, not retried", async () => {
    const { statuses, waits, api } = client();
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("streamed"));
        controller.close();
      },
    });
    const response = await api(`${server.url}/echo?id=stream`, { method: "POST", body: stream, duplex: "half" } as RequestInit);
    expect(response.status).toBe(429);
    expect(statuses).toEqual([429]);
    expect(waits).toEqual([]);
  });
});

describe("abort", () => {
  const reason = new Error("the user left");

  it("an aborted signal rejects at once with its reason, and nothing is sent", async () => {
    const { statuses, api } = client();
    await expect(api(`${server.url}/status/200`, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(statuses).toEqual([]);
  });

  it("during a Retry-After wait (real timers): rejects promptly with the signal's reason", async () => {
    const api = rateLimitedFetch();
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(reason), 100);
    await expect(api(`${server.url}/status/429?retry-after=30`, { signal: controller.signal })).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("during a pacing wait (real timers), and through a Request's own signal", async () => {
    const api = rateLimitedFetch();
    const url = `${server.url}/status/200?ratelimit=${encodeURIComponent('"p";r=0;t=30')}`;
    expect((await api(url)).status).toBe(200); // the budget is now 0 for 30 s
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(reason), 100);
    await expect(api(new Request(url, { signal: controller.signal }))).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("while waiting for the answer to the first request of an origin", async () => {
    const api = rateLimitedFetch();
    const first = api(`${server.url}/status/200?hold=600`);
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(reason), 100);
    await expect(api(`${server.url}/status/200`, { signal: controller.signal })).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect((await first).status).toBe(200);
  });

  it("a custom sleep is abandoned on abort too", async () => {
    const api = rateLimitedFetch({ sleep: () => new Promise(() => {}) }); // never resolves
    const controller = new AbortController();
    setTimeout(() => controller.abort(reason), 50);
    await expect(api(`${server.url}/status/429?retry-after=1`, { signal: controller.signal })).rejects.toBe(reason);
  });

  it("during the request itself, fetch rejects as usual and the origin is free again", async () => {
    const api = rateLimitedFetch();
    const controller = new AbortController();
    setTimeout(() => controller.abort(reason), 50);
    await expect(api(`${server.url}/status/200?hold=1000`, { signal: controller.signal })).rejects.toBe(reason);
    expect((await api(`${server.url}/status/200`)).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// Pacing, against a model server: a fixed window of `limit` per `windowMs` on the shared fake
// clock, answering with the IETF fields (`t` = the end of the window) and a 429 when over.

function modelServer(clock: ReturnType<typeof fakeClock>, limit: number, windowMs: number, latency = () => Promise.resolve()) {
  let windowIndex = -1;
  let count = 0;
  let inFlight = 0;
  const log: { at: number; status: number; inFlight: number }[] = [];
  const fetchImpl: FetchLike = async () => {
    inFlight++;
    const sentInFlight = inFlight;
    await latency();
    const now = clock.t;
    const index = Math.floor(now / windowMs);
    if (index !== windowIndex) {
      windowIndex = index;
      count = 0;
    }
    const t = Math.ceil(((index + 1) * windowMs - now) / 1000);
    const allowed = count < limit;
    if (allowed) count++;
    inFlight--;
    log.push({ at: now, status: allowed ? 200 : 429, inFlight: sentInFlight });
    const headers: Record<string, string> = {
      "ratelimit-policy": `"fixed";q=${limit};w=${windowMs / 1000}`,
      ratelimit: `"fixed";r=${limit - count};t=${t}`,
    };
    if (!allowed) headers["retry-after"] = String(t);
    return new Response(allowed ? "ok" : "limited", { status: allowed ? 200 : 429, headers });
  };
  return { fetch: fetchImpl, log };
}

describe("pacing", () => {
  it("never sends more than r within t: 23 calls to a 5-per-10 s server, not one 429", async () => {
    const clock = fakeClock(T0);
    const model = modelServer(clock, 5, 10_000);
    const waits: WaitInfo[] = [];
    const api = rateLimitedFetch({ fetch: model.fetch, now: clock.now, sleep: clock.sleep, onWait: (w) => waits.push(w) });
    for (let i = 0; i < 23; i++) expect((await api("https://api.example/x")).status).toBe(200);
    expect(model.log.map((l) => l.status)).toEqual(Array(23).fill(200));
    // T0 is 40 s into a 10 s window: 5 now, then 5 at each window start
    expect(model.log.map((l) => (l.at - T0) / 1000)).toEqual([...Array(5).fill(0), ...Array(5).fill(10), ...Array(5).fill(20), ...Array(5).fill(30), 40, 40, 40]);
    expect(waits).toEqual(Array(4).fill({ url: "https://api.example/x", waitMs: 10_000, reason: "pacing", attempt: 1 }));
  });

  it("concurrent calls share the budget: the first goes alone, then never more than r", async () => {
    const clock = fakeClock(T0);
    const model = modelServer(clock, 3, 10_000, () => new Promise((resolve) => setTimeout(resolve, 5)));
    // Requests take 5 ms of real time while the fake clock jumps 10 s at each wait: some are
    // decided windows after they were sent. The last callers wait long: no wait budget here.
    const api = rateLimitedFetch({ fetch: model.fetch, now: clock.now, sleep: clock.sleep, maxTotalWaitMs: Number.POSITIVE_INFINITY });
    const statuses = await Promise.all(Array.from({ length: 20 }, () => api("https://api.example/x").then((r) => r.status)));
    expect(statuses).toEqual(Array(20).fill(200));
    expect(model.log.map((l) => l.status)).toEqual(Array(20).fill(200));
    const perWindow = new Map<number, number>();
    for (const l of model.log) perWindow.set(Math.floor(l.at / 10_000), (perWindow.get(Math.floor(l.at / 10_000)) ?? 0) + 1);
    expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(3);
    expect(model.log[0]?.inFlight).toBe(1); // the first request went alone
    expect(Math.max(...model.log.map((l) => l.inFlight))).toBeGreaterThan(1); // then several at once
  });

  it("a Retry-After holds the origin's other requests too", async () => {
    const clock = fakeClock(T0);
    const sent: number[] = [];
    let first = true;
    const api = rateLimitedFetch({
      now: clock.now,
      sleep: clock.sleep,
      fetch: async () => {
        sent.push(clock.t - T0);
        if (first) {
          first = false;
          return new Response("busy", { status: 503, headers: { "retry-after": "5" } });
        }
        return new Response("ok");
      },
    });
    await Promise.all([api("https://api.example/a"), api("https://api.example/b"), api("https://api.example/c")]);
    expect(sent).toEqual([0, 5_000, 5_000, 5_000]);
  });

  it("origins are paced apart; pace: false only retries", async () => {
    const clock = fakeClock(T0);
    const model = modelServer(clock, 1, 10_000);
    const waits: WaitInfo[] = [];
    const api = rateLimitedFetch({ fetch: model.fetch, now: clock.now, sleep: clock.sleep, onWait: (w) => waits.push(w) });
    await api("https://one.example/");
    await api("https://two.example/"); // the model counts both origins together: this one is a 429, retried
    expect(waits.map((w) => [w.reason, new URL(w.url).host])).toEqual([["retry-after", "two.example"]]);

    const clock2 = fakeClock(T0);
    const model2 = modelServer(clock2, 1, 10_000);
    const unpaced = rateLimitedFetch({ fetch: model2.fetch, now: clock2.now, sleep: clock2.sleep, pace: false });
    await unpaced("https://one.example/");
    await unpaced("https://one.example/");
    expect(model2.log.map((l) => l.status)).toEqual([200, 429, 200]);
  });

  it("a pacing wait longer than maxTotalWaitMs is not made: the request goes and the server decides", async () => {
    const clock = fakeClock(T0);
    const model = modelServer(clock, 1, 120_000);
    const api = rateLimitedFetch({ fetch: model.fetch, now: clock.now, sleep: clock.sleep, maxTotalWaitMs: 5_000 });
    await api("https://api.example/");
    const second = await api("https://api.example/");
    expect(second.status).toBe(429);
    expect(model.log.map((l) => l.status)).toEqual([200, 429]);
    expect(clock.t).toBe(T0);
  });

  it("a failed request frees the requests that waited for its answer", async () => {
    const clock = fakeClock(T0);
    let calls = 0;
    const api = rateLimitedFetch({
      now: clock.now,
      sleep: clock.sleep,
      fetch: async () => {
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (calls === 1) throw new TypeError("fetch failed");
        return new Response("ok");
      },
    });
    const results = await Promise.allSettled([api("https://api.example/"), api("https://api.example/"), api("https://api.example/")]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "fulfilled"]);
  });
});

describe("rateLimitedFetch against hostile headers", () => {
  const huge = "9".repeat(309); // Number() reads it as Infinity

  /** A `fetch` answering each call with the next of `answers` (status and headers). */
  function scripted(answers: { status: number; headers: Record<string, string> }[]) {
    const log: number[] = [];
    const fetch: FetchLike = async () => {
      const next = answers[Math.min(log.length, answers.length - 1)]!;
      log.push(next.status);
      return new Response(`status ${next.status}`, next);
    };
    return { fetch, log };
  }

  it("a Retry-After of 309 digits is refused as a value: the 429 comes back at once, and the next request is not held", async () => {
    const clock = fakeClock(T0);
    const { fetch, log } = scripted([{ status: 429, headers: { "retry-after": huge } }, { status: 200, headers: {} }]);
    const api = rateLimitedFetch({ fetch, now: clock.now, sleep: clock.sleep });
    expect((await api("https://api.example/")).status).toBe(429);
    expect((await api("https://api.example/")).status).toBe(200);
    expect([log, clock.t - T0]).toEqual([[429, 200], 0]);
  });

  it("an X-RateLimit-Reset of 309 digits never makes a request wait forever", async () => {
    const clock = fakeClock(T0);
    const { fetch, log } = scripted([
      { status: 200, headers: { "x-ratelimit-limit": "1", "x-ratelimit-remaining": "0", "x-ratelimit-reset": huge } },
      { status: 200, headers: {} },
    ]);
    const api = rateLimitedFetch({ fetch, now: clock.now, sleep: clock.sleep });
    await api("https://api.example/");
    expect((await api("https://api.example/")).status).toBe(200);
    expect(log).toEqual([200, 200]);
  });

  it("waits are clamped to maxWaitMs: a reset a thousand years away holds the origin for maxWaitMs, then a probe goes", async () => {
    const clock = fakeClock(T0);
    const waits: WaitInfo[] = [];
    const thousandYears = String(1000 * 365 * 86_400);
    const { fetch, log } = scripted([
      { status: 200, headers: { ratelimit: `"day";r=0;t=${thousandYears}`, "ratelimit-policy": '"day";q=1;w=86400' } },
      { status: 200, headers: {} },
    ]);
    const api = rateLimitedFetch({ fetch, now: clock.now, sleep: clock.sleep, maxWaitMs: 5_000, onWait: (w) => waits.push(w) });
    await api("https://api.example/");
    await api("https://api.example/");
    expect(waits.map((w) => [w.reason, w.waitMs])).toEqual([["pacing", 5_000]]);
    expect([log, clock.t - T0]).toEqual([[200, 200], 5_000]);
    // a Retry-After beyond maxWaitMs is not waited for: the answer is returned
    const retry = scripted([{ status: 429, headers: { "retry-after": "3600" } }]);
    const impatient = rateLimitedFetch({ fetch: retry.fetch, now: clock.now, sleep: clock.sleep, maxWaitMs: 5_000 });
    expect((await impatient("https://other.example/")).status).toBe(429);
    expect(retry.log).toEqual([429]);
    expect(() => rateLimitedFetch({ maxWaitMs: -1 })).toThrow(/maxWaitMs must be a non-negative integer/);
    expect(() => rateLimitedFetch({ maxWaitMs: Infinity })).toThrow(/maxWaitMs/);
  });

  it("keeps a bounded number of policies per origin: a server that names a new policy in every answer cannot grow the client", async () => {
    const clock = fakeClock(T0);
    let n = 0;
    const fetch: FetchLike = async () => {
      n++;
      // the first answer leaves one request of "p0" for 30 s; every later one names 200 fresh policies with room
      const members = n === 1 ? ['"p0";r=1;t=30'] : Array.from({ length: 200 }, (_, i) => `"q${n}-${i}";r=1000;t=30`);
      return new Response("ok", { headers: { ratelimit: members.join(", ") } });
    };
    const waits: WaitInfo[] = [];
    const api = rateLimitedFetch({ fetch, now: clock.now, sleep: clock.sleep, onWait: (w) => waits.push(w) });
    await api("https://api.example/");
    await api("https://api.example/"); // p0's last request: p0 is used up until T0 + 30 s...
    // ...but 200 newer policies came with that answer, and p0 is the least recently updated: forgotten
    for (let i = 0; i < 500; i++) await api("https://api.example/");
    expect(waits).toEqual([]);
    expect([n, clock.t]).toEqual([502, T0]);
  });
});
