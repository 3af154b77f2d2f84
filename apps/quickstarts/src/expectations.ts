/**
 * What the quick starts promise their readers, as assertions shared by the test files.
 *
 * @module
 */
import { freePort } from "@sluice/testing/redis-server";
import { expect } from "vitest";
import { type Seen, type Workspace, createProject, problemOf, requests, startServer } from "./harness.js";

/**
 * The Hono app of the Node.js, Bun and Deno quick starts (10 per minute and 1000 per day per
 * `x-api-key`): ten 200s counting down, then the problem+json 429 with exact headers; another key
 * has its own quota.
 */
export async function expectHonoQuickStart(base: string): Promise<void> {
  const seen = await requests(`${base}/api/hello`, 11, { "x-api-key": "quick-start" });
  expect(seen.map((s) => s.status)).toEqual([...Array<number>(10).fill(200), 429]);
  expect(seen.slice(0, 10).map((s) => JSON.parse(s.body))).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map((remaining) => ({ hello: "world", remaining })));
  const limited = seen[10] as Seen;
  expect(problemOf(limited)["violated-policies"]).toEqual(["per-minute"]);
  expect(limited.headers["ratelimit-policy"]).toBe('"per-minute";q=10;w=60, "per-day";q=1000;w=86400');
  expect(limited.headers.ratelimit).toMatch(/^"per-minute";r=0;t=\d+, "per-day";r=990;t=\d+$/);
  expect([limited.headers["x-ratelimit-limit"], limited.headers["x-ratelimit-remaining"]]).toEqual(["10", "0"]);
  // a sliding window: what is left of this minute, plus a tenth of the next
  expectRetryAfter(limited, 1, 66);
  const other = await requests(`${base}/api/hello`, 1, { "x-api-key": "another-key" });
  expect(other.map((s) => [s.status, JSON.parse(s.body)])).toEqual([[200, { hello: "world", remaining: 9 }]]);
}

/**
 * A Hono quick start (hono-node, bun, deno) from install to stop: its project, run.sh's command on a
 * free port (`PORT`), ready once it prints `listening(port)`, driven by {@link expectHonoQuickStart};
 * resolves to everything it printed.
 */
export async function runHonoQuickStart(workspace: Workspace, id: "hono-node" | "bun" | "deno", listening: (port: number) => string, env: Record<string, string> = {}): Promise<string> {
  const project = await createProject(workspace, id, [id]);
  const port = await freePort();
  const server = await startServer(project, id, { ...workspace.env, ...env, PORT: String(port) }, {
    ready: (output) => (output.includes(listening(port)) ? `http://127.0.0.1:${port}` : undefined),
  });
  try {
    await expectHonoQuickStart(server.base);
  } finally {
    await server.stop();
  }
  return server.output();
}

/** Retry-After in [min, max] seconds, and the body's `retryAfter` the same number. */
export function expectRetryAfter(seen: Seen, min: number, max: number): void {
  const retryAfter = Number(seen.headers["retry-after"]);
  expect(retryAfter).toBeGreaterThanOrEqual(min);
  expect(retryAfter).toBeLessThanOrEqual(max);
  expect(problemOf(seen).retryAfter).toBe(retryAfter);
}

/**
 * The output of the script quick starts (a sliding window of 5 per minute, six calls for one key):
 * exactly six lines, five allowed counting down, the sixth denied with the wait of a sliding window
 * (12 s to 72 s: a fifth of the next window, plus what is left of this one).
 */
export function expectScriptOutput(output: string): void {
  const lines = output.trim().split("\n");
  expect(lines.slice(0, 5)).toEqual([4, 3, 2, 1, 0].map((left, i) => `request ${i + 1}: allowed, ${left} left`));
  expect(lines.slice(5), output).toHaveLength(1);
  const denied = /^request 6: denied, retry in (\d+) ms$/.exec(lines[5] ?? "");
  expect(denied, output).not.toBeNull();
  expect(Number(denied?.[1])).toBeGreaterThan(12_000);
  expect(Number(denied?.[1])).toBeLessThanOrEqual(72_000);
}
