/**
 * The page in headless Chromium: built with Vite, served by `vite preview` on a free port, driven
 * with playwright-core over Debian's `chromium` (no browser download). It runs the window-edge
 * preset, reads the counts shown, checks them against the core's own decisions for the same trace,
 * checks that the URL carries the settings, and saves screenshots to `test-results/`.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromiumPath } from "@sluice/testing/chromium";
import { type Browser, type Page, chromium } from "playwright-core";
import { type PreviewServer, build, preview } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { directRun, windowEdgePolicies, windowEdgeTrace } from "./direct.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const RESULTS = join(ROOT, "test-results");
const ALGORITHMS = ["fixedWindow", "slidingWindow", "slidingLog", "tokenBucket", "leakyBucket"] as const;

let outDir: string;
let server: PreviewServer;
let browser: Browser;
let page: Page;
let baseUrl: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  const executablePath = chromiumPath("The playground's browser test");
  outDir = await mkdtemp(join(tmpdir(), "sluice-playground-"));
  await build({ root: ROOT, configFile: join(ROOT, "vite.config.ts"), logLevel: "silent", build: { outDir, emptyOutDir: true } });
  server = await preview({
    root: ROOT,
    configFile: join(ROOT, "vite.config.ts"),
    logLevel: "silent",
    build: { outDir },
    preview: { host: "127.0.0.1", port: 0, strictPort: true, open: false },
  });
  const address = server.httpServer.address();
  if (address === null || typeof address === "string") throw new Error(`vite preview gave no port: ${String(address)}`);
  baseUrl = `http://127.0.0.1:${address.port}/`;
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"], timeout: 20_000 });
  page = await browser.newPage({ viewport: { width: 1900, height: 1200 } });
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
  await mkdir(RESULTS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (outDir !== undefined) await rm(outDir, { recursive: true, force: true });
});

/** The number of the last finished run. */
async function runNumber(): Promise<number> {
  return Number(await page.getAttribute("#status", "data-run"));
}

/** Waits until a run after `after` has finished. */
async function waitForRun(after: number): Promise<void> {
  await page.waitForFunction((previous) => {
    const status = document.querySelector<HTMLElement>("#status");
    return status?.dataset.state === "done" && Number(status.dataset.run) > previous;
  }, after);
}

/** The counts the page shows, per algorithm. */
async function shownCounts(): Promise<Record<string, { allowed: number; denied: number; delayed: number }>> {
  const counts: Record<string, { allowed: number; denied: number; delayed: number }> = {};
  for (const algorithm of ALGORITHMS) {
    const read = async (kind: string) => Number(await page.getByTestId(`${kind}-${algorithm}`).textContent());
    counts[algorithm] = { allowed: await read("allowed"), denied: await read("denied"), delayed: await read("delayed") };
  }
  return counts;
}

/** The core's own counts for the window-edge trace. */
async function coreCounts(overrides: Parameters<typeof windowEdgePolicies>[0] = {}) {
  const policies = windowEdgePolicies(overrides);
  const counts: Record<string, { allowed: number; denied: number; delayed: number }> = {};
  for (const algorithm of ALGORITHMS) {
    const { allowed, denied, delayed } = await directRun(policies[algorithm] as never, windowEdgeTrace());
    counts[algorithm] = { allowed, denied, delayed };
  }
  return counts;
}

describe("playground page in headless Chromium", () => {
  it("runs the window-edge preset and shows the core's decisions", async () => {
    await page.goto(`${baseUrl}?preset=pro`);
    await waitForRun(0);
    expect(await page.inputValue("#fixedWindow-limit")).toBe("300");

    // choose the window-edge preset from the menu, as a user would
    const before = await runNumber();
    await page.selectOption("#preset", "window-edge");
    await waitForRun(before);
    expect(new URL(page.url()).search).toBe("?preset=window-edge");
    expect(await page.getByTestId("traffic-summary").textContent()).toBe("200 requests (200 units) over 1.99 s");

    const shown = await shownCounts();
    expect(shown).toEqual(await coreCounts());
    expect(shown).toEqual({
      fixedWindow: { allowed: 200, denied: 0, delayed: 0 },
      slidingWindow: { allowed: 101, denied: 99, delayed: 0 },
      slidingLog: { allowed: 100, denied: 100, delayed: 0 },
      tokenBucket: { allowed: 103, denied: 97, delayed: 0 },
      leakyBucket: { allowed: 23, denied: 177, delayed: 13 },
    });
    expect(await page.getByTestId("retry-max-slidingLog").textContent()).toBe("59");
    // every column has its plot
    for (const algorithm of ALGORITHMS) expect(await page.locator(`#plot-${algorithm} svg rect`).count()).toBeGreaterThan(50);
    await page.screenshot({ path: join(RESULTS, "playground-window-edge.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it("keeps the settings in the URL: an edit is written there and restored on load", async () => {
    // an edit in the form goes to the URL
    const before = await runNumber();
    await page.fill("#slidingWindow-limit", "150");
    await waitForRun(before);
    expect(new URL(page.url()).searchParams.get("slidingWindow.limit")).toBe("150");
    const edited = await coreCounts({ slidingWindowLimit: 150 });
    expect(await shownCounts()).toEqual(edited);

    // loading that URL restores it
    await page.goto(page.url());
    await waitForRun(0);
    expect(await page.inputValue("#slidingWindow-limit")).toBe("150");
    expect(await page.inputValue("#preset")).toBe("window-edge");
    expect(await shownCounts()).toEqual(edited);
    // 100 before the edge, then 50 at once and one more as the previous window slides out
    expect(edited.slidingWindow?.allowed).toBe(151);

    // a hand-written URL parameter is restored too
    await page.goto(`${baseUrl}?preset=window-edge&fixedWindow.limit=50`);
    await waitForRun(0);
    expect(await page.inputValue("#fixedWindow-limit")).toBe("50");
    const shown = await shownCounts();
    expect(shown).toEqual(await coreCounts({ fixedWindowLimit: 50 }));
    expect(shown.fixedWindow).toEqual({ allowed: 100, denied: 100, delayed: 0 });
    await page.screenshot({ path: join(RESULTS, "playground-fixed-window-50.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
