/**
 * The quick starts' files and the getting-started pages agree: every page imports only files that
 * exist, every file a test runs is shown on a page, and the install lines name tarballs that
 * `pnpm pack:all` makes and the versions the pages promise. No process is started here.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { QUICK_START_IDS, ROOT_DIR, SNIPPETS_DIR, loadQuickStart, tarballNames } from "../src/harness.js";

const PAGES_DIR = join(ROOT_DIR, "apps/docs/getting-started");
const PAGES = ["index", "node", "redis", "upstash", "bun", "deno", "workers", "next", "vercel-edge"];

/** `<<< @/snippets/quickstart/<path>` imports of a page (title and options dropped). */
function importsOf(page: string): string[] {
  const markdown = readFileSync(join(PAGES_DIR, `${page}.md`), "utf8");
  return [...markdown.matchAll(/^<<< @\/snippets\/quickstart\/(\S+?)(?:\s*\[[^\]]*\])?\s*$/gm)].map((m) => m[1] as string);
}

describe("the quick starts' files", () => {
  it("are one directory per quick start, each with install.sh, one command in run.sh and its project files", () => {
    expect(readdirSync(SNIPPETS_DIR).sort()).toEqual([...QUICK_START_IDS].sort());
    for (const id of QUICK_START_IDS) expect(loadQuickStart(id).files.length, id).toBeGreaterThan(0);
  });

  it("install from $SLUICE_TARBALLS only tarballs that pnpm pack:all makes, with @sluice/core beside every other", () => {
    const names = tarballNames();
    for (const id of QUICK_START_IDS) {
      const install = loadQuickStart(id).install;
      const used = [...install.matchAll(/"\$SLUICE_TARBALLS\/([^"]+)"/g)].map((m) => m[1] as string);
      expect(used.length, id).toBeGreaterThan(0);
      for (const tarball of used) expect(names, `${id}: ${tarball}`).toContain(tarball);
      // vercel-edge adds to the Next.js 15 project, which has core already
      if (id !== "vercel-edge") expect(used, id).toContain(names.find((n) => n.startsWith("sluice-core-")));
    }
  });

  it("pin what a newer release would break: wrangler 4.86.0 (Node.js 20), TypeScript 5.9.3 for Next.js 15", () => {
    expect(loadQuickStart("workers").install).toMatch(/^pnpm add -D wrangler@4\.86\.0 /m);
    expect(loadQuickStart("next15").install).toMatch(/ next@15\.\d+\.\d+ /);
    expect(loadQuickStart("next15").install).toMatch(/^pnpm add -D typescript@5\.9\.3 /m);
    expect(loadQuickStart("next16").install).toMatch(/ next@16\.\d+\.\d+ /);
  });
});

describe("the getting-started pages", () => {
  it("are the pages the site's sidebar links to", () => {
    expect(readdirSync(PAGES_DIR).sort()).toEqual(PAGES.map((p) => `${p}.md`).sort());
  });

  it("import only files that exist, and every file of every quick start (steps and sources)", () => {
    const all = QUICK_START_IDS.flatMap((id) => {
      const { files } = loadQuickStart(id);
      return ["install.sh", "run.sh", ...files].map((file) => `${id}/${file}`);
    }).sort();
    const imported = PAGES.flatMap(importsOf);
    expect(imported.filter((path) => !all.includes(path))).toEqual([]);
    expect(all.filter((path) => !imported.includes(path))).toEqual([]);
  });

  it("never write a quick start's code inline (a ts block would not be the file the test runs)", () => {
    for (const page of PAGES) {
      const markdown = readFileSync(join(PAGES_DIR, `${page}.md`), "utf8");
      expect(markdown.match(/^```(ts|typescript|js|toml|json)\b/gm), relative(ROOT_DIR, join(PAGES_DIR, `${page}.md`))).toBeNull();
    }
  });
});
