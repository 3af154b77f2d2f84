/**
 * The built packages in the Vercel Edge Runtime: `test/edge-entry.ts` is bundled with esbuild the
 * way Next.js bundles for the edge (edge conditions, `next/server` aliased to its ESM build,
 * nothing marked external, no Node.js platform), then evaluated in `@edge-runtime/vm`, which has
 * no `require`, `process`, `Buffer` or `node:` modules. A bundle that needed any of them would
 * fail to build (a `node:` import cannot be resolved) or fail when evaluated — both shown below
 * with deliberately Node-bound entries — so the decisions made in the VM are the proof.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { EdgeVM } from "@edge-runtime/vm";
import { type RedisServer, startRedisServer } from "@sluice/testing/redis-server";
import { type UpstashBridge, startUpstashBridge } from "@sluice/testing/upstash-bridge";
import { type BuildOptions, build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Seen } from "./edge-entry.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const nextDir = dirname(createRequire(join(packageDir, "package.json")).resolve("next/package.json"));

/** The built files the bundle must use: it never reads the TypeScript sources. */
const DIST = [
  ["@sluice/core", join(packageDir, "../core/dist/index.js")],
  ["@sluice/next", join(packageDir, "dist/index.js")],
  ["@sluice/redis", join(packageDir, "../redis/dist/index.js")],
] as const;

function requireBuilt(): void {
  const missing = DIST.filter(([, file]) => !existsSync(file));
  if (missing.length > 0) {
    throw new Error(
      `[sluice] the edge-runtime test loads the built packages, and ${missing.map(([name, file]) => `${name} (${file})`).join(", ")} ` +
        `${missing.length === 1 ? "is" : "are"} missing. Run \`pnpm run build\` at the repository root first (\`pnpm test\` does).`,
    );
  }
}

/** esbuild options that mirror a Next.js edge bundle. */
function edgeBuildOptions(): BuildOptions {
  return {
    bundle: true,
    write: false,
    format: "iife",
    globalName: "sluiceEdge",
    // not "node": Node's built-in modules are not available, so importing one fails the build
    platform: "neutral",
    target: "es2022",
    // the conditions Next.js resolves with for the edge runtime; "@sluice/source" is not among
    // them, so the workspace packages resolve to their dist
    conditions: ["edge-light", "worker", "browser", "module"],
    mainFields: ["module", "main"],
    // the build-time constants Next.js defines in an edge bundle (its own NextRequest reads one)
    define: {
      "process.env.NODE_ENV": '"production"',
      "process.env.NEXT_RUNTIME": '"edge"',
      "process.env.__NEXT_NO_MIDDLEWARE_URL_NORMALIZE": "false",
    },
    // module comments in the output name paths relative to this package
    absWorkingDir: packageDir,
    logLevel: "silent",
    plugins: [
      {
        // What Next.js does for `next/server` (and `next/server.js`) in a server or edge bundle:
        // each named import is rewritten to the module that defines it (the `cjsRequireOptimizer`
        // / barrel optimisation in next/dist/build/swc/options.js), so only those modules are
        // bundled — here, from Next's ESM build.
        name: "next-server-modularized",
        setup(b) {
          b.onResolve({ filter: /^next\/server(\.js)?$/ }, () => ({ path: "next/server", namespace: "next-server" }));
          b.onLoad({ filter: /.*/, namespace: "next-server" }, () => ({
            contents: [
              'export { NextRequest } from "next/dist/esm/server/web/spec-extension/request.js";',
              'export { NextResponse } from "next/dist/esm/server/web/spec-extension/response.js";',
            ].join("\n"),
            resolveDir: nextDir,
            loader: "js",
          }));
        },
      },
    ],
  };
}

async function bundle(entry: { file: string } | { contents: string }): Promise<string> {
  return (await bundleWithInputs(entry)).code;
}

/** The bundle's code and the files it was built from (relative to this package). */
async function bundleWithInputs(entry: { file: string } | { contents: string }): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    ...edgeBuildOptions(),
    metafile: true,
    ...("file" in entry
      ? { entryPoints: [entry.file] }
      : { stdin: { contents: entry.contents, resolveDir: packageDir, loader: "ts" } }),
  });
  return { code: result.outputFiles?.[0]?.text ?? "", inputs: Object.keys(result.metafile?.inputs ?? {}) };
}

/** The T0 of the memory runs: any instant works, the clock is fixed. */
const T0 = 1_700_000_022_000;

/**
 * The response headers of the i-th request (1-based) of a fresh tokenBucket(3, 1 per 20.25 s),
 * whose `t` (the next token) is `t` s away: ceil(20.25) = 21 with a fixed clock.
 */
function expectedHeaders(i: number, t: number): Record<string, string> {
  const remaining = Math.max(0, 3 - i);
  return {
    "ratelimit-policy": '"edge";q=3;w=61',
    ratelimit: `"edge";r=${remaining};t=${t}`,
    "x-ratelimit-limit": "3",
    "x-ratelimit-remaining": String(remaining),
  };
}

/** The 429's body when the retry is `retryAfter` s away. */
function deniedBody(retryAfter: number): string {
  return JSON.stringify({
    type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: 429,
    detail: `Quota of policy "edge" exceeded; retry after ${retryAfter} seconds.`,
    retryAfter,
    "violated-policies": ["edge"],
  });
}

