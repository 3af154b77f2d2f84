/**
 * Child entry of the in-app section (`app-cost.ts`): builds one contender's Hono app (from
 * `http-apps.ts`, the apps the HTTP section serves) and, on each IPC message `{ ops }`, sends `ops`
 * requests one at a time through `app.fetch(request)` — no socket, no HTTP parser — timing the
 * loop itself and answering `{ ok, elapsedMs }` (`ok`: the 200s). A denying app first spends its
 * quota (100 requests). One app per process, as in a deployment: apps sharing a process would share
 * Hono's call sites, which V8 then compiles for every middleware at once, slowing each one down
 * in a way no application with one middleware stack sees.
 *
 * `node app-cost-contenders.js <contender> [node-server]` sends `{ ready: true }` once the app is
 * built. With `node-server`, each request goes through `@hono/node-server`'s request listener
 * instead (a Node `IncomingMessage` in, a `ServerResponse` out over a socket that discards what is
 * written): what a Node server does per request, its header conversion included, without the
 * kernel, the HTTP parser and the load generator of the HTTP section.
 *
 * @module
 */
import { IncomingMessage, ServerResponse } from "node:http";
import { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import type { Hono } from "hono";
import {
  BARE,
  HONO_RATE_LIMITER,
  HONO_RATE_LIMITER_DENIED,
  HONO_RATE_LIMITER_SAME,
  NOOP,
  SLUICE_DEFAULT,
  SLUICE_DENIED,
  STATIC_HEADERS,
  buildApp,
} from "./http-apps.js";

/** Every contender, in table order. */
export const APP_CONTENDERS = [
  BARE,
  NOOP,
  STATIC_HEADERS,
  SLUICE_DEFAULT,
  HONO_RATE_LIMITER,
  HONO_RATE_LIMITER_SAME,
  SLUICE_DENIED,
  HONO_RATE_LIMITER_DENIED,
] as const;

/** The contenders whose requests are denied (after the quota's first 100). */
export const APP_DENIED: ReadonlySet<string> = new Set([SLUICE_DENIED, HONO_RATE_LIMITER_DENIED]);

/** What the child answers to `{ ops }`. */
export interface AppRunReply {
  readonly ok: number;
  readonly elapsedMs: number;
  readonly error?: string;
}

/** How a request reaches the app: `app.fetch(request)`, or `@hono/node-server`'s listener. */
export type AppDriver = "app.fetch" | "node-server";

/** A socket that takes every write and keeps nothing. */
class DiscardingSocket extends Duplex {
  override _write(_chunk: unknown, _encoding: string, done: () => void): void {
    done();
  }
  override _writev(_chunks: unknown, done: () => void): void {
    done();
  }
  override _read(): void {}
}

/** One request through `@hono/node-server`'s listener, answered with its status once the response has finished. */
function nodeServerDriver(app: Hono): () => Promise<number> {
  const listener = getRequestListener(app.fetch);
  const socket = new DiscardingSocket();
  return async () => {
    const incoming = new IncomingMessage(socket as never);
    Object.assign(incoming, { method: "GET", url: "/", httpVersion: "1.1", httpVersionMajor: 1, httpVersionMinor: 1, complete: true });
    incoming.headers = { host: "localhost", "x-api-key": "bench" };
    incoming.rawHeaders = ["host", "localhost", "x-api-key", "bench"];
    incoming.push(null);
    const outgoing = new ServerResponse(incoming);
    outgoing.assignSocket(socket as never);
    const finished = new Promise<void>((resolve) => outgoing.once("finish", resolve));
    await listener(incoming, outgoing);
    await finished;
    outgoing.detachSocket(socket as never);
    return outgoing.statusCode;
  };
}

async function main(name: string, driver: AppDriver): Promise<void> {
  if (!(APP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown in-app contender ${JSON.stringify(name)}; have ${APP_CONTENDERS.join(", ")}`);
  const { app } = await buildApp(name);
  const request = new Request("http://localhost/", { headers: { "x-api-key": "bench" } });
  const send = driver === "node-server" ? nodeServerDriver(app) : async () => (await app.fetch(request)).status;
  const denied = APP_DENIED.has(name);
  if (denied) for (let i = 0; i < 100; i++) await send();
  process.on("message", (message: { ops: number }) => {
    void (async () => {
      let ok = 0;
      let wrong: number | undefined;
      const start = performance.now();
      for (let i = 0; i < message.ops; i++) {
        const status = await send();
        if (status === 200) ok++;
        else if (status !== 429 || !denied) wrong ??= status;
      }
      const elapsedMs = performance.now() - start;
      process.send?.({ ok, elapsedMs, ...(wrong !== undefined ? { error: `${name}: answered ${wrong}` } : {}) } satisfies AppRunReply);
    })();
  });
  process.send?.({ ready: true });
}

const [name, driver] = process.argv.slice(2);
if (name !== undefined && process.send !== undefined) {
  main(name, driver === "node-server" ? "node-server" : "app.fetch").catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(2);
  });
}
