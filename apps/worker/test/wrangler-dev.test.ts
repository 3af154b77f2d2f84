/**
 * `wrangler dev` as the README runs it: `pnpm --filter @sluice/worker-app dev` (the app's `dev`
 * script, `wrangler dev`, with the pinned wrangler 4.86.0 — the last release that runs on
 * Node.js 20), on a free port, with its local Durable Object in a fresh directory. One route is
 * driven over real HTTP to its 429, with exact headers, and the server is stopped by killing its
 * process group: no wrangler or workerd process may outlive it.
 *
 * Nothing may leave the machine: metrics and the `cf` object fetch are off, the update check's
 * registry and any HTTP(S) proxy point at a local sentinel that must see no request, and wrangler
 * gets an empty config directory (no stored login) and its own temp directory (no cached update
 * check to hide a request).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { type Server, createServer } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const appDir = fileURLToPath(new URL("..", import.meta.url));
const rootDir = fileURLToPath(new URL("../../..", import.meta.url));

/** wrangler bundles the app as users would: @sluice/* resolve to their built dist. */
const DIST = ["core", "hono", "cloudflare"].map((name) => [`@sluice/${name}`, join(rootDir, `packages/${name}/dist/index.js`)] as const);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The pnpm that runs this test (`pnpm vitest ...`, `pnpm test`), else the one on PATH. */
function pnpmCommand(): [string, string[]] {
  const execPath = process.env.npm_execpath;
  if (execPath !== undefined && /pnpm(\.c?js)?$/.test(execPath)) {
    return execPath.endsWith("js") ? [process.execPath, [execPath]] : [execPath, []];
  }
  return ["pnpm", []];
}

/** Processes (pid, command) whose process group is `pgid`. */
function processesInGroup(pgid: number): string[] {
  const out = execFileSync("ps", ["-eo", "pid=,pgid=,comm="], { encoding: "utf8" });
  return out
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 3 && Number(fields[1]) === pgid)
    .map((fields) => `${fields[0]} ${fields.slice(2).join(" ")}`);
}

let child: ChildProcess | undefined;
let output = "";
let exited: Promise<number | null> | undefined;
let base = "";
let stateDir = "";
let sentinel: Server | undefined;
const outbound: string[] = [];

