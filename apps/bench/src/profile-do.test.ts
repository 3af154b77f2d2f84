/**
 * Smoke test of `profile:do`: the tool runs the Durable Object benchmark's Worker in Miniflare,
 * profiles it through workerd's inspector and prints both contenders' busy time and top functions.
 * A tiny run; asserts the report's shape, never a timing.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { profileArgs } from "./profile-do.js";

const run = promisify(execFile);
const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));

describe("profile:do", () => {
  it("profiles the counter object and Sluice's store through the inspector and prints µs per decision by function", async () => {
    const { stdout } = await run(
      process.execPath,
      ["--conditions=@sluice/source", "--experimental-websocket", "--import", "tsx", "src/profile-do.ts", "1", "100"],
      { cwd: BENCH_DIR, env: { ...process.env, WRANGLER_SEND_METRICS: "false" }, timeout: 100_000 },
    );
    expect(stdout).toMatch(/^one hot object, 50 in flight, 100 decisions per contender and pass, 2 passes; profiles in /);
    const sections = stdout.split("\n\n").slice(1);
    expect(sections.map((s) => s.split(":")[0])).toEqual(["ceiling", "Sluice DurableObjectStore"]);
    for (const section of sections) {
      const [head, ...lines] = section.trim().split("\n");
      expect(head).toMatch(/: [\d.]+ µs per decision under the profiler, the isolate busy [\d.]+ µs of it; self time, µs per decision, top 15:$/);
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) expect(line).toMatch(/^ +\d+\.\d\d +\d+\.\d% {2}\S/);
    }
  });

  it("takes [keys] [decisions], and refuses anything but positive integers, naming the argument", () => {
    expect(profileArgs([])).toEqual({ keys: 1, decisions: 20_000 });
    expect(profileArgs(["--", "1000", "500"])).toEqual({ keys: 1000, decisions: 500 });
    expect(() => profileArgs(["1", "many"])).toThrow('decisions must be a positive integer; got "many"');
    expect(() => profileArgs(["0"])).toThrow('keys must be a positive integer; got "0"');
  });
});
