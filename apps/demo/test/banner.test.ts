/**
 * The startup banner keeps its promises: every command it prints under "Try:" is run as a user
 * pasting them in order would — by bash, with curl, against the real demo process — and each
 * group's output is what the comment above it says.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoProcess, startDemo } from "./demo-process.js";

const run = promisify(execFile);

let demo: DemoProcess | undefined;

beforeAll(async () => {
  demo = await startDemo();
});

afterAll(async () => {
  expect(await demo?.stop()).toBe(0);
});

interface Group {
  comment: string;
  commands: string[];
}

/** The "Try:" section of the banner: each `# comment` and the commands under it, in order. */
function groups(banner: string): Group[] {
  const start = banner.indexOf("\nTry:\n");
  const end = banner.indexOf("\nPress Ctrl+C to stop.");
  expect(start).toBeGreaterThan(0);
  expect(end).toBeGreaterThan(start);
  const out: Group[] = [];
  for (const raw of banner.slice(start + "\nTry:\n".length, end).split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    if (line.startsWith("# ")) out.push({ comment: line.slice(2), commands: [] });
    else out.at(-1)?.commands.push(line);
  }
  return out;
}

/** Runs one pasted line in bash, as a terminal would (no proxy between curl and the demo). */
async function paste(command: string): Promise<string> {
  // (Next.js's types, in the same root type-check, declare NODE_ENV required on ProcessEnv)
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(https?|all|no)_proxy$/i.test(name))) as NodeJS.ProcessEnv;
  const { stdout } = await run("bash", ["-c", command], { env, timeout: 15_000 });
  return stdout;
}

/** `curl -i` output: the status line, the headers (names in lower case) and the body. */
function response(text: string): { status: string; headers: Record<string, string>; body: string } {
  const [head = "", body = ""] = text.split(/\r?\n\r?\n/, 2);
  const [status = "", ...lines] = head.split(/\r?\n/);
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  return { status, headers, body };
}

