/**
 * Smoke test of the Redis benchmark: the whole run with tiny iteration counts, against the private
 * redis-server it starts itself, checking the shape of what it reports and the exact counts that
 * do not depend on timing (script calls per decision, HTTP requests per sequential decision).
 * Never asserts timings or ratios.
 */
import { pingRedis } from "@sluice/testing/redis-server";
import { describe, expect, it } from "vitest";
import { type Contender, type RunPhase, measureThroughput } from "./lib/harness.js";
import { target, verdict } from "./lib/report.js";
import {
  CEILING,
  RLF,
  SLUICE_KIND,
  SLUICE_TIER,
  SLUICE_TOKEN_BUCKET,
  TCP_CONTENDERS,
  UPSTASH_RL_SLIDING,
  UPSTASH_SLUICE_TIER,
} from "./redis-contenders.js";
import { TARGETS, formatRedisReport, poolProcesses, runRedisBench } from "./redis.js";

describe("harness hooks and targets", () => {
  it("calls beforeRun/afterRun around every run, outside the timing, with the phase", async () => {
    const calls: string[] = [];
    const contender: Contender = {
      name: "hooked",
      expect: "allow",
      run: async (ops) => {
        calls.push(`run ${ops}`);
        return ops;
      },
      beforeRun: async (phase: RunPhase) => {
        calls.push(`before ${phase}`);
      },
      afterRun: async (phase: RunPhase, ops: number, elapsedMs: number) => {
        expect(elapsedMs).toBeGreaterThanOrEqual(0);
        calls.push(`after ${phase} ${ops}`);
      },
    };
    await measureThroughput([contender], { rounds: 2, warmupMs: 0, targetRoundMs: 0, warmupOps: 3, opsPerRound: 7 });
    expect(calls).toEqual([
      "before warmup", "run 3", "after warmup 3",
      "before round", "run 7", "after round 7",
      "before round", "run 7", "after round 7",
    ]);
  });

  it("prints strict and exact targets", () => {
    expect(verdict(target(RLF, ">", 1, 1))).toBe("MISS (> 1x)");
    expect(verdict(target(RLF, ">", 1, 1.01))).toBe("PASS (> 1x)");
    expect(verdict(target("requests", "=", 1, 1), "")).toBe("PASS (= 1)");
    expect(verdict(target("requests", "<", 1, 1), "")).toBe("MISS (< 1)");
  });
});

describe("poolProcesses", () => {
  it("concatenates each contender's rounds and round profiles in process order, keeping rounds paired", () => {
    const profile = (n: number) => ({ n }) as never;
    const one = (a: number[], b: number[], pa: number) => ({
      keys: 1,
      inFlight: 5,
      results: [
        { name: "A", opsPerRound: 10, roundOpsPerSec: a, opsPerSec: 0 },
        { name: "B", opsPerRound: 20, roundOpsPerSec: b, opsPerSec: 0 },
      ],
      profiles: [[profile(pa)], [profile(pa + 1)]],
    });
    const [pooled] = poolProcesses([[one([1, 2], [10, 20], 0)], [one([3, 9], [30, 90], 5)]]);
    expect(pooled?.results).toEqual([
      { name: "A", opsPerRound: 10, roundOpsPerSec: [1, 2, 3, 9], opsPerSec: 2.5 },
      { name: "B", opsPerRound: 20, roundOpsPerSec: [10, 20, 30, 90], opsPerSec: 25 },
    ]);
    expect(pooled?.profiles).toEqual([[profile(0), profile(5)], [profile(1), profile(6)]]);
    expect(poolProcesses([])).toEqual([]);
  });
});

