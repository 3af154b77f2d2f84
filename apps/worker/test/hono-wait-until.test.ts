/**
 * `@sluice/hono` on Workers hands each decision's `pending` to `c.executionCtx.waitUntil`: the
 * response does not wait for the background work, and the work still finishes.
 */
import { type StartedWorker, startWorker } from "@sluice/testing/miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** How long each decision's background work takes in the fixture: far longer than serving a request. */
const PENDING_MS = 400;

let worker: StartedWorker | undefined;
let url: string;

beforeAll(async () => {
  worker = await startWorker({ entry: new URL("./fixtures/hono-wait-until.ts", import.meta.url), bindings: { PENDING_MS: String(PENDING_MS) } });
  url = worker.url;
});

afterAll(async () => {
  await worker?.stop();
});

describe("Hono on Workers", () => {
  it("passes decision.pending to executionCtx.waitUntil, allowed or denied, without waiting for it", async () => {
    const answers: [number, string, number][] = [];
    for (let i = 0; i < 2; i++) {
      const started = Date.now();
      const response = await fetch(new URL("/api/hello", url));
      answers.push([response.status, response.status === 200 ? await response.text() : "", Date.now() - started]);
    }
    expect(answers.map(([status, body]) => [status, body])).toEqual([
      [200, "hello, 0 left"],
      [429, ""],
    ]);
    // each answer came back long before its decision's background work was done
    for (const [, , elapsedMs] of answers) expect(elapsedMs).toBeLessThan(PENDING_MS);
    const log = (await (await fetch(new URL("/__log", url))).json()) as { waitUntilGotPending: boolean[]; audit: string[] };
    expect(log.waitUntilGotPending).toEqual([true, true]);
    expect(log.audit).toEqual(["client:allowed", "client:denied"]);
  });
});
