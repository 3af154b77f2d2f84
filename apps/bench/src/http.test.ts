/**
 * Smoke test of the HTTP benchmark: the apps answer as each contender should (headers, 429s), and
 * a whole run with tiny rounds reports every figure with its target. Never asserts timings.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  BARE,
  HONO_RATE_LIMITER,
  HONO_RATE_LIMITER_SAME,
  NOOP,
  SLUICE_DEFAULT,
  SLUICE_DENIED,
  SLUICE_IETF,
  SLUICE_OFF,
  STATIC_HEADERS,
  buildApp,
} from "./http-apps.js";
import { TARGETS, formatHttpReport, medianBinRate, percentile, runHttpBench } from "./http.js";

const get = async (name: string) => {
  const { app, close } = await buildApp(name);
  const response = await app.request("/", { headers: { "x-api-key": "bench" } });
  await close();
  return response;
};

describe("HTTP apps", () => {
  it("serve the same body; each middleware writes its own headers", async () => {
    for (const name of [BARE, NOOP, STATIC_HEADERS, SLUICE_IETF, SLUICE_DEFAULT, SLUICE_OFF, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME]) {
      const response = await get(name);
      expect([name, response.status, await response.text()]).toEqual([name, 200, "ok"]);
    }
    const ietf = await get(SLUICE_IETF);
    expect(ietf.headers.get("RateLimit-Policy")).toBe('"1000000000-per-1m";q=1000000000;w=60');
    expect(ietf.headers.get("RateLimit")).toMatch(/^"1000000000-per-1m";r=999999999;t=\d+$/);
    expect(ietf.headers.get("X-RateLimit-Limit")).toBeNull();
    expect((await get(SLUICE_OFF)).headers.get("RateLimit")).toBeNull();
    expect((await get(HONO_RATE_LIMITER)).headers.get("RateLimit-Limit")).toBe("1000000000");
  });

  it("hono-rate-limiter with the same header set, and the static default headers, send the fields @sluice/hono sends by default", async () => {
    const names = (response: Response) => [...response.headers.keys()].filter((n) => n !== "content-type").sort();
    const sluice = await get(SLUICE_DEFAULT);
    expect(names(sluice)).toEqual(["ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]);
    for (const name of [HONO_RATE_LIMITER_SAME, STATIC_HEADERS]) {
      const other = await get(name);
      expect([name, names(other)]).toEqual([name, names(sluice)]);
      // the same values but the seconds left in the window
      for (const field of ["ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining"]) {
        expect([name, field, other.headers.get(field)]).toEqual([name, field, sluice.headers.get(field)]);
      }
      expect(other.headers.get("ratelimit")).toMatch(/^"1000000000-per-1m";r=999999999;t=\d+$/);
      expect(other.headers.get("x-ratelimit-reset")).toMatch(/^\d{10}$/);
    }
  });

  it("the most-denied app answers 429 once its first 100 requests are spent", async () => {
    const { app } = await buildApp(SLUICE_DENIED);
    const statuses: number[] = [];
    for (let i = 0; i < 102; i++) statuses.push((await app.request("/", { headers: { "x-api-key": "k" } })).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.slice(100)).toEqual([429, 429]);
  });

  it("a run's rate is its median 50 ms bin after the first 100 ms, so a burst that stalls one bin moves nothing", () => {
    // before 100 ms: left out; [100,150): 2 responses, [150,200): 3; the last response ends the bins
    expect(medianBinRate([0, 110, 120, 160, 170, 180, 220], 0)).toBe(50);
    // 1 response per ms from 1,000 to 1,400 ms, but none in [1,200, 1,250): bins of 50 (×20 = 1,000/s) but one of 0
    const times = Array.from({ length: 400 }, (_, i) => 1000 + i).filter((t) => t < 1200 || t >= 1250);
    expect(medianBinRate(times, 900)).toBe(1000);
    expect(times.length / 0.4).toBeLessThan(1000); // the whole run's rate counts the stall
    expect(medianBinRate([5, 50], 0)).toBeNaN(); // shorter than one bin after the start-up
  });

  it("percentiles", () => {
    expect(percentile(Float64Array.from([5, 1, 4, 2, 3]), 0.99)).toBe(5);
    expect(percentile(Float64Array.from(Array.from({ length: 100 }, (_, i) => i + 1)), 0.99)).toBe(99);
  });
});

describe("HTTP bench", () => {
  it("runs every app in its own process, interleaved, and reports ratios to the bare app with the targets", async () => {
    const cores = () => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
    const before = cores();
    const report = await runHttpBench({
      connections: [2],
      rounds: 2,
      roundSeconds: 0.3,
      warmupSeconds: 0.2,
      contenders: [SLUICE_DEFAULT, SLUICE_DENIED, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME],
      pin: true,
    });
    // the servers on one core, autocannon (this process) on the other, and this process given back every core
    expect(report.placement).toMatch(/^(servers on core 0, autocannon on core 1 \(taskset\)|not pinned: .+)$/);
    expect(cores()).toBe(before);
    const [scenario] = report.scenarios;
    expect(scenario?.connections).toBe(2);
    expect(scenario?.rows.map((r) => r.name)).toEqual([BARE, SLUICE_DEFAULT, SLUICE_DENIED, HONO_RATE_LIMITER, HONO_RATE_LIMITER_SAME]);
    for (const r of scenario?.rows ?? []) {
      expect(r.roundRps).toHaveLength(2);
      expect(r.rps).toBeGreaterThan(0);
      expect(r.p99Ms).toBeGreaterThan(0);
      expect(r.cpuUsPerRequest).toBeGreaterThan(0);
      expect(r.rpsVsBare.rounds).toBe(2);
      if (r.name === SLUICE_DENIED) {
        // each of its two server processes (alternate rounds) passes its first 100 requests: on a
        // slow machine the warm-up may not have spent them all, in either
        expect(Object.keys(r.statusCodes).sort()).toEqual(expect.arrayContaining(["429"]));
        expect(Object.keys(r.statusCodes).every((code) => code === "200" || code === "429")).toBe(true);
        expect(r.statusCodes["200"] ?? 0).toBeLessThanOrEqual(200);
      } else expect(Object.keys(r.statusCodes)).toEqual(["200"]);
    }
    const sluice = scenario?.rows[1];
    expect(sluice?.targets.map((t) => [t.against, t.op, t.bound])).toEqual([
      [BARE, ">=", TARGETS.vsBare],
      [HONO_RATE_LIMITER, ">=", TARGETS.vsHonoRateLimiter],
      [HONO_RATE_LIMITER_SAME, ">=", TARGETS.vsSameHeaders],
    ]);
    expect(Object.keys(sluice?.stats ?? {})).toEqual([`vs ${HONO_RATE_LIMITER}`, `vs ${HONO_RATE_LIMITER_SAME}`]);
    expect(report.summary.pass + report.summary.miss).toBe(3);
    const text = formatHttpReport(report);
    expect(text).toContain("## 2 connections");
    expect(text).toMatch(/\| @sluice\/hono, IETF \+ legacy headers +\| +\d+ \| +([\d.]+× |unstable )\([\d.]+–[\d.]+\) \|/);
  });
});
