/**
 * What the Hono middleware waits for, and what it leaves to the platform: a leaky bucket's
 * `delayMs` is waited before the handler runs (fake timers), and `decision.pending` is handed to
 * `c.executionCtx.waitUntil` on Workers, or left to run where there is none.
 */
import { type Decision, MemoryStore, RateLimiter, fixedWindow, leakyBucket } from "@sluice/core";
import { Hono } from "hono";
import { afterEach, describe, expect, it, vi } from "vitest";
import { rateLimiter } from "./index.js";

/** A whole minute (and second) in epoch ms, so window arithmetic is easy to read. */
const T0 = 1_700_000_040_000;

/** A memory store on a clock the test moves by hand. */
function clock(start = T0) {
  const state = { t: start };
  return { state, store: new MemoryStore({ clock: () => state.t }) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("shaping: delayMs", () => {
  it("waits delayMs before calling the handler", async () => {
    vi.useFakeTimers({ now: 0 });
    const { store } = clock();
    // 10 per second, burst 1, queue 2: at one instant the 2nd and 3rd requests wait 100 and 200 ms
    const limiter = new RateLimiter({ store, limits: leakyBucket({ rate: 10, period: "1s", burst: 1, queue: 2 }) });
    const ranAt: number[] = [];
    const seen: Decision[] = [];
    const app = new Hono()
      .use(rateLimiter({ limiter, key: () => "k", headers: "draft-6" }))
      .get("/", (c) => {
        ranAt.push(Date.now());
        seen.push(c.get("rateLimit") as Decision);
        return c.text("ok");
      });

    expect((await app.request("/")).status).toBe(200);
    expect(ranAt).toEqual([0]);

    const second = app.request("/");
    const third = app.request("/");
    await vi.advanceTimersByTimeAsync(99);
    expect(ranAt).toEqual([0]);
    expect(vi.getTimerCount()).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(ranAt).toEqual([0, 100]);
    await vi.advanceTimersByTimeAsync(99);
    expect(ranAt).toEqual([0, 100]);
    await vi.advanceTimersByTimeAsync(1);
    expect(ranAt).toEqual([0, 100, 200]);
    expect((await second).status).toBe(200);
    expect((await third).status).toBe(200);
    expect(seen.map((d) => d.delayMs)).toEqual([0, 100, 200]);

    // the fourth is beyond the queue: denied at once, no timer
    const fourth = await app.request("/");
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get("retry-after")).toBe("1");
    expect(vi.getTimerCount()).toBe(0);
    expect(ranAt).toHaveLength(3);
  });
});

describe("decision.pending on Workers", () => {
  /** A limiter whose decisions carry background work, as analytics would. */
  class PendingLimiter extends RateLimiter {
    readonly pendings: Promise<void>[] = [];
    override async limit(key: string, options?: { cost?: number }): Promise<Decision> {
      const decision = await super.limit(key, options);
      const pending = new Promise<void>((resolve) => setTimeout(resolve, 1));
      this.pendings.push(pending);
      return { ...decision, pending };
    }
  }

  it("is handed to c.executionCtx.waitUntil, allowed or denied", async () => {
    const { store } = clock();
    const limiter = new PendingLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    const app = new Hono().use(rateLimiter({ limiter, key: () => "k" })).get("/", (c) => c.text("ok"));
    const waited: Promise<unknown>[] = [];
    const executionCtx = {
      waitUntil: (promise: Promise<unknown>) => {
        waited.push(promise);
      },
      passThroughOnException: () => {},
      props: {},
    };
    const statuses = [];
    for (let i = 0; i < 2; i++) statuses.push((await app.fetch(new Request("http://localhost/"), {}, executionCtx)).status);
    expect(statuses).toEqual([200, 429]);
    expect(waited).toHaveLength(2);
    expect(waited[0]).toBe(limiter.pendings[0]);
    expect(waited[1]).toBe(limiter.pendings[1]);
  });

  it("without an ExecutionContext (Node.js, app.request()) it is left to run and the request is answered", async () => {
    const { store } = clock();
    const limiter = new PendingLimiter({ store, limits: fixedWindow({ limit: 1, window: "1m" }) });
    const app = new Hono().use(rateLimiter({ limiter, key: () => "k" })).get("/", (c) => c.text("ok"));
    expect((await app.request("/")).status).toBe(200);
    expect(limiter.pendings).toHaveLength(1);
    await limiter.pendings[0];
  });
});
