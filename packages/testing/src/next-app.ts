/**
 * A Next.js app for real, for the apps' tests: `next build`, then `next start` on a free port,
 * each in its own process group (stopping it stops whatever it forked), with real HTTP requests
 * and helpers to assert rate-limit headers exactly.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { expect } from "vitest";
import { freePort } from "./redis-server.js";

/** Every `next` process started here, killed (with its group) if the test process exits first. */
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

/**
 * Throws, naming the command to run, unless every `@sluice/<name>` the app uses is built: a Next.js
 * app resolves the workspace packages to their `dist` (the `import` condition).
 */
export function requireBuilt(appDir: string, names: readonly string[]): void {
  const missing = names.filter((name) => !existsSync(join(appDir, `../../packages/${name}/dist/index.js`)));
  if (missing.length > 0) {
    throw new Error(
      `[sluice] ${appDir} resolves the workspace packages to their built dist, and ${missing.map((name) => `@sluice/${name}`).join(", ")} ` +
        `${missing.length === 1 ? "is" : "are"} not built. Run \`pnpm run build\` at the repository root first (\`pnpm test\` does).`,
    );
  }
}

/** The environment of `next build` / `next start`: no Upstash unless asked, no test NODE_ENV, no telemetry. */
export function nextEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // vitest sets NODE_ENV=test; next build and next start set their own
  const dropped = new Set(["NODE_ENV", ...(extra.UPSTASH_REDIS_REST_URL === undefined ? ["UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN"] : [])]);
  const inherited = Object.entries(process.env).filter(([name]) => !dropped.has(name));
  // (Next.js's types declare NODE_ENV on ProcessEnv as required; this environment has none on purpose)
  return { ...Object.fromEntries(inherited), NEXT_TELEMETRY_DISABLED: "1", ...extra } as unknown as NodeJS.ProcessEnv;
}

