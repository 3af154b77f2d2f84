/**
 * `rateLimitedFetch` from `@sluice/client` against the demo app (Hono on Node, memory store,
 * free/pro/enterprise plans), served in-process on 127.0.0.1 with `@hono/node-server`.
 *
 * The free plan is 10 at once, 30 per minute, 1000 per day: 200 requests take minutes. So the
 * demo's memory store and the client share one fake clock (`createApp({ clock })` and
 * `rateLimitedFetch({ now, sleep })`): a wait moves the clock instead of taking real time. The
 * requests, the server's decisions and its headers are real; every status the server sends is
 * recorded below `rateLimitedFetch`, so a 429 that the client retried would still be seen.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type WaitInfo, parseRateLimit, rateLimitedFetch } from "@sluice/client";
import { describe, expect, it } from "vitest";
import { createApp } from "../src/app.js";

/**
 * A clock in epoch ms that only moves forward. `sleep(ms)` moves it to `now + ms` at once (or
 * leaves it if another sleeper already moved it further): a timeline in which every wait really
 * lasts as long as asked, without the real time passing.
 */
function fakeClock(start: number) {
  const clock = {
    t: start,
    now: () => clock.t,
    sleep: async (ms: number) => {
      const target = clock.t + ms;
      await Promise.resolve();
      clock.t = Math.max(clock.t, target);
    },
  };
  return clock;
}

/** Serves a Fetch handler (the demo app's) on 127.0.0.1, on a free port, until `close()`. */
function serveFetch(fetch: (request: Request) => Response | Promise<Response>): Promise<{ url: string; close: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
      const close = () =>
        new Promise<void>((done, fail) => {
          (server as Server).closeAllConnections();
          server.close((error) => (error ? fail(error) : done()));
        });
      resolve({ url: `http://127.0.0.1:${info.port}`, close });
    });
    server.once("error", reject);
  });
}

/** A whole minute in epoch ms (2023-11-14T22:14:00Z). */
const T0 = 1_700_000_040_000;
const FREE = { "x-api-key": "free-demo-key" };

async function demo() {
  const clock = fakeClock(T0);
  const server = await serveFetch(createApp({ clock: clock.now }).fetch);
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
    // The demo's `t` (the effective window: when the quota next grows) is at most 66 s for its
    // per-minute sliding window (60 s to the roll, then the previous count must weigh one less):
    // a wait budget above that keeps the client strictly within the server's word.
    maxTotalWaitMs: 120_000,
  });
  return { clock, server, statuses, waits, api };
}

describe("rateLimitedFetch against the Sluice demo, free plan", () => {
  it("the server really limits: a plain fetch loop gets its 429 at the 11th request", async () => {
    const { server } = await demo();
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const response = await fetch(`${server.url}/api/quote`, { headers: FREE });
        statuses.push(response.status);
        await response.arrayBuffer();
      }
      expect(statuses).toEqual([...Array(10).fill(200), 429]);
    } finally {
      await server.close();
    }
  });

  it("200 requests one after another: 200 × 200, not one 429 from the server", async () => {
    const { clock, server, statuses, waits, api } = await demo();
    try {
      const remaining: number[] = [];
      for (let i = 0; i < 200; i++) {
        const response = await api(`${server.url}/api/quote`, { headers: FREE });
        expect(response.status).toBe(200);
        const burst = parseRateLimit(response.headers).policies.find((p) => p.policy === "burst");
        remaining.push(burst?.remaining ?? -1);
        await response.arrayBuffer();
      }
      expect(statuses).toHaveLength(200);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      // the client waited, only for pacing (no 429 to retry), and spent the burst first
      expect(waits.length).toBeGreaterThan(0);
      expect(new Set(waits.map((w) => w.reason))).toEqual(new Set(["pacing"]));
      expect(remaining.slice(0, 10)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      // 30 per minute bounds it from below: 200 requests need more than 5 minutes of the clock
      const minutes = (clock.t - T0) / 60_000;
      expect(minutes).toBeGreaterThan(5);
      console.log(`200 requests in ${minutes.toFixed(1)} min of the demo's clock, ${waits.length} pacing waits`);
    } finally {
      await server.close();
    }
  });

  it("200 requests from 4 concurrent loops sharing one client: not one 429", async () => {
    const { clock, server, statuses, waits, api } = await demo();
    try {
      const worker = async () => {
        for (let i = 0; i < 50; i++) {
          const response = await api(`${server.url}/api/quote`, { headers: FREE });
          expect(response.status).toBe(200);
          await response.arrayBuffer();
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      expect(statuses).toHaveLength(200);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(waits.length).toBeGreaterThan(0);
      console.log(`4 × 50 requests in ${((clock.t - T0) / 60_000).toFixed(1)} min of the demo's clock`);
    } finally {
      await server.close();
    }
  });
});
