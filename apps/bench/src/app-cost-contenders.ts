/**
 * Child entry of the in-app section (`app-cost.ts`): builds one contender's Hono app (from
 * `http-apps.ts`, the apps the HTTP section serves) and, on each IPC message `{ ops }`, sends `ops`
 * requests one at a time through `app.fetch(request)` — no socket, no HTTP parser — timing the
 * loop itself and answering `{ ok, elapsedMs }` (`ok`: the 200s). A denying app first spends its
 * quota (100 requests). One app per process, as in a deployment: apps sharing a process would share
 * Hono's call sites, which V8 then compiles for every middleware at once, slowing each one down
 * in a way no application with one middleware stack sees.
 *
 * `node app-cost-contenders.js <contender>` sends `{ ready: true }` once the app is built.
 *
 * @module
 */
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

async function main(name: string): Promise<void> {
  if (!(APP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown in-app contender ${JSON.stringify(name)}; have ${APP_CONTENDERS.join(", ")}`);
  const { app } = await buildApp(name);
  const request = new Request("http://localhost/", { headers: { "x-api-key": "bench" } });
  const denied = APP_DENIED.has(name);
  if (denied) for (let i = 0; i < 100; i++) await app.fetch(request);
  process.on("message", (message: { ops: number }) => {
    void (async () => {
      let ok = 0;
      let wrong: number | undefined;
      const start = performance.now();
      for (let i = 0; i < message.ops; i++) {
        const response = await app.fetch(request);
        if (response.status === 200) ok++;
        else if (response.status !== 429 || !denied) wrong ??= response.status;
      }
      const elapsedMs = performance.now() - start;
      process.send?.({ ok, elapsedMs, ...(wrong !== undefined ? { error: `${name}: answered ${wrong}` } : {}) } satisfies AppRunReply);
    })();
  });
  process.send?.({ ready: true });
}

const name = process.argv[2];
if (name !== undefined && process.send !== undefined) {
  main(name).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(2);
  });
}
