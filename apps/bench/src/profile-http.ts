/**
 * `pnpm --filter @sluice/bench profile:http [contender] [seconds]`: where one HTTP contender's
 * server spends its CPU. Serves the contender's app (see `http-apps.ts`; default
 * `"@sluice/hono, IETF + legacy headers"`) in a child process under `node --cpu-prof`, drives it with
 * autocannon (10 connections, the same `x-api-key` on every request) for `seconds` (default 5)
 * after a 1 s warm-up, and prints the server's CPU time per request and the functions with the
 * most self time, in µs per request. The `.cpuprofile` stays in `apps/bench/.build/profiles/` for
 * Chrome DevTools or speedscope.
 *
 * This is how the allowed path was profiled: most of what a limiter adds is the Fetch `Headers`
 * object that Hono's `c.header()` writes into (undici's validation of every name and value, then
 * `@hono/node-server`'s sorted copy of it), which every middleware writing headers through Hono
 * pays; `benchmarks.md` has the findings.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { BUILD_DIR, bundleEntry } from "./lib/bundle.js";
import { type CpuProfile, selfTimes, topLines } from "./lib/cpu-profile.js";
import { HTTP_CONTENDERS, SLUICE_DEFAULT } from "./http-apps.js";

async function main(): Promise<void> {
  const [name = SLUICE_DEFAULT, secondsText = "5"] = process.argv.slice(2).filter((a) => a !== "--");
  if (!(HTTP_CONTENDERS as readonly string[]).includes(name)) {
    throw new Error(`unknown contender ${JSON.stringify(name)}; have ${HTTP_CONTENDERS.filter((c) => c !== "@sluice/hono + RedisStore, IETF headers").join(", ")}`);
  }
  const seconds = Number(secondsText);
  const dir = fileURLToPath(new URL("profiles/", BUILD_DIR));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const bundle = await bundleEntry(new URL("./http-server.ts", import.meta.url), "http-server");
  const child = spawn(process.execPath, ["--cpu-prof", `--cpu-prof-dir=${dir}`, bundle, name, "{}"], { stdio: ["pipe", "pipe", "inherit", "ipc"] });
  const line: string = await new Promise((resolve) => createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", resolve));
  const url = `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}/`;
  const cpu = (): Promise<NodeJS.CpuUsage> =>
    new Promise((resolve) => {
      child.once("message", (m) => resolve((m as { cpu: NodeJS.CpuUsage }).cpu));
      child.send("cpu");
    });
  const warm = await autocannon({ url, connections: 10, duration: 1, headers: { "x-api-key": "k" } });
  const before = await cpu();
  const result = await autocannon({ url, connections: 10, duration: seconds, headers: { "x-api-key": "k" } });
  const after = await cpu();
  child.stdin?.end();
  await new Promise((resolve) => child.once("exit", resolve));
  // the profile covers the warm-up too: per-request figures divide by every request served
  const served = Math.max(1, warm.requests.total + result.requests.total);
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (file === undefined) throw new Error(`no .cpuprofile in ${dir}`);
  const self = selfTimes(JSON.parse(readFileSync(`${dir}${file}`, "utf8")) as CpuProfile);
  const measuredCpu = after.user - before.user + (after.system - before.system);
  console.log(`${name}: ${Math.round(result.requests.average)} req/s; server CPU ${(measuredCpu / result.requests.total).toFixed(1)} µs/request (user + system, measured run)`);
  console.log(`profile: ${dir}${file}\n\nself time, µs per request, top 25:`);
  for (const line of topLines(self, served, 25)) console.log(line);
}

await main();
