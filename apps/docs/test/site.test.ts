/**
 * The documentation site as `pnpm docs:build` makes it: TypeDoc's API reference, the playground
 * and VitePress, built into a temporary directory. Then:
 *
 * - every page the site promises is there (each package, the API page of `RateLimiter`, …);
 * - every internal link and fragment of every page resolves: linkinator crawls the built files
 *   from the home page (external links are not fetched: no network);
 * - headless Chromium (playwright-core over Debian's `chromium`, no browser download) opens the
 *   home page and the playground page served over HTTP, and the playground draws its plots.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromiumPath } from "@sluice/testing/chromium";
import { LinkChecker, LinkState } from "linkinator";
import { type Browser, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const docsDir = fileURLToPath(new URL("..", import.meta.url));
const RESULTS = join(docsDir, "test-results");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".css": "text/css",
  ".svg": "image/svg+xml",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".png": "image/png",
};

/** A static server for the built site, resolving `/a/b` and `/a/b/` as a host of VitePress output does. */
function serve(root: string): Promise<Server> {
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? "/", "http://localhost").pathname);
    const file = normalize(join(root, path));
    const candidates = [file, `${file}.html`, join(file, "index.html")];
    const found = file.startsWith(root) ? candidates.find((c) => existsSync(c) && statSync(c).isFile()) : undefined;
    if (found === undefined) {
      response.writeHead(404, { "content-type": TYPES[".html"] });
      response.end(readFileSync(join(root, "404.html")));
      return;
    }
    response.writeHead(200, { "content-type": TYPES[extname(found)] ?? "application/octet-stream" });
    response.end(readFileSync(found));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

let outDir = "";
let buildMs = 0;
let server: Server | undefined;
let baseUrl = "";

beforeAll(async () => {
  outDir = await mkdtemp(join(tmpdir(), "sluice-docs-"));
  const started = performance.now();
  // what `pnpm docs:build` runs, into a directory of the test's own
  await run(process.execPath, ["--import", "tsx", "scripts/prepare.ts"], { cwd: docsDir, maxBuffer: 64 * 1024 * 1024 });
  await run(process.execPath, [join(docsDir, "node_modules", "vitepress", "bin", "vitepress.js"), "build", "--outDir", outDir], {
    cwd: docsDir,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NODE_ENV: "production" },
  });
  buildMs = performance.now() - started;
  server = await serve(outDir);
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  if (outDir !== "") await rm(outDir, { recursive: true, force: true });
});

/** Every HTML page of the built site, relative to its root. */
function pages(dir = outDir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return pages(path);
    return entry.name.endsWith(".html") ? [relative(outDir, path)] : [];
  });
}