describe("redis bench", () => {
  it("starts its own redis-server, measures every contender, reports every figure with its target, and stops the server", async () => {
    const report = await runRedisBench({
      rounds: 2,
      warmupMs: 0,
      targetRoundMs: 0,
      warmupOps: 10,
      opsPerRound: 40,
      inFlight: 5,
      keyCounts: [1, 50],
      processes: 2,
      upstash: { sequentialDecisions: 6, concurrentDecisions: 60, concurrentCallers: 20, keyCount: 50, contenders: [UPSTASH_SLUICE_TIER, UPSTASH_RL_SLIDING] },
      coldBurst: { burst: 40, rounds: 2, warmupBursts: 1 },
    });
    expect(await pingRedis(report.server.port)).toBe(false);
    expect(report.server.version).toMatch(/^\d+\.\d+/);

    expect(report.scenarios.map((s) => [s.keys, s.inFlight])).toEqual([
      [1, 5],
      [50, 5],
    ]);
    for (const s of report.scenarios) {
      expect(s.rows.map((r) => r.name)).toEqual([...TCP_CONTENDERS]);
      for (const r of s.rows) {
        // two processes of two rounds each, pooled
        expect(r.run.roundOpsPerSec).toHaveLength(4);
        expect(r.rounds).toHaveLength(4);
        expect(r.stats.vsCeiling.rounds).toBe(4);
        expect(Number.isFinite(r.opsPerSec) && r.opsPerSec > 0).toBe(true);
        for (const figure of [r.vsCeiling, r.vsRlf, r.profile.nodeCpuUs, r.profile.redisCpuUs, r.profile.evalshaUs]) {
          expect(Number.isFinite(figure) && figure >= 0).toBe(true);
        }
        const kind = SLUICE_KIND[r.name];
        expect(r.targets.map((t) => [t.against, t.op, t.bound, t.value])).toEqual(
          kind === undefined ? [] : [[CEILING, ">=", TARGETS.vsCeiling[kind], r.vsCeiling], [RLF, ">", 1, r.vsRlf]],
        );
        // one script call per decision, whatever the contender (rate-limiter-flexible's included)
        expect(r.profile.commands.evalsha).toBe(1);
      }
      const [ceiling, rlf] = s.rows;
      expect(ceiling?.vsCeiling).toBe(1);
      expect(rlf?.vsRlf).toBe(1);
      // the ceiling's script: EVALSHA and the INCR it calls, nothing else
      expect(ceiling?.profile.commands).toEqual({ evalsha: 1, incr: 1 });
    }

    expect(report.upstash.map((u) => [u.contender, u.callers, u.decisions, u.commandsPerDecision])).toEqual([
      [UPSTASH_SLUICE_TIER, 1, 6, 1],
      [UPSTASH_SLUICE_TIER, 20, 60, 1],
      [UPSTASH_RL_SLIDING, 1, 6, 1],
      [UPSTASH_RL_SLIDING, 20, 60, 1],
    ]);
    const [sequential, concurrent, peerSequential, peerConcurrent] = report.upstash;
    // @upstash/ratelimit through the same bridge: one request and one script call per sequential decision, no targets
    expect(peerSequential).toMatchObject({ requests: 6, requestsPerDecision: 1, targets: [] });
    expect(peerConcurrent?.requests).toBeLessThan(60);
    expect(sequential).toMatchObject({ requests: 6, requestsPerDecision: 1 });
    expect(sequential?.targets.map((t) => [t.op, t.bound, t.pass])).toEqual([["=", 1, true]]);
    expect(concurrent?.requests).toBeLessThan(60);
    expect(concurrent?.targets.map((t) => [t.op, t.bound, t.pass])).toEqual([["<", 1, true]]);

    // the cold burst: one load per script (two scripts) and one EVALSHA per decision sent again but the two that loaded
    const cold = report.coldBurst;
    expect([cold?.burst, cold?.ratios.length, cold?.evals, cold?.evalshas, cold?.loadsPerScript]).toEqual([40, 2, [2, 2], [78, 78], 1]);
    expect(cold?.targets.map((t) => [t.against, t.op, t.bound])).toEqual([
      ["warm burst", "<=", TARGETS.coldBurst],
      ["script loads per script", "=", 1],
    ]);

    expect(report.summary.pass + report.summary.miss).toBe(2 * 3 * 2 + 2 + 2);
    expect(report.summary.misses).toHaveLength(report.summary.miss);

    const text = formatRedisReport(report);
    expect(text).toMatch(/\| keys +\| contender +\| decisions\/s +\| +÷ ceiling \| target/);
    expect(text).toMatch(new RegExp(`\\| 50 keys \\| ${SLUICE_TIER.replace(/[()]/g, "\\$&")} \\| +[\\d.]+ [kM]?/s \\| +([\\d.]+× |unstable )\\([\\d.]+–[\\d.]+\\) \\| (PASS|MISS) \\(≥ 0.8x\\) \\| +([\\d.]+× |unstable )\\([\\d.]+–[\\d.]+\\) \\| (PASS|MISS) \\(> 1x\\) \\|`));
    expect(text).toMatch(new RegExp(`\\| 1 key +\\| ${SLUICE_TOKEN_BUCKET} +\\| +[\\d.]+ \\| +[\\d.]+ \\| +[\\d.]+ \\| +[\\d.]+ \\| +[\\d.]+ \\|`));
    expect(text).toMatch(/\| Sluice UpstashStore, tier \(3 limits\) \| +1 \| +6 \| +6 \| +1\.00 \| PASS \(= 1\) +\| +1\.00 \|/);
    expect(text).toMatch(/## The cold burst: 40 concurrent decisions after SCRIPT FLUSH/);
    expect(text).toMatch(/\| +\d+ \| +\d+ \| +([\d.]+× |unstable )(\([\d.]+–[\d.]+\)|\(no interval\)|[^|]*)\| [^|]+\| +1 \| PASS \(= 1\) +\| +78 \|/);
    expect(text).toContain(`Targets: ${report.summary.pass} PASS, ${report.summary.miss} MISS`);
  });
});
