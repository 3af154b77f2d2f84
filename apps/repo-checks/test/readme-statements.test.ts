/**
 * What the READMEs and the site say about the repository is true of it:
 *
 * - the root README is a landing page of at most 250 lines that says early that nothing is on the
 *   npm registry and how to install from the tarballs, gives the two commands as the repository
 *   runs them (the pnpm of `packageManager`) and the quick loop, gives its quick start exactly as
 *   the files apps/quickstarts runs (apps/docs/snippets/quickstart/hono-node), and lists every
 *   package, every algorithm factory and every folder of the repository;
 * - every `pnpm <script>` a README or a page names is a script of the root package.json;
 * - every relative link of every README (root, packages/*, apps/*) points to a file or folder
 *   that exists, and a link to a Markdown heading to a heading that exists (the site's own links
 *   are checked on the built site by the docs project);
 * - statements that restate code: the window-edge figure's columns and counts, the demo client's
 *   number of calls.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { POLICY_KINDS } from "@sluice/core/store";
import { describe, expect, it } from "vitest";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const read = (path: string) => readFileSync(join(rootDir, path), "utf8");
const readme = read("README.md");
const rootManifest = JSON.parse(read("package.json")) as { packageManager: string; scripts: Record<string, string> };

/** Folders of a group (packages, apps) that hold a package.json. */
const folders = (group: string) =>
  readdirSync(join(rootDir, group), { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(rootDir, group, e.name, "package.json")))
    .map((e) => e.name)
    .sort();

/** The root README, every package's and app's README, and the site's hand-written pages. */
function markdownFiles(): string[] {
  const found = ["README.md", "CHANGELOG.md"];
  for (const group of ["packages", "apps"]) for (const name of folders(group)) if (existsSync(join(rootDir, group, name, "README.md"))) found.push(`${group}/${name}/README.md`);
  const walk = (dir: string): string[] =>
    readdirSync(join(rootDir, dir), { withFileTypes: true }).flatMap((e) => {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) return ["node_modules", "dist", "api", "public", "snippets", ".vitepress"].includes(e.name) ? [] : walk(path);
      return e.name.endsWith(".md") ? [path] : [];
    });
  return [...found, ...walk("apps/docs")];
}

