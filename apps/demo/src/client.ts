/**
 * Calls the running demo with `rateLimitedFetch` from `@sluice/client` and prints one line per
 * request: the status, what is left of each policy, and the wait the client chose before sending.
 * A client that paces itself by the `RateLimit` header never gets a 429.
 *
 * Start the demo first (`pnpm start`), then `pnpm --filter @sluice/demo client`.
 *
 * - `DEMO_URL` (default `http://127.0.0.1:8787`): where the demo listens.
 * - `API_KEY` (default the free plan's demo key): sent as `x-api-key`.
 * - `REQUESTS` (default 30): how many requests to make.
 * - `ROUTE` (default `/api/quote`): the route to call.
 *
 * @module
 */
import { type WaitInfo, parseRateLimit, rateLimitedFetch } from "@sluice/client";
import { DEMO_API_KEYS } from "./app.js";

const base = (process.env.DEMO_URL || "http://127.0.0.1:8787").replace(/\/+$/, "");
const freeKey = Object.keys(DEMO_API_KEYS).find((key) => DEMO_API_KEYS[key]?.tier === "free") as string;
const apiKey = process.env.API_KEY || freeKey;
const route = process.env.ROUTE || "/api/quote";
const requests = Number(process.env.REQUESTS || 30);
if (!Number.isSafeInteger(requests) || requests < 1) {
  console.error(`REQUESTS must be a positive integer; got ${JSON.stringify(process.env.REQUESTS)}`);
  process.exit(1);
}

/** The waits the client chose for the request being made. */
let waits: WaitInfo[] = [];
const api = rateLimitedFetch({
  onWait: (info) => waits.push(info),
  // The demo's `t` can reach 120 s (its sliding window); wait that long rather than try our luck.
  maxTotalWaitMs: 180_000,
});

function describeWaits(list: WaitInfo[]): string {
  if (list.length === 0) return "sent at once";
  return list.map((w) => `waited ${(w.waitMs / 1000).toFixed(1)} s (${w.reason})`).join(", then ");
}

const url = `${base}${route}`;
console.log(`${requests} requests to ${url} with x-api-key: ${apiKey}\n`);
let limited = 0;
const started = Date.now();
for (let i = 1; i <= requests; i++) {
  waits = [];
  let response: Response;
  try {
    response = await api(url, { headers: { "x-api-key": apiKey } });
  } catch (error) {
    console.error(`Cannot reach ${base} (${(error as Error).message}). Start the demo first: pnpm start`);
    process.exit(1);
  }
  await response.arrayBuffer();
  if (response.status === 429) limited++;
  const policies = parseRateLimit(response.headers)
    .policies.map((p) => `${p.policy} ${p.remaining ?? "?"}/${p.quota ?? "?"}`)
    .join(", ");
  const elapsed = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
  console.log(`${String(i).padStart(3)}  ${elapsed} s  ${response.status}  remaining: ${policies || "(no headers)"}  ${describeWaits(waits)}`);
}
console.log(`\n${requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, ${limited} answered 429.`);
