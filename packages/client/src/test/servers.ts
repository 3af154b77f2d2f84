/**
 * Test helpers: real HTTP servers on 127.0.0.1 with a free port (Node's `http`, or a Fetch
 * handler through `@hono/node-server`), closed by the returned `close()`, and a fake clock that
 * a server and `rateLimitedFetch` can share.
 */
import { type IncomingMessage, type RequestListener, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";

export interface Running {
  url: string;
  close: () => Promise<void>;
}

function running(server: Server): Running {
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Serves a Node request listener (an Express app, say) on 127.0.0.1, on a free port. */
export function listen(handler: RequestListener<typeof IncomingMessage, typeof ServerResponse>): Promise<Running> {
  const server = createServer(handler);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(running(server)));
  });
}

/** Serves a Fetch handler (a Hono app's `fetch`) with `@hono/node-server` on 127.0.0.1, on a free port. */
export function serveFetch(fetch: (request: Request, env?: unknown) => Response | Promise<Response>): Promise<Running> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(running(server as Server)));
    server.once("error", reject);
  });
}

/**
 * A clock in epoch ms that only moves forward. `sleep(ms)` moves it to `now + ms` at once (or
 * leaves it if another sleeper already moved it further): a timeline in which every wait really
 * lasts as long as asked, without the real time passing.
 */
export function fakeClock(start: number) {
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
