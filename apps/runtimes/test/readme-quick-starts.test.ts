/**
 * The root README's "Quick start: Bun" and "Quick start: Deno" blocks, run as written (only the
 * port changed to a free one) by the real runtime, and driven over HTTP to the 429. The blocks use
 * the runtimes' globals (`Bun.serve`, `Deno.serve`), so this is where they are checked.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { APP_DIR, ROOT_DIR, type RuntimeName, denoOfflineFlags, runtimeBinary, runtimeEnv } from "../src/harness.js";

/** The first ```ts block under the README heading `## Quick start: <title>`. */
function quickStart(title: string): string {
  const readme = readFileSync(join(ROOT_DIR, "README.md"), "utf8");
  const start = readme.indexOf(`\n## Quick start: ${title}\n`);
  if (start < 0) throw new Error(`README.md has no "## Quick start: ${title}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const block = /\n```ts[^\n]*\n([\s\S]*?)\n```/.exec(section);
  if (block === null) throw new Error(`"## Quick start: ${title}" has no ts block`);
  return `${block[1]}\n`;
}

const DIR = join(APP_DIR, ".quick-start");
let child: ChildProcess | undefined;

afterEach(async () => {
  if (child !== undefined && child.exitCode === null && child.signalCode === null) {
    const closed = new Promise((resolve) => child?.once("close", resolve));
    child.kill("SIGKILL");
    await closed;
  }
  child = undefined;
  rmSync(DIR, { recursive: true, force: true });
});

const CASES: ReadonlyArray<readonly [RuntimeName, string, (file: string) => string[]]> = [
  ["bun", "Bun", (file) => ["run", file]],
  // as the README says (`deno run --allow-net main.ts`), plus the offline resolution flags
  ["deno", "Deno", (file) => ["run", ...denoOfflineFlags(), "--allow-net", file]],
];

describe.each(CASES)("README quick start under %s", (runtime, title, args) => {
  it("serves the Hono app and answers with the 429 once the burst is spent", async () => {
    const code = quickStart(title);
    expect(code, "the quick start listens on port 8787").toContain("port: 8787");
    mkdirSync(DIR, { recursive: true });
    const file = join(DIR, `${runtime}.ts`);
    writeFileSync(file, code.replace("port: 8787", "port: 0"));

    const proc = spawn(runtimeBinary(runtime), args(file), { cwd: APP_DIR, env: runtimeEnv({ DENO_DIR: join(DIR, "deno-dir") }), stdio: ["ignore", "pipe", "pipe"] });
    child = proc;
    let output = "";
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening address within 20 s:\n${output}`)), 20_000);
      const read = (chunk: Buffer) => {
        output += chunk.toString("utf8");
        const match = /https?:\/\/[^\s/]+:(\d+)\//.exec(output);
        if (match !== null) {
          clearTimeout(timer);
          resolve(Number(match[1]));
        }
      };
      proc.stdout?.on("data", read);
      proc.stderr?.on("data", read);
      proc.once("close", (exitCode) => {
        clearTimeout(timer);
        reject(new Error(`${runtime} exited (${exitCode}) before listening:\n${output}`));
      });
    });

    // ten at once, then one per second: the 11th is denied (a later one if the loop took seconds)
    const remaining: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 20 && limited === undefined; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/api/hello`, { headers: { "x-api-key": "readme" } });
      if (response.status === 429) limited = response;
      else {
        expect(response.status, output).toBe(200);
        const body = (await response.json()) as { hello: string; remaining: number };
        expect(body.hello).toBe("world");
        remaining.push(body.remaining);
      }
    }
    expect(remaining.slice(0, 2), output).toEqual([9, 8]);
    expect(remaining.length).toBeGreaterThanOrEqual(10);
    expect(limited, `no 429 after ${remaining.length} requests`).toBeDefined();
    const response = limited as Response;
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(response.headers.get("ratelimit-policy")).toBe(`"burst";q=10;w=10, "per-day";q=1000;w=86400`);
    expect(response.headers.get("ratelimit")).toMatch(new RegExp(`^"burst";r=0;t=1, "per-day";r=${1000 - remaining.length};t=\\d+$`));
    expect(response.headers.get("retry-after")).toBe("1");
    expect(response.headers.get("x-ratelimit-limit")).toBe("10");
    expect(response.headers.get("x-ratelimit-remaining")).toBe("0");
    expect((await response.json())["violated-policies"]).toEqual(["burst"]);
  });
});