// whatever happens to the test, the server's process group goes with it
process.on("exit", () => {
  if (child?.pid !== undefined) {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

beforeAll(async () => {
  const missing = DIST.filter(([, file]) => !existsSync(file)).map(([name]) => name);
  if (missing.length > 0) {
    throw new Error(`[sluice] wrangler dev bundles the built ${missing.join(", ")}: run \`pnpm run build\` at the repository root first (\`pnpm test\` does).`);
  }

  // a local stand-in for the npm registry and for any proxy: every request it gets is a request that
  // would have left the machine
  sentinel = createServer((request, response) => {
    outbound.push(`${request.method} ${request.url} (host ${request.headers.host})`);
    response.writeHead(503).end();
  });
  sentinel.on("connect", (request, socket) => {
    outbound.push(`CONNECT ${request.url}`);
    socket.destroy();
  });
  await new Promise<void>((resolve) => sentinel?.listen(0, "127.0.0.1", resolve));
  const sentinelUrl = `http://127.0.0.1:${(sentinel.address() as AddressInfo).port}`;

  stateDir = await mkdtemp(join(tmpdir(), "sluice-wrangler-dev-"));
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const [command, prefixArgs] = pnpmCommand();
  const args = [
    ...prefixArgs,
    "--filter",
    "@sluice/worker-app",
    "dev",
    ...["--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort)],
    ...["--persist-to", join(stateDir, "state")],
  ];
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(CLOUDFLARE_|CF_|WRANGLER_|NODE_ENV$|npm_(config_)?registry$)/i.test(name)),
  );
  child = spawn(command, args, {
    cwd: rootDir,
    // its own process group: stopping it stops wrangler, esbuild and workerd with it
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...inherited,
      WRANGLER_SEND_METRICS: "false",
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      WRANGLER_SEND_ERROR_REPORTS: "false",
      // the banner is where wrangler checks the npm registry for a newer version of itself
      WRANGLER_HIDE_BANNER: "true",
      // no stored login, no cached update check
      XDG_CONFIG_HOME: join(stateDir, "config"),
      TMPDIR: stateDir,
      // should anything still check for updates, the registry it asks (npm's configuration, read
      // by rc from npm_registry) is the sentinel
      npm_registry: `${sentinelUrl}/`,
      npm_config_registry: `${sentinelUrl}/`,
      npm_config_update_notifier: "false",
      HTTP_PROXY: sentinelUrl,
      HTTPS_PROXY: sentinelUrl,
      http_proxy: sentinelUrl,
      https_proxy: sentinelUrl,
      NO_PROXY: "127.0.0.1,localhost,::1",
      no_proxy: "127.0.0.1,localhost,::1",
      NO_COLOR: "1",
      FORCE_COLOR: "0",
    },
  });
  exited = new Promise((resolve) => child?.once("close", (code) => resolve(code)));
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);

  base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  let exitCode: number | null | undefined;
  void exited.then((code) => {
    exitCode = code;
  });
  for (;;) {
    if (exitCode !== undefined) throw new Error(`[sluice] wrangler dev exited with ${exitCode}:\n${output}`);
    if (/Ready on http:\/\/127\.0\.0\.1:\d+/.test(output)) {
      try {
        // GET / is not limited: readiness costs no quota
        if ((await fetch(`${base}/`)).status === 200) break;
      } catch {
        // not answering yet
      }
    }
    if (Date.now() > deadline) throw new Error(`[sluice] wrangler dev did not answer within 60 s:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, 90_000);

afterAll(async () => {
  if (child?.pid !== undefined && processesInGroup(child.pid).length > 0) {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  await new Promise<void>((resolve) => (sentinel === undefined ? resolve() : sentinel.close(() => resolve())));
  if (stateDir !== "") await rm(stateDir, { recursive: true, force: true });
}, 30_000);

describe("pnpm --filter @sluice/worker-app dev (wrangler dev 4.86.0)", () => {
  it("serves the app in workerd: 3 allowed, then the 429, with exact headers and body", async () => {
    const seen: { status: number; headers: Record<string, string>; body: string }[] = [];
    const startMs = Date.now();
    // no CF-Connecting-IP from the client: wrangler sets it from the socket, as Cloudflare's edge does
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${base}/api/hello`);
      seen.push({ status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() });
    }
    const endMs = Date.now();
    // the four requests ran well within a second of each other, so every relative value is exact
    expect(endMs - startMs).toBeLessThan(900);

    expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 429]);
    const policy = '"burst";q=3;w=30, "per-minute";q=5;w=60';
    const names = ["content-type", "ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "retry-after"];
    const limitHeaders = seen.map(({ headers }) => Object.fromEntries(Object.entries(headers).filter(([name]) => names.includes(name))));
    expect(limitHeaders).toEqual([
      { "content-type": "application/json", "ratelimit-policy": policy, ratelimit: '"burst";r=2;t=10, "per-minute";r=4;t=60', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2" },
      { "content-type": "application/json", "ratelimit-policy": policy, ratelimit: '"burst";r=1;t=10, "per-minute";r=3;t=60', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "1" },
      { "content-type": "application/json", "ratelimit-policy": policy, ratelimit: '"burst";r=0;t=10, "per-minute";r=2;t=60', "x-ratelimit-limit": "3", "x-ratelimit-remaining": "0" },
      {
        "content-type": "application/problem+json",
        "ratelimit-policy": policy,
        ratelimit: '"burst";r=0;t=10, "per-minute";r=2;t=60',
        "x-ratelimit-limit": "3",
        "x-ratelimit-remaining": "0",
        "retry-after": "10",
      },
    ]);
    // X-RateLimit-Reset (epoch seconds): the bucket is full again 10 s per token spent after the first request
    seen.forEach(({ headers }, i) => {
      const tokens = Math.min(i + 1, 3);
      const reset = Number(headers["x-ratelimit-reset"]);
      expect(reset).toBeGreaterThanOrEqual(Math.ceil((startMs + tokens * 10_000) / 1000));
      expect(reset).toBeLessThanOrEqual(Math.ceil((endMs + tokens * 10_000) / 1000));
    });
    expect(seen.slice(0, 3).map((s) => JSON.parse(s.body))).toEqual([2, 1, 0].map((remaining) => ({ hello: "world", remaining, policy: "burst" })));
    expect(JSON.parse(seen[3]?.body ?? "")).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: 'Quota of policy "burst" exceeded; retry after 10 seconds.',
      retryAfter: 10,
      "violated-policies": ["burst"],
    });
    // a client with another address has its own quota
    const other = await fetch(`${base}/api/hello`, { headers: { "cf-connecting-ip": "198.51.100.20" } });
    expect(other.status).toBe(200);
    expect(other.headers.get("x-ratelimit-remaining")).toBe("2");
  });

  it("asked nothing of the network: no request reached the registry or proxy sentinel, no login", () => {
    expect(outbound).toEqual([]);
    expect(output).not.toMatch(/update available|newer version|log ?in|oauth|dash\.cloudflare\.com/i);
    expect(output).toMatch(/env\.SLUICE \(SluiceLimiter\)\s+Durable Object\s+local/);
  });

  it("stops with its process group: nothing (no workerd) is left", async () => {
    const pgid = child?.pid as number;
    expect(processesInGroup(pgid).some((p) => p.endsWith("workerd"))).toBe(true);
    process.kill(-pgid, "SIGTERM");
    const timer = setTimeout(() => {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }, 10_000);
    await exited;
    clearTimeout(timer);
    // the group's other members (workerd, esbuild) may take a moment after the leader
    const deadline = Date.now() + 10_000;
    while (processesInGroup(pgid).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(processesInGroup(pgid)).toEqual([]);
    await expect(fetch(`${base}/`)).rejects.toThrow();
  }, 30_000);
});
