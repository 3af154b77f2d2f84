/**
 * The demo's client script end to end: the real demo process (`src/main.ts`, as `pnpm start`
 * runs it) on a free port, and the real script (`src/client.ts`, as `pnpm --filter @sluice/demo
 * client` runs it, `rateLimitedFetch` from `@sluice/client`) against it, with the real clock: 11
 * requests on the free plan (burst 10) mean one pacing wait of about 2 s, and no 429.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type DemoProcess, startDemo } from "./demo-process.js";

const demoDir = fileURLToPath(new URL("..", import.meta.url));

let demo: DemoProcess | undefined;
let base = "";

beforeAll(async () => {
  demo = await startDemo();
  base = demo.base;
}, 20_000);

afterAll(async () => {
  await demo?.stop();
});

it("prints one line per request with status, remaining and the wait it chose; no 429", async () => {
  const client = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", "src/client.ts"], {
    cwd: demoDir,
    env: { ...process.env, NO_COLOR: "1", DEMO_URL: base, REQUESTS: "11" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  client.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  client.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => client.once("exit", resolve));
  expect(code, output).toBe(0);

  const lines = output.split("\n").filter((line) => /^\s*\d+\s+[\d.]+ s\s+\d{3}\s/.test(line));
  expect(lines).toHaveLength(11);
  expect(lines.map((line) => line.trim().split(/\s+/)[3])).toEqual(Array(11).fill("200"));
  expect(lines[0]).toMatch(/remaining: burst 9\/10, per-minute 29\/30, per-day 999\/1000\s+sent at once$/);
  expect(lines[9]).toMatch(/remaining: burst 0\/10, per-minute 20\/30, per-day 990\/1000\s+sent at once$/);
  // the 11th waits for the next token of the burst bucket (one every 2 s)
  expect(lines[10]).toMatch(/remaining: burst 0\/10, per-minute 19\/30, per-day 989\/1000\s+waited [12]\.\d s \(pacing\)$/);
  expect(output).toContain("11 requests in");
  expect(output).toContain("0 answered 429.");
}, 30_000);
