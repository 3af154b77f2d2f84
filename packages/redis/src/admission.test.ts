import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RateLimiter, type Decision, slidingLog, slidingWindow } from "@sluice/core";
import IORedis from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { createTestRedisStore } from "./testing.js";

const PROCESSES = 4;
const CALLERS = 64;
const REQUESTS = 2; // per caller: 4 × 64 × 2 = 512 attempts on a limit of 100
const STORES = ["ioredis", "node-redis", "upstash"];
const POLICIES = ["fixedWindow", "slidingLog", "tokenBucket", "leakyBucket"];

function runWorker(env: Record<string, string>): Promise<{ store: string; policy: string; allowed: number; denied: number; failed: number }[]> {
  const worker = fileURLToPath(new URL("../test/admission-worker.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", worker], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`admission worker exited with ${code}:\n${err}`));
      else resolve(JSON.parse(out.trim().split("\n").pop() as string));
    });
  });
}

describe("no over-admission", () => {
  it(
    `${PROCESSES} processes × ${CALLERS} concurrent callers on one key admit exactly 100, on every store and exact algorithm`,
    async () => {
      const phaseMs = 1200;
      const env = {
        REDIS_URL: inject("sluiceRedisUrl"),
        UPSTASH_URL: inject("sluiceUpstashUrl"),
        UPSTASH_TOKEN: inject("sluiceUpstashToken"),
        PREFIX: `admission-${Date.now()}`,
        // leave time for every process to start and connect before the first phase
        START_AT: String(Date.now() + 6000),
        PHASE_MS: String(phaseMs),
        CALLERS: String(CALLERS),
        REQUESTS: String(REQUESTS),
      };
      const outputs = await Promise.all(Array.from({ length: PROCESSES }, () => runWorker(env)));
      const totals = new Map<string, { allowed: number; denied: number; failed: number }>();
      for (const rows of outputs) {
        for (const row of rows) {
          const key = `${row.store} ${row.policy}`;
          const t = totals.get(key) ?? { allowed: 0, denied: 0, failed: 0 };
          t.allowed += row.allowed;
          t.denied += row.denied;
          t.failed += row.failed;
          totals.set(key, t);
        }
      }
      const expected = new Map(
        STORES.flatMap((s) => POLICIES.map((p) => [`${s} ${p}`, { allowed: 100, denied: PROCESSES * CALLERS * REQUESTS - 100, failed: 0 }] as const)),
      );
      expect(Object.fromEntries(totals)).toEqual(Object.fromEntries(expected));
    },
    120_000,
  );
});

describe("slidingWindow against slidingLog on a bursty trace (measured, printed)", () => {
  it("reports how far the counter approximation strays from the exact log", async () => {
    const client = new IORedis(inject("sluiceRedisUrl"));
    let now = Date.UTC(2026, 0, 1);
    const store = createTestRedisStore(client, { clock: () => now });
    const prefix = `sw-vs-log-${Date.now()}`;
    const limit = 100;
    const windowMs = 10_000;
    const sliding = new RateLimiter({ store, limits: slidingWindow({ limit, window: windowMs }), prefix: `${prefix}-sw` });
    const log = new RateLimiter({ store, limits: slidingLog({ limit, window: windowMs }), prefix: `${prefix}-log` });
    // bursts of 20-80 requests separated by 0.2-4 s quiet gaps, over about two minutes
    let seed = 7;
    const rand = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const admitted = { sliding: [] as number[], log: [] as number[] };
    const start = now;
    while (now - start < 120_000) {
      const size = 20 + Math.floor(rand() * 60);
      for (let i = 0; i < size; i++) {
        const [s, l]: Decision[] = await Promise.all([sliding.limit("k"), log.limit("k")]);
        if (s!.allowed) admitted.sliding.push(now);
        if (l!.allowed) admitted.log.push(now);
        now += Math.floor(rand() * 20);
      }
      now += 200 + Math.floor(rand() * 3800);
    }
    const maxInAnyWindow = (times: number[]) => {
      let best = 0;
      for (let i = 0, j = 0; i < times.length; i++) {
        while ((times[j] as number) <= (times[i] as number) - windowMs) j++;
        best = Math.max(best, i - j + 1);
      }
      return best;
    };
    const report = {
      limit,
      windowMs,
      admittedBySlidingWindow: admitted.sliding.length,
      admittedBySlidingLog: admitted.log.length,
      difference: admitted.sliding.length - admitted.log.length,
      maxInAnyWindowSlidingWindow: maxInAnyWindow(admitted.sliding),
      maxInAnyWindowSlidingLog: maxInAnyWindow(admitted.log),
    };
    console.log(`slidingWindow vs slidingLog (Redis, bursty trace): ${JSON.stringify(report)}`);
    // the log is exact; the counter may stray, but never beyond twice the limit in any window
    expect(report.maxInAnyWindowSlidingLog).toBe(limit);
    expect(report.maxInAnyWindowSlidingWindow).toBeLessThanOrEqual(2 * limit);
    await client.quit();
  }, 60_000);
});