/** Markdown without its fenced code blocks (links and headings inside code are not links). */
const prose = (markdown: string) => markdown.replace(/^ {0,3}(`{3,})[^\n]*\n[\s\S]*?^ {0,3}\1`*\s*$/gm, "");

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");

const anchors = (markdown: string) => new Set(prose(markdown).match(/^#{1,6} .+$/gm)?.map((h) => slug(h.replace(/^#+ /, ""))) ?? []);

describe("the root README", () => {
  it("is a landing page of at most 250 lines", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
  });

  it("says early that nothing is on the npm registry, and how to install from the tarballs", () => {
    const top = readme.split("\n").slice(0, 25).join("\n");
    expect(top).toContain("Not on the npm registry yet");
    expect(top).toContain("pnpm pack:all");
    expect(top).toMatch(/tarballs\/sluice-core-\d+\.\d+\.\d+\.tgz/);
    const version = (JSON.parse(read("packages/core/package.json")) as { version: string }).version;
    expect(top).toContain(`sluice-core-${version}.tgz`);
  });

  it("gives the two commands as the repository runs them, and the quick loop", () => {
    const pnpm = rootManifest.packageManager.replace(/^pnpm@/, "");
    expect(readme).toContain(`npm i -g pnpm@${pnpm} && pnpm install && pnpm start`);
    expect(readme).toMatch(/^pnpm test +# every test$/m);
    expect(readme).toContain("`pnpm test:unit`");
    // what `pnpm test` needs from the machine is what its preflight installs
    expect(read("scripts/preflight.mjs")).toMatch(/redis-server[\s\S]*chromium/);
    for (const needed of ["`redis-server`", "`chromium`"]) expect(readme).toContain(needed);
  });

  it("gives the Hono-on-Node quick start exactly as its files in apps/docs/snippets, which the quick-start tests run", () => {
    const section = /## Quick start: Hono on Node\.js\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? "";
    const blocks = [...section.matchAll(/^```(\w+)[^\n]*\n([\s\S]*?)^```$/gm)].map(([, language, code]) => ({ language, code }));
    const snippet = (file: string) => read(`apps/docs/snippets/quickstart/hono-node/${file}`);
    expect(blocks.slice(0, 3)).toEqual([
      { language: "sh", code: snippet("install.sh") },
      { language: "ts", code: snippet("server.ts") },
      { language: "sh", code: snippet("run.sh") },
    ]);
    expect(section).toContain("`server.ts`:");
  });

  it("lists every package, every algorithm factory and every folder of the repository", () => {
    for (const name of folders("packages")) {
      const manifest = JSON.parse(read(`packages/${name}/package.json`)) as { name: string; private?: boolean };
      expect(readme, manifest.name).toContain(manifest.private === true ? `[\`packages/${name}\`](packages/${name})` : `[\`${manifest.name}\`](packages/${name})`);
    }
    // every kind of core's registry (a new kind needs its row): its factory has the kind's name
    expect(POLICY_KINDS.length).toBeGreaterThanOrEqual(6);
    for (const factory of POLICY_KINDS) {
      expect(readme, factory).toMatch(new RegExp(`^\\| \`${factory}\\(\\{`, "m"));
      expect(read("packages/core/src/index.ts"), factory).toMatch(new RegExp(`\\b${factory},`));
    }
    const repository = /## Repository\n\n```text\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    for (const group of ["packages", "apps"]) for (const name of folders(group)) expect(repository, `${group}/${name}`).toContain(`${group}/${name}`);
  });
});

describe("every README and page", () => {
  const files = markdownFiles();

  it("names only root scripts after `pnpm`", () => {
    const named = files.flatMap((file) =>
      // a command: at the start of a line (in a code block), in a code span, or after `&&`
      [...read(file).matchAll(/(?:^|`|&& )pnpm (?:-s |--silent )?(?:run )?([a-z][\w:-]*)/gm)].map((m) => ({ file, script: m[1] as string })),
    );
    // pnpm's own commands, and those that run a package's script with --filter
    const commands = new Set(["add", "install", "i", "exec", "dlx", "pack", "init", "vitest", "rebuild", "approve-builds", "remove", "create", "why", "list"]);
    const unknown = named.filter(({ script }) => !commands.has(script) && rootManifest.scripts[script] === undefined).map(({ file, script }) => `${file}: pnpm ${script}`);
    expect([...new Set(unknown)]).toEqual([]);
  });

  it("links only to files, folders and headings that exist (READMEs; the site's links are checked on the built site)", () => {
    const broken: string[] = [];
    for (const file of files.filter((f) => f.endsWith("README.md") || f === "CHANGELOG.md")) {
      for (const [, target] of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target as string) || (target as string).startsWith("#")) {
          if ((target as string).startsWith("#") && !anchors(read(file)).has((target as string).slice(1))) broken.push(`${file}: ${target}`);
          continue;
        }
        const [path, anchor] = (target as string).split("#") as [string, string | undefined];
        const resolved = join(dirname(join(rootDir, file)), decodeURIComponent(path));
        if (!existsSync(resolved)) {
          broken.push(`${file}: ${target} (${relative(rootDir, resolved)} does not exist)`);
          continue;
        }
        if (anchor !== undefined && statSync(resolved).isFile() && resolved.endsWith(".md") && !anchors(readFileSync(resolved, "utf8")).has(anchor)) {
          broken.push(`${file}: ${target} (no heading #${anchor})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe("statements that restate code", () => {
  it("the window-edge figure shows the columns and counts the algorithms page says it shows", () => {
    const page = read("apps/docs/concepts/algorithms.md");
    const svg = read("docs/playground-window-edge.svg");
    const texts = [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1] as string);
    const titles = texts.filter((t) => /^(Fixed window|Sliding window|Sliding log|Token bucket|Leaky bucket)$/.test(t));
    expect(titles).toEqual(["Fixed window", "Sliding window", "Token bucket"]);
    expect(page).toContain("The figure shows the\nfixed window, the sliding window and the token bucket.");
    const caption = texts.find((t) => t.startsWith("Allowed:")) ?? "";
    const paragraph = /The case that makes people leave fixed windows[\s\S]*?\n\n/.exec(page)?.[0].replace(/\s+/g, " ") ?? "";
    const counts = [...caption.matchAll(/(fixed window|sliding window|token bucket) (\d+)/g)].map(([, algorithm, count]) => [algorithm, count]);
    expect(counts).toHaveLength(3);
    for (const [algorithm, count] of counts) {
      expect(paragraph, `${algorithm} ${count}`).toMatch(new RegExp(`\\*\\*${algorithm}\\*\\*[^.]*admits[^.]*?${count}`, "i"));
    }
  });

  it("the client page's calls to the demo are the demo client's default", () => {
    const defaultRequests = /Number\(process\.env\.REQUESTS \|\| (\d+)\)/.exec(read("apps/demo/src/client.ts"))?.[1];
    expect(defaultRequests).toBeDefined();
    const page = read("apps/docs/packages/client.md");
    expect(page).toContain(`// ${defaultRequests} calls to the demo on the free plan`);
    expect(page).toContain(`for (let i = 1; i <= ${defaultRequests}; i++)`);
    expect(page).toContain(`(${defaultRequests} requests with a free-plan`);
  });
});
