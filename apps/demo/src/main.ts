/**
 * Serves the demo API on Node.js and prints how to try it.
 *
 * `HOST` (default `127.0.0.1`) and `PORT` (default `8787`; `0` picks a free port) choose the
 * address; `EXPORT_MS` (default `2000`) is how long `GET /api/export` takes; `SLUICE_OTEL=console` turns on OpenTelemetry's console exporters (see telemetry.ts).
 * `SLUICE_ADMIN_KEY` is the key of the admin routes (`POST /admin/overrides`, `POST /admin/blocks`);
 * without it a random key is made at each start. The banner prints it, with `curl` lines that use it.
 * SIGINT and SIGTERM stop the server: it stops accepting connections, lets requests in
 * flight finish, and exits 0 (or exits 1 if that takes more than 5 seconds).
 *
 * @module
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { DEMO_API_KEYS, PLANS, createApp, isValidAdminKey, randomAdminKey } from "./app.js";
import { type Telemetry, startTelemetry } from "./telemetry.js";

const DEFAULT_PORT = 8787;

function portFromEnv(value: string | undefined): number {
  if (value === undefined || value === "") return DEFAULT_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    console.error(`PORT must be an integer from 0 to 65535; got ${JSON.stringify(value)}`);
    process.exit(1);
  }
  return port;
}

function msFromEnv(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 0 || ms > 60_000) {
    console.error(`${name} must be an integer of milliseconds from 0 to 60000; got ${JSON.stringify(value)}`);
    process.exit(1);
  }
  return ms;
}

const hostname = process.env.HOST || "127.0.0.1";
const port = portFromEnv(process.env.PORT);
// SLUICE_OTEL=console: the OpenTelemetry SDK with console exporters, started before the app is built
let telemetry: Telemetry | undefined;
try {
  telemetry = startTelemetry(process.env.SLUICE_OTEL, process.env.SLUICE_OTEL_INTERVAL_MS);
} catch (error) {
  console.error((error as Error).message);
  process.exit(1);
}
if (telemetry !== undefined) console.log(telemetry.description);
const exportMs = msFromEnv("EXPORT_MS", process.env.EXPORT_MS, 2000);
const adminKey = adminKeyFromEnv(process.env.SLUICE_ADMIN_KEY);
const app = createApp({ log: (line) => console.log(line), exportMs, adminKey: adminKey.key });

/** SLUICE_ADMIN_KEY, or a new random key when it is unset or empty. */
function adminKeyFromEnv(value: string | undefined): { key: string; from: string } {
  if (value === undefined || value === "") return { key: randomAdminKey(), from: "random, made at this start; set SLUICE_ADMIN_KEY to choose it" };
  if (!isValidAdminKey(value)) {
    console.error("SLUICE_ADMIN_KEY must be a bearer token: letters, digits and - . _ ~ + / (then = signs for padding), no spaces or quotes");
    process.exit(1);
  }
  return { key: value, from: "from SLUICE_ADMIN_KEY" };
}

/** The commands printed at start, for the URL the server actually listens on. */
function banner(url: string): string {
  const keys = Object.entries(DEMO_API_KEYS)
    .map(([key, { tier }]) => {
      const plan = PLANS[tier];
      return `  ${tier.padEnd(10)} ${key.padEnd(20)} ${plan.perMinute}/min, ${plan.perDay}/day, burst ${plan.burst}`;
    })
    .join("\n");
  const free = Object.keys(DEMO_API_KEYS).find((key) => DEMO_API_KEYS[key]?.tier === "free");
  const pro = Object.keys(DEMO_API_KEYS).find((key) => DEMO_API_KEYS[key]?.tier === "pro");
  const login = `curl -s -o /dev/null -w "%{http_code} " -X POST ${url}/auth/login -H "content-type: application/json" -d '{"username":"demo","password":"wrong"}'`;
  const admin = (path: string, body: object) =>
    `curl -s -X POST ${url}/admin/${path} -H "Authorization: Bearer ${adminKey.key}" -H "content-type: application/json" -d '${JSON.stringify(body)}'; echo`;
  const who = `key:${free}`;
  return `Sluice demo listening on ${url}

API keys (send as x-api-key; without one you are limited by address as free):
${keys}

Admin key (Authorization: Bearer <key> on POST /admin/overrides and POST /admin/blocks; ${adminKey.from}):
  ${adminKey.key}

Try:
  # never limited
  curl -s ${url}/health

  # who you are and what is left of your quota, with the rate-limit headers (a peek: spends nothing)
  curl -i -H "x-api-key: ${free}" ${url}/api/whoami

  # the free plan's burst is 10: ten calls in a row pass, the 11th gets 429
  for i in $(seq 1 10); do curl -s -o /dev/null -w "%{http_code} " -H "x-api-key: ${free}" ${url}/api/quote; done; echo
  curl -i -H "x-api-key: ${free}" ${url}/api/quote

  # an unknown key gets 401
  curl -i -H "x-api-key: nope" ${url}/api/whoami

  # login counts failed attempts: after 5 in 5 minutes, the 6th gets 429 and blocks the address for 15 minutes
  for i in $(seq 1 5); do ${login}; done; echo
  curl -i -X POST ${url}/auth/login -H "content-type: application/json" -d '{"username":"demo","password":"demo"}'

  # at most 2 exports in flight per key (each takes ${exportMs / 1000} s here): of three started 0.3 s apart, the third gets 429 at once
  for i in 1 2 3; do curl -s -o /dev/null -w "%{http_code} " -H "x-api-key: ${pro}" ${url}/api/export & sleep 0.3; done; wait; echo

  # admin: ten times the free key's quotas for an hour; whoami then shows q=100, q=300 and q=10000
  ${admin("overrides", { key: who, override: { scale: 10 }, ttl: "1h" })}
  curl -i -H "x-api-key: ${free}" ${url}/api/whoami

  # admin: block the free key for 15 minutes: its calls get 429 with Retry-After: 900; unblocked, they pass again
  ${admin("blocks", { key: who, duration: "15m" })}
  curl -i -H "x-api-key: ${free}" ${url}/api/quote
  ${admin("blocks", { key: who, unblock: true })}
  curl -s -o /dev/null -w "%{http_code}\\n" -H "x-api-key: ${free}" ${url}/api/quote

  # admin: back to the free plan's own quotas (override null clears it)
  ${admin("overrides", { key: who, override: null })}

  # admin: without the admin key, 401
  curl -s -o /dev/null -w "%{http_code}\\n" -X POST ${url}/admin/overrides -H "content-type: application/json" -d '{"key":"${who}","override":{"unlimited":true}}'

Press Ctrl+C to stop.
`;
}

const server = serve({ fetch: app.fetch, hostname, port }, (info: AddressInfo) => {
  const host = info.family === "IPv6" ? `[${info.address}]` : info.address;
  console.log(banner(`http://${host}:${info.port}`));
});

server.on("error", (error: NodeJS.ErrnoException) => {
  console.error(`Cannot listen on ${hostname}:${port}: ${error.message}`);
  process.exit(1);
});

let stopping = false;
function stop(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: stopping`);
  setTimeout(() => {
    console.error("requests still open after 5 s; exiting");
    process.exit(1);
  }, 5_000).unref();
  // once the requests in flight are done: the last metrics export, then exit
  server.close(() => void (telemetry?.shutdown() ?? Promise.resolve()).finally(() => process.exit(0)));
  // idle keep-alive connections would hold close() open
  if ("closeIdleConnections" in server) server.closeIdleConnections();
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
