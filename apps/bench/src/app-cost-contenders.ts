/**
 * The contenders of the in-app section (`app-cost.ts`), measured in one child process: Hono apps
 * built by `http-apps.ts` (the same apps the HTTP section serves), each driven in process with
 * `app.fetch(request)` in a loop — no socket, no HTTP parser — so what differs between two
 * contenders is the middleware's own work per request, headers written through Hono included.
 *
 * @module
 */
import type { Hono } from "hono";
import { type Contender, type ThroughputOptions, type ThroughputResult, measureThroughput } from "./lib/harness.js";
import { BARE, HONO_RATE_LIMITER, HONO_RATE_LIMITER_DENIED, NOOP, SLUICE_DENIED, SLUICE_IETF, buildApp } from "./http-apps.js";

/** Every contender, in table order. */
export const APP_CONTENDERS = [BARE, NOOP, SLUICE_IETF, HONO_RATE_LIMITER, SLUICE_DENIED, HONO_RATE_LIMITER_DENIED] as const;

/** The contenders whose requests are denied (after the quota's first 100). */
const DENIED: ReadonlySet<string> = new Set([SLUICE_DENIED, HONO_RATE_LIMITER_DENIED]);

/**
 * A contender that sends `ops` requests one at a time through `app.fetch`, reusing one `Request`
 * (a GET without a body: Hono reads its URL and headers only). Counts the 200s: a denying
 * contender must answer 429 to every measured request, the others 200.
 */
function appContender(name: string, app: Hono): Contender {
  const request = new Request("http://localhost/", { headers: { "x-api-key": "bench" } });
  const denied = DENIED.has(name);
  return {
    name,
    expect: denied ? "deny" : "allow",
    async run(ops: number): Promise<number> {
      let ok = 0;
      for (let i = 0; i < ops; i++) {
        const response = await app.fetch(request);
        if (response.status === 200) ok++;
        else if (response.status !== 429 || !denied) throw new Error(`${name}: answered ${response.status}`);
      }
      return ok;
    },
  };
}

/**
 * Child-process entry: every contender of {@link APP_CONTENDERS} (or `names`), interleaved round
 * by round. A denying app first spends its quota (100 requests) outside any timing.
 */
export async function measureApps(names: readonly string[], options: ThroughputOptions): Promise<ThroughputResult[]> {
  const contenders: Contender[] = [];
  for (const name of names) {
    if (!(APP_CONTENDERS as readonly string[]).includes(name)) throw new Error(`unknown in-app contender ${JSON.stringify(name)}; have ${APP_CONTENDERS.join(", ")}`);
    const { app } = await buildApp(name);
    if (DENIED.has(name)) for (let i = 0; i < 100; i++) await app.fetch(new Request("http://localhost/", { headers: { "x-api-key": "bench" } }));
    contenders.push(appContender(name, app));
  }
  return measureThroughput(contenders, options);
}