interface NextProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs the app's own `next` (its node_modules: Next.js 15 in one app, 16 in another). */
function spawnNext(appDir: string, args: string[], env: NodeJS.ProcessEnv): NextProcess {
  const nextBin = createRequire(join(appDir, "package.json")).resolve("next/dist/bin/next");
  // its own process group, so that stopping it stops whatever it forked
  const child = spawn(process.execPath, [nextBin, ...args], { cwd: appDir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let output = "";
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<number | null>((resolve) => {
    child.once("close", (code) => {
      children.delete(child);
      resolve(code);
    });
  });
  return { child, output: () => output, exited };
}

/** `next build` in `appDir`; resolves to how long it took (ms) and what it printed. */
export async function nextBuild(appDir: string, env: NodeJS.ProcessEnv = nextEnv()): Promise<{ ms: number; output: string }> {
  const startedAt = performance.now();
  const build = spawnNext(appDir, ["build"], env);
  const code = await build.exited;
  if (code !== 0) throw new Error(`[sluice] next build exited with ${code}:\n${build.output()}`);
  return { ms: performance.now() - startedAt, output: build.output() };
}

export interface NextServer {
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** Kills the server's process group (SIGTERM, SIGKILL after 5 s) and waits for it. */
  stop(): Promise<void>;
}

/**
 * `next start` on a free port of 127.0.0.1; resolves once `readyPath` answers 200 (pick a path
 * that costs no quota).
 */
export async function nextStart(appDir: string, options: { readyPath: string; env?: Record<string, string> }): Promise<NextServer> {
  const port = await freePort();
  const server = spawnNext(appDir, ["start", "--port", String(port), "--hostname", "127.0.0.1"], nextEnv(options.env));
  const base = `http://127.0.0.1:${port}`;
  let exitCode: number | null | undefined;
  void server.exited.then((code) => {
    exitCode = code;
  });
  const stop = async () => {
    if (exitCode !== undefined || server.child.pid === undefined) return;
    process.kill(-server.child.pid, "SIGTERM");
    const timer = setTimeout(() => {
      try {
        process.kill(-(server.child.pid as number), "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }, 5_000);
    await server.exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`[sluice] next start exited with ${exitCode}:\n${server.output()}`);
    try {
      if ((await fetch(`${base}${options.readyPath}`)).status === 200) return { base, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`[sluice] next start did not answer within 60 s:\n${server.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A response as seen by the tests: status, headers (lower-case names), body text. */
export interface Seen {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export async function get(base: string, path: string, apiKey: string): Promise<Seen> {
  const response = await fetch(`${base}${path}`, { headers: { "x-api-key": apiKey } });
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

const RATE_LIMIT_HEADERS = ["ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "retry-after"];

/** The rate-limit headers of a response, but X-RateLimit-Reset (an epoch: see {@link sequence}). */
export function rateLimitHeaders(seen: Seen): Record<string, string> {
  return Object.fromEntries(Object.entries(seen.headers).filter(([name]) => RATE_LIMIT_HEADERS.includes(name)));
}

/** The default 429 body, exactly. */
export function problem(policy: string, retryAfterSeconds: number): string {
  return JSON.stringify({
    type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: 429,
    detail: `Quota of policy "${policy}" exceeded; retry after ${retryAfterSeconds} seconds.`,
    retryAfter: retryAfterSeconds,
    "violated-policies": [policy],
  });
}

/** The responses of {@link sequence}, with how long the sequence took (ms, this process's clock). */
export type Sequence = Seen[] & { readonly elapsedMs: number };

/**
 * Sends `count` requests with one fresh key (after one warm-up request with another key, so the
 * route is loaded) and checks X-RateLimit-Reset against the binding policy's period: the i-th
 * request's reset is i periods after the first one's `now`. The result carries `elapsedMs`, the
 * time from the first request to the last answer, for {@link countdown}.
 */
export async function sequence(base: string, path: string, apiKey: string, count: number, periodMs: number): Promise<Sequence> {
  await get(base, path, `${apiKey}-warm-up`);
  const startMs = Date.now();
  const out: Seen[] = [];
  for (let i = 0; i < count; i++) out.push(await get(base, path, apiKey));
  const endMs = Date.now();
  out.forEach((seen, index) => {
    const units = Math.min(index + 1, count - 1);
    const reset = Number(seen.headers["x-ratelimit-reset"]);
    expect(reset).toBeGreaterThanOrEqual(Math.ceil((startMs + units * periodMs) / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil((endMs + units * periodMs) / 1000));
  });
  return Object.assign(out, { elapsedMs: endMs - startMs });
}

/**
 * The `t` of `policy` in each response's `RateLimit` header, for a policy whose quota next grows
 * `periodMs` after the sequence's first request (a bucket's next token): the first response's `t`
 * is exactly `ceil(periodMs / 1000)`, and each later one is what the time since the first request
 * allows — the same value if the sequence took less than `periodMs mod 1000`, else possibly one
 * second less per second taken — never more than the one before. Checked here against the
 * sequence's own `elapsedMs`, so the exact header strings built from these values hold however
 * fast the server answered.
 */
export function countdown(seen: Sequence, policy: string, periodMs: number): number[] {
  const first = Math.ceil(periodMs / 1000);
  const least = Math.max(0, Math.ceil((periodMs - seen.elapsedMs) / 1000));
  const values = seen.map((response, index) => {
    const member = (response.headers.ratelimit ?? "").split(", ").find((m) => m.startsWith(`"${policy}";`));
    const t = Number(/;t=(\d+)$/.exec(member ?? "")?.[1]);
    expect(Number.isSafeInteger(t), `response ${index}: no t for ${policy} in ${JSON.stringify(response.headers.ratelimit)}`).toBe(true);
    return t;
  });
  expect(values[0]).toBe(first);
  values.forEach((t, index) => {
    expect(t).toBeGreaterThanOrEqual(least);
    expect(t).toBeLessThanOrEqual(index === 0 ? first : (values[index - 1] as number));
  });
  return values;
}
