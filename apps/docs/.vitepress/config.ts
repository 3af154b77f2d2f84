import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { type DefaultTheme, defineConfig } from "vitepress";

const docsDir = fileURLToPath(new URL("..", import.meta.url));
const repository = "https://github.com/sluice-js/sluice";

const gettingStarted: DefaultTheme.SidebarItem[] = [
  { text: "Overview and install", link: "/getting-started/" },
  { text: "Node.js with Hono", link: "/getting-started/node" },
  { text: "Node.js with Redis", link: "/getting-started/redis" },
  { text: "Upstash (Redis over HTTP)", link: "/getting-started/upstash" },
  { text: "Bun", link: "/getting-started/bun" },
  { text: "Deno", link: "/getting-started/deno" },
  { text: "Cloudflare Workers", link: "/getting-started/workers" },
  { text: "Next.js 16 and 15", link: "/getting-started/next" },
  { text: "Vercel edge", link: "/getting-started/vercel-edge" },
];

const concepts: DefaultTheme.SidebarItem[] = [
  { text: "Algorithms", link: "/concepts/algorithms" },
  { text: "Decisions", link: "/concepts/decisions" },
  { text: "Several limits", link: "/concepts/several-limits" },
  { text: "Tiers", link: "/concepts/tiers" },
  { text: "Keys and client addresses", link: "/concepts/keys" },
  { text: "Stores", link: "/concepts/stores" },
  { text: "Reservations", link: "/concepts/reservations" },
  { text: "Failure modes and errors", link: "/concepts/failure-modes" },
  { text: "Headers and the 429", link: "/concepts/headers" },
  { text: "Adapters", link: "/concepts/adapters" },
  { text: "Protection", link: "/concepts/protection" },
  { text: "Overrides and manual blocks", link: "/concepts/overrides" },
  { text: "Concurrency", link: "/concepts/concurrency" },
  { text: "Telemetry", link: "/concepts/telemetry" },
];

const packages: DefaultTheme.SidebarItem[] = [
  { text: "@sluice/core", link: "/packages/core" },
  { text: "@sluice/hono", link: "/packages/hono" },
  { text: "@sluice/next", link: "/packages/next" },
  { text: "@sluice/redis", link: "/packages/redis" },
  { text: "@sluice/cloudflare", link: "/packages/cloudflare" },
  { text: "@sluice/otel", link: "/packages/otel" },
  { text: "@sluice/client", link: "/packages/client" },
  { text: "testing (private)", link: "/packages/testing" },
];

const more: DefaultTheme.SidebarItem[] = [
  { text: "Migrating from other limiters", link: "/migration" },
  { text: "Playground", link: "/playground" },
  { text: "Benchmarks", link: "/benchmarks" },
  { text: "Changelog", link: "/changelog" },
  { text: "Contributing", link: "/contributing" },
];

/** The API reference's sidebar: the pages TypeDoc wrote into api/ (see scripts/api.ts), by module and kind. */
function apiSidebar(): DefaultTheme.SidebarItem[] {
  const apiDir = join(docsDir, "api");
  if (!existsSync(join(apiDir, "index.md"))) return [{ text: "API reference", link: "/api/" }];
  const link = (file: string) => `/${relative(docsDir, file).replace(/\\/g, "/").replace(/(^|\/)index\.md$/, "$1").replace(/\.md$/, "")}`;
  const modules: DefaultTheme.SidebarItem[] = [];
  const walk = (dir: string, name: string) => {
    const kinds: DefaultTheme.SidebarItem[] = [];
    for (const entry of readdirSync(dir).sort()) {
      const path = join(dir, entry);
      if (!statSync(path).isDirectory()) continue;
      if (existsSync(join(path, "index.md"))) {
        walk(path, `${name}/${entry}`); // a sub-entry, e.g. @sluice/core/store
        continue;
      }
      const pages = readdirSync(path).filter((f) => f.endsWith(".md"));
      kinds.push({
        text: entry.replace(/-/g, " ").replace(/^./, (c) => c.toUpperCase()),
        collapsed: true,
        items: pages.sort().map((f) => ({ text: f.replace(/\.md$/, ""), link: link(join(path, f)) })),
      });
    }
    modules.push({ text: name, link: link(join(dir, "index.md")), collapsed: true, items: kinds });
  };
  const scope = join(apiDir, "@sluice");
  for (const pkg of readdirSync(scope).sort()) walk(join(scope, pkg), `@sluice/${pkg}`);
  modules.sort((a, b) => (a.text ?? "").localeCompare(b.text ?? ""));
  return [{ text: "API reference", link: "/api/", items: modules }];
}

const version = (JSON.parse(readFileSync(join(docsDir, "../../packages/core/package.json"), "utf8")) as { version: string }).version;

export default defineConfig({
  title: "Sluice",
  description: "Rate limiting for HTTP APIs wherever the Fetch API runs: Node.js, Bun, Deno, Cloudflare Workers, Next.js and Vercel edge.",
  lang: "en-US",
  // no favicon file: an empty icon, so browsers do not ask for /favicon.ico
  head: [["link", { rel: "icon", href: "data:," }]],
  base: process.env.DOCS_BASE ?? "/",
  outDir: "dist",
  cacheDir: ".vitepress/cache",
  srcExclude: ["README.md", "snippets/**", "test/**", "scripts/**", "node_modules/**"],
  lastUpdated: false,
  // every internal link is checked by VitePress at build time, and again on the built site by the docs test
  ignoreDeadLinks: false,
  markdown: { lineNumbers: false },
  vite: {
    // the figures live in the repository's docs/ folder
    server: { fs: { allow: [join(docsDir, "..", "..")] } },
    // docs/benchmarks.md (included by benchmarks.md) names its chart relative to itself
    resolve: { alias: [{ find: /^\.\/benchmarks\.svg$/, replacement: join(docsDir, "..", "..", "docs", "benchmarks.svg") }] },
    // the local search index is one chunk of about 1 MB
    build: { chunkSizeWarningLimit: 2000 },
  },
  themeConfig: {
    nav: [
      { text: "Getting started", link: "/getting-started/" },
      { text: "Concepts", link: "/concepts/algorithms" },
      { text: "Packages", link: "/packages/core" },
      { text: "API", link: "/api/" },
      { text: "Playground", link: "/playground" },
      {
        text: `v${version}`,
        items: [
          { text: "Changelog", link: "/changelog" },
          { text: "Benchmarks", link: "/benchmarks" },
          { text: "Migrating", link: "/migration" },
          { text: "Contributing", link: "/contributing" },
        ],
      },
    ],
    sidebar: {
      "/api/": apiSidebar(),
      "/": [
        { text: "Getting started", items: gettingStarted },
        { text: "Concepts", items: concepts },
        { text: "Packages", items: packages },
        { text: "More", items: [...more, { text: "API reference", link: "/api/" }] },
      ],
    },
    outline: { level: [2, 3] },
    search: { provider: "local" },
    socialLinks: [{ icon: "github", link: repository }],
    footer: { message: "MIT licensed." },
  },
});
