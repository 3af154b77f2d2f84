/**
 * Child entry of the HTTP benchmark: serves one contender's Hono app on `@hono/node-server` and
 * stays up until the parent closes its stdin (or sends SIGTERM).
 *
 * `node ... src/http-server.ts <contender> [<JSON options>]` prints one JSON line on stdout,
 * `{"port": N}`, once it listens on 127.0.0.1 (a free port). Every app serves `GET /` with a
 * 2-byte `text/plain` body; the contenders differ only in the middleware in front of it.
 *
 * One contender per process, so V8 specializes each app's code for its own middleware only (as in
 * a real deployment) and no contender's garbage or JIT state slows another down.
 *
 * @module
 */
import { serve } from "@hono/node-server";
import { buildApp, type HttpServerOptions } from "./http-apps.js";

const [name, optionsJson] = process.argv.slice(2);
if (name === undefined) {
  console.error("usage: http-server.ts <contender> [<JSON options>]");
  process.exit(2);
}
const options = (optionsJson === undefined ? {} : JSON.parse(optionsJson)) as HttpServerOptions;
const { app, close } = await buildApp(name, options);
const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info) => {
  process.stdout.write(`${JSON.stringify({ port: info.port, pid: process.pid })}\n`);
});

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  server.close();
  await close();
  process.exit(0);
}
process.on("SIGTERM", () => void stop());
process.stdin.on("end", () => void stop());
process.stdin.on("close", () => void stop());
process.stdin.resume();
// the parent reads this process's CPU time around each measured round (outside its timing)
process.on("message", (message) => {
  if (message === "cpu") process.send?.({ cpu: process.cpuUsage() });
});
