/**
 * The cold burst (run in a child process by `redis.ts`): a burst of concurrent decisions right
 * after `SCRIPT FLUSH` (a restart, a failover, a fresh server), against the same burst with the
 * scripts loaded, through `RedisStore` + ioredis on one redis-server. Two limiters (a fixed and a
 * sliding window: two scripts) share the burst, as in `packages/redis/src/cold-start.test.ts`,
 * which asserts the script calls; this measures the time.
 *
 * Each round: a warm burst, `SCRIPT FLUSH` (and `CONFIG RESETSTAT`), the cold burst, the script
 * calls it made (`INFO commandstats`), another warm burst. A round's ratio is the cold burst's time
 * over the mean of the two warm bursts around it, so load that drifts during the run hits both.
 * Every burst uses keys of its own (every decision is a first one, allowed).
 *
 * @module
 */
import { RateLimiter, fixedWindow, slidingWindow } from "@sluice/core";
import { RedisStore } from "@sluice/redis";
import IORedis from "ioredis";

export interface ColdBurstOptions {
  /** Concurrent decisions per burst, half on each limiter. */
  readonly burst: number;
  readonly rounds: number;
  /** Warm bursts before the rounds (connection, JIT). */
  readonly warmupBursts: number;
}

export interface ColdBurstMeasurement {
  readonly burst: number;
  /** Per round, ms. */
  readonly warmMs: number[];
  readonly coldMs: number[];
  /** Per round: the cold burst ÷ the mean of the warm bursts before and after it. */
  readonly ratios: number[];
  /** Per round: `EVAL` calls (the loads: one per script on a single node) and `EVALSHA` calls of the cold burst. */
  readonly evals: number[];
  readonly evalshas: number[];
}

/** Calls of `command` in `INFO commandstats`, rejected ones (a `NOSCRIPT`) included. */
function callsOf(info: string, command: string): number {
  const line = new RegExp(`^cmdstat_${command}:(.*)$`, "m").exec(info)?.[1] ?? "";
  const field = (key: string) => Number(new RegExp(`(?:^|,)${key}=(\\d+)`).exec(line)?.[1] ?? 0);
  return field("calls") + field("rejected_calls");
}

/** Measures cold and warm bursts against the redis-server at `redisUrl` (see the module notes). */
export async function measureColdBurst(redisUrl: string, options: ColdBurstOptions): Promise<ColdBurstMeasurement> {
  const admin = new IORedis(redisUrl, { lazyConnect: true });
  // the recommended client options (see @sluice/redis's README)
  const client = new IORedis(redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await Promise.all([admin.connect(), client.connect()]);
  try {
    const store = new RedisStore(client);
    const limiters = [
      new RateLimiter({ store, limits: fixedWindow({ limit: 1e9, window: "1h" }), prefix: "bench-cold", onStoreError: "deny" }),
      new RateLimiter({ store, limits: slidingWindow({ limit: 1e9, window: "1h" }), prefix: "bench-cold", onStoreError: "deny" }),
    ];
    let bursts = 0;
    const burst = async (): Promise<number> => {
      const id = bursts++;
      const started = performance.now();
      const decisions = await Promise.all(Array.from({ length: options.burst }, (_, i) => (limiters[i % 2] as RateLimiter).limit(`${id}:${i}`)));
      const ms = performance.now() - started;
      const wrong = decisions.find((d) => d.reason !== "ok");
      if (wrong !== undefined) throw new Error(`a decision of the burst was not a plain allowed one: ${wrong.reason}`);
      return ms;
    };
    for (let i = 0; i < options.warmupBursts; i++) await burst();
    const out: ColdBurstMeasurement = { burst: options.burst, warmMs: [], coldMs: [], ratios: [], evals: [], evalshas: [] };
    for (let round = 0; round < options.rounds; round++) {
      globalThis.gc?.();
      const before = await burst();
      await admin.script("FLUSH");
      await admin.config("RESETSTAT");
      const cold = await burst();
      const info = await admin.info("commandstats");
      const after = await burst();
      out.warmMs.push((before + after) / 2);
      out.coldMs.push(cold);
      out.ratios.push(cold / ((before + after) / 2));
      out.evals.push(callsOf(info, "eval"));
      out.evalshas.push(callsOf(info, "evalsha"));
    }
    return out;
  } finally {
    client.disconnect();
    admin.disconnect();
  }
}