/**
 * Checks one run: three allowed, then the 429; `resetOk(i)` is the X-RateLimit-Reset check and
 * `tOk` the check of each response's `t` (the 429's `Retry-After` and body say the same): exact with
 * a fixed clock, a range with Redis's clock, whose time runs on while the requests are made.
 */
function expectRun(responses: Seen[], body: string, resetOk: (i: number, value: string) => boolean, tOk: (t: number) => boolean): void {
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 429]);
  responses.forEach((response, index) => {
    const i = index + 1;
    const { "x-ratelimit-reset": reset, ...headers } = response.headers;
    const t = Number(/;t=(\d+)$/.exec(headers.ratelimit ?? "")?.[1]);
    expect(tOk(t), `t=${t} of response ${i}`).toBe(true);
    const picked = Object.fromEntries(Object.entries(headers).filter(([name]) => name.includes("ratelimit") || name === "retry-after"));
    expect(picked).toEqual(i <= 3 ? expectedHeaders(i, t) : { ...expectedHeaders(3, t), "retry-after": String(t) });
    expect(resetOk(Math.min(i, 3), reset ?? "")).toBe(true);
    if (i <= 3) expect(response.body).toBe(body);
    else {
      expect(response.headers["content-type"]).toBe("application/problem+json");
      expect(response.body).toBe(deniedBody(t));
    }
  });
}

describe("@sluice/core, @sluice/next and @sluice/redis (dist) in the Vercel Edge Runtime", () => {
  let code: string;
  let inputs: string[];
  let vm: EdgeVM;
  let server: RedisServer | undefined;
  let bridge: UpstashBridge | undefined;

  beforeAll(async () => {
    requireBuilt();
    ({ code, inputs } = await bundleWithInputs({ file: join(packageDir, "test/edge-entry.ts") }));
    vm = new EdgeVM();
    vm.evaluate(code);
  }, 60_000);

  afterAll(async () => {
    await bridge?.close();
    await server?.stop();
  });

  const call = async <T>(expression: string): Promise<T> =>
    JSON.parse(await (vm.evaluate(`Promise.resolve(${expression}).then((value) => JSON.stringify(value))`) as Promise<string>)) as T;

  it("the bundle is built from dist and the VM has no Node.js globals", async () => {
    // the files esbuild bundled: the dist files, never the sources
    expect(inputs).toEqual(expect.arrayContaining(["../core/dist/index.js", "dist/index.js", "../redis/dist/index.js"]));
    expect(inputs.filter((path) => /(core|next|redis)\/src\//.test(path))).toEqual([]);
    expect(await call("sluiceEdge.globalsSeen()")).toEqual({
      require: "undefined",
      process: "undefined",
      Buffer: "undefined",
      module: "undefined",
      EdgeRuntime: "string",
    });
  });

  it("with a MemoryStore: the proxy and a wrapped route handler allow 3, then answer the 429", async () => {
    const result = await call<{ proxy: Seen[]; route: Seen[] }>(`sluiceEdge.runWithMemory(${T0}, "alice")`);
    const exactReset = (i: number, value: string) => value === String(Math.ceil((T0 + i * 20_250) / 1000));
    expectRun(result.proxy, "", exactReset, (t) => t === 21);
    expect(result.proxy.slice(0, 3).map((r) => r.headers["x-middleware-next"])).toEqual(["1", "1", "1"]);
    expectRun(result.route, JSON.stringify({ path: "/api/items" }), exactReset, (t) => t === 21);
  });

  it("with an UpstashStore: the real @upstash/redis client, over the VM's fetch, to a real redis-server", async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url });
    const startMs = Date.now();
    const result = await call<{ proxy: Seen[]; route: Seen[] }>(
      `sluiceEdge.runWithUpstash(${JSON.stringify(bridge.url)}, ${JSON.stringify(bridge.token)}, "bob")`,
    );
    const endMs = Date.now();
    // Redis's clock: the reset lies between the run's start and end, plus i * 20.25 s
    const resetInRun = (i: number, value: string) =>
      Number(value) >= Math.ceil((startMs + i * 20_250) / 1000) && Number(value) <= Math.ceil((endMs + i * 20_250) / 1000);
    // and the next token is 20.25 s after the run's first request, less the time the run took
    // since (on a loaded machine that can pass a whole second)
    const tInRun = (t: number) => t <= 21 && t >= Math.ceil((20_250 - (endMs - startMs)) / 1000);
    expectRun(result.proxy, "", resetInRun, tInRun);
    expectRun(result.route, JSON.stringify({ path: "/api/items" }), resetInRun, tInRun);
    // every decision went through the bridge: one script call each (EVALSHA, plus one EVAL on the first NOSCRIPT)
    expect(bridge.counts.commands).toBeGreaterThanOrEqual(8);
  });

  describe("the checks have teeth", () => {
    it("a bundle that imports a node: module does not build", async () => {
      await expect(bundle({ contents: 'import { AsyncLocalStorage } from "node:async_hooks"; export const als = AsyncLocalStorage;' })).rejects.toThrow(
        /Could not resolve "node:async_hooks"/,
      );
    });

    it("code that reaches for process or require fails in the VM", async () => {
      const processBound = await bundle({ contents: "export const version = process.version;" });
      expect(() => new EdgeVM().evaluate(processBound)).toThrow(/process is not defined/);
      const requireBound = await bundle({ contents: 'export const fs = require("fs");' }).catch((error: Error) => error);
      // esbuild refuses the require of a Node built-in on a neutral platform
      expect(String(requireBound)).toMatch(/Could not resolve "fs"/);
    });
  });
});
