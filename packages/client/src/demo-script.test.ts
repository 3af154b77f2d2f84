/**
 * The demo's client script end to end: the real demo process (`src/main.ts`, as `pnpm start`
 * runs it) on a free port, and the real script (`src/client.ts`, as `pnpm --filter @sluice/demo
 * client` runs it) against it, with the real clock: 11 requests on the free plan (burst 10) mean
 * one pacing wait of about 2 s, and no 429.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";

const demoDir = fileURLToPath(new URL("../../../apps/demo/", import.meta.url));
const node = (script: string, env: Record<string, string>) =>
  spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", script], {
    cwd: demoDir,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });

let demo: ChildProcess;
let base = "";

beforeAll(async () => {
  demo = node("src/main.ts", { PORT: "0", HOST: "127.0.0.1" });
  let output = "";
  base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo did not start within 15 s:\n${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    demo.stdout?.on("data", onData);
    demo.stderr?.on("data", onData);
    demo.once("exit", (code) => reject(new Error(`the demo exited (code ${code}):\n${output}`)));
  });
}, 20_000);

afterAll(async () => {
  if (demo.exitCode !== null) return;
  const exited = new Promise((resolve) => demo.once("exit", resolve));
  demo.kill("SIGTERM");
  await exited;
});

it("prints one line per request with status, remaining and the wait it chose; no 429", async () => {
  const client = node("src/client.ts", { DEMO_URL: base, REQUESTS: "11" });
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