describe("the banner's commands, pasted in order", () => {
  it("do what the banner says", async () => {
    const banner = demo?.output() ?? "";
    const base = demo?.base ?? "";
    const tried = groups(banner);
    // what it promises, in its own words
    expect(tried.map((g) => g.comment)).toEqual([
      "never limited",
      "who you are and what is left of your quota, with the rate-limit headers (a peek: spends nothing)",
      "the free plan's burst is 10: ten calls in a row pass, the 11th gets 429",
      "an unknown key gets 401",
      "login counts failed attempts: after 5 in 5 minutes, the 6th gets 429 and blocks the address for 15 minutes",
      "at most 2 exports in flight per key (each takes 2 s here): of three started 0.3 s apart, the third gets 429 at once",
      "admin: ten times the free key's quotas for an hour; whoami then shows q=100, q=300 and q=10000",
      "admin: block the free key for 15 minutes: its calls get 429 with Retry-After: 900; unblocked, they pass again",
      "admin: back to the free plan's own quotas (override null clears it)",
      "admin: without the admin key, 401",
    ]);
    // the admin key: made at this start (no SLUICE_ADMIN_KEY here), printed, and in every admin line but the 401's
    const adminKey = /\nAdmin key \(Authorization: Bearer <key> on POST \/admin\/overrides and POST \/admin\/blocks; random, made at this start; set SLUICE_ADMIN_KEY to choose it\):\n {2}(\S+)\n/.exec(banner)?.[1];
    expect(adminKey).toMatch(/^[0-9a-f]{32}$/);
    const adminLines = tried.slice(6).flatMap((g) => g.commands.filter((c) => c.includes("/admin/")));
    expect(adminLines.map((c) => c.includes(`-H "Authorization: Bearer ${adminKey}"`))).toEqual([true, true, true, true, false]);
    for (const group of tried) for (const command of group.commands) expect(command).toContain(base);

    const outputs: string[][] = [];
    for (const group of tried) {
      const seen: string[] = [];
      for (const command of group.commands) seen.push(await paste(command));
      outputs.push(seen);
    }
    const [health, whoami, burst, unknown, login, exports, raised, blocked, cleared, noAdminKey] = outputs as string[][] as [
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
      string[],
    ];

    expect(health).toEqual(['{"status":"ok"}']);

    // whoami: 200 with the free plan's headers, the whole burst still there
    const who = response(whoami[0] ?? "");
    expect(who.status).toMatch(/^HTTP\/1\.1 200/);
    expect(who.headers["ratelimit-policy"]).toBe('"burst";q=10;w=20, "per-minute";q=30;w=60, "per-day";q=1000;w=86400');
    expect(who.headers["x-ratelimit-remaining"]).toBe("10");
    expect(JSON.parse(who.body)).toMatchObject({ client: "key:free-demo-key", tier: "free", rateLimit: { remaining: 10 } });

    // ten in a row pass, the 11th is the 429
    expect(burst).toHaveLength(2);
    expect(burst[0]).toBe(`${Array(10).fill("200").join(" ")} \n`);
    const eleventh = response(burst[1] ?? "");
    expect(eleventh.status).toMatch(/^HTTP\/1\.1 429/);
    expect(eleventh.headers["content-type"]).toBe("application/problem+json");
    expect(eleventh.headers["x-ratelimit-remaining"]).toBe("0");
    expect(Number(eleventh.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(eleventh.body)).toMatchObject({ status: 429, "violated-policies": ["burst"] });

    expect(response(unknown[0] ?? "").status).toMatch(/^HTTP\/1\.1 401/);

    // five attempts (wrong password: 401), then the 6th is a 429 even with the right one
    expect(login).toHaveLength(2);
    expect(login[0]).toBe(`${Array(5).fill("401").join(" ")} \n`);
    const sixth = response(login[1] ?? "");
    expect(sixth.status).toMatch(/^HTTP\/1\.1 429/);
    expect(sixth.headers["retry-after"]).toBe("900");

    // the third export is refused at once (both slots held); the first two finish 2 s after they began
    expect(exports).toEqual(["429 200 200 \n"]);

    // ten times the free plan for an hour: the answer says what is in force, whoami's headers and JSON show it
    const free = "key:free-demo-key";
    expect(raised).toHaveLength(2);
    const setAnswer = JSON.parse(raised[0] ?? "") as { expiresAt: string };
    expect(setAnswer).toEqual({ key: free, tier: "free", override: { scale: 10 }, expiresAt: expect.any(String), quotas: { burst: 100, "per-minute": 300, "per-day": 10000 } });
    expect(Date.parse(setAnswer.expiresAt) - Date.now()).toBeGreaterThan(3_500_000);
    const raisedWho = response(raised[1] ?? "");
    expect(raisedWho.status).toMatch(/^HTTP\/1\.1 200/);
    expect(raisedWho.headers["ratelimit-policy"]).toBe('"burst";q=100;w=20, "per-minute";q=300;w=60, "per-day";q=10000;w=86400');
    expect(raisedWho.headers["x-ratelimit-limit"]).toBe("100");
    expect(JSON.parse(raisedWho.body)).toMatchObject({ client: free, override: { scale: 10 }, rateLimit: { limit: 100, reason: "ok" } });

    // blocked: the answer, a 429 with Retry-After: 900; lifted: the answer, then a quote passes
    expect(blocked).toHaveLength(4);
    expect(JSON.parse(blocked[0] ?? "")).toEqual({ key: free, tier: "free", blocked: true, blockedUntil: expect.any(String), retryAfter: 900 });
    const refused = response(blocked[1] ?? "");
    expect(refused.status).toMatch(/^HTTP\/1\.1 429/);
    expect(refused.headers["retry-after"]).toBe("900");
    expect(refused.headers.ratelimit).toBe('"burst";r=0;t=900, "per-minute";r=0;t=900, "per-day";r=0;t=900');
    expect(JSON.parse(blocked[2] ?? "")).toEqual({ key: free, tier: "free", blocked: false, blockedUntil: null, retryAfter: null });
    expect(blocked[3]).toBe("200\n");

    expect(cleared.map((out) => JSON.parse(out))).toEqual([{ key: free, tier: "free", override: null, expiresAt: null, quotas: { burst: 10, "per-minute": 30, "per-day": 1000 } }]);
    expect(noAdminKey).toEqual(["401\n"]);
  });
});