describe("the documentation site", () => {
  it("is built with a page per package, the concepts, the API reference and the other pages", () => {
    console.log(`[docs] site built in ${(buildMs / 1000).toFixed(1)} s: ${pages().length} pages`);
    const all = new Set(pages());
    for (const pkg of ["core", "hono", "next", "redis", "cloudflare", "otel", "client", "testing"]) expect(all, pkg).toContain(`packages/${pkg}.html`);
    for (const page of ["index.html", "benchmarks.html", "migration.html", "playground.html", "changelog.html", "contributing.html", "api/index.html"]) {
      expect(all, page).toContain(page);
    }
    const rateLimiter = readFileSync(join(outDir, "api/@sluice/core/classes/RateLimiter.html"), "utf8");
    for (const method of ["limit()", "peek()", "reset()", "refund()", "release()"]) expect(rateLimiter, method).toContain(method);
    // "Defined in" links name the file in the repository, as its text does
    expect(rateLimiter).toMatch(/href="https:\/\/github\.com\/sluice-js\/sluice\/blob\/main\/packages\/core\/src\/limiter\/index\.ts#L\d+"/);
    for (const entry of ["@sluice/core", "@sluice/core/store", "@sluice/core/adapter", "@sluice/redis", "@sluice/cloudflare", "@sluice/hono", "@sluice/next", "@sluice/otel", "@sluice/client"]) {
      expect(all, entry).toContain(`api/${entry}/index.html`);
    }
    // the playground page embeds the built playground
    expect(all).toContain("playground-app/index.html");
  });

  it("has no broken internal link or fragment", async () => {
    const checker = new LinkChecker();
    const result = await checker.check({
      path: outDir,
      recurse: true,
      checkFragments: true,
      // no network: external links are not fetched
      linksToSkip: ["^(?!http://localhost)[a-z]+:"],
      // a loaded machine may drop a connection to the checker's own static server (status 0): a
      // link is broken only when it fails again, not when one request of it did
      concurrency: 8,
      retryErrors: true,
      retryErrorsCount: 3,
      retryErrorsJitter: 200,
    });
    const broken = result.links.filter((link) => link.state === LinkState.BROKEN).map((link) => `${link.url} (on ${link.parent ?? "?"}, ${link.status ?? "no status"})`);
    expect(broken).toEqual([]);
    const checked = result.links.filter((link) => link.state === LinkState.OK);
    // (functions, type aliases and variables are sections of their module's page: about 250 links)
    expect(checked.length).toBeGreaterThan(200);
    // ~3 s alone; a minute or more on a loaded machine (every page and asset over HTTP, fragments parsed)
  }, 240_000);

  describe("in headless Chromium", () => {
    let browser: Browser;
    let page: Page;
    const pageErrors: string[] = [];

    beforeAll(async () => {
      browser = await chromium.launch({
        executablePath: chromiumPath("The docs site's browser test"),
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
        timeout: 30_000,
      });
      page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      page.setDefaultTimeout(30_000);
      page.on("pageerror", (error) => pageErrors.push(String(error)));
      page.on("console", (message) => {
        if (message.type() === "error") pageErrors.push(message.text());
      });
      page.on("response", (response) => {
        if (response.status() >= 400) pageErrors.push(`${response.status()} ${response.url()}`);
      });
      await mkdir(RESULTS, { recursive: true });
    });

    afterAll(async () => {
      await browser?.close();
    });

    it("renders the home page", async () => {
      pageErrors.length = 0;
      await page.goto(baseUrl);
      await expect.poll(() => page.locator(".VPHero .name").textContent()).toContain("Sluice");
      expect(await page.locator(".VPFeature").count()).toBeGreaterThanOrEqual(4);
      // the navigation leads into the site
      await page.getByRole("link", { name: "Getting started" }).first().click();
      await page.waitForURL(/getting-started\//);
      expect(await page.locator("main h1").first().textContent()).not.toBe("");
      await page.screenshot({ path: join(RESULTS, "home.png") });
      expect(pageErrors).toEqual([]);
    });

    it("shows the playground working on the playground page", async () => {
      pageErrors.length = 0;
      await page.goto(new URL("playground.html", baseUrl).href);
      expect(await page.locator("h1").first().textContent()).toContain("Playground");
      const frame = page.frameLocator("iframe.playground");
      await expect.poll(() => frame.locator("#status").getAttribute("data-state")).toBe("done");
      // the window-edge preset: the core's own decisions (the playground's tests pin them)
      expect(await frame.getByTestId("allowed-fixedWindow").textContent()).toBe("200");
      expect(await frame.getByTestId("allowed-slidingWindow").textContent()).toBe("101");
      expect(await frame.getByTestId("allowed-slidingLog").textContent()).toBe("100");
      for (const algorithm of ["fixedWindow", "slidingWindow", "slidingLog", "tokenBucket", "leakyBucket"]) {
        expect(await frame.locator(`#plot-${algorithm} svg rect`).count(), algorithm).toBeGreaterThan(50);
      }
      await page.screenshot({ path: join(RESULTS, "playground.png"), fullPage: true });
      expect(pageErrors).toEqual([]);
    });
  });
});
