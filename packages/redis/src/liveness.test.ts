import { RateLimiter, fixedWindow } from "@sluice/core";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { GRACE_MS, PATIENCE_MS, extraWaitMs, livenessOf } from "./liveness.js";
import { type IORedisLike, RedisStore } from "./redis-store.js";

// The default timeout's rule for the Redis stores, on a fake clock: a server that answers other
// calls keeps a call waiting (up to 5 s in all); a silent one fails it after timeoutMs and one turn
// of the event loop. Real servers (a hung TCP server, a paused redis-server, a cold burst on a
// cluster beside busy loops) are in default-timeout.test.ts.

describe("extraWaitMs", () => {
  let now = 0;
  beforeEach(() => {
    now = 10_000;
    vi.spyOn(performance, "now").mockImplementation(() => now);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a server that never answered: one turn of the event loop at the first expiry, then nothing", () => {
    const liveness = { heardAt: undefined };
    expect(extraWaitMs(liveness, 1000, 1000)).toBe(GRACE_MS);
    expect(extraWaitMs(liveness, 1000 + GRACE_MS, 1000)).toBe(0);
  });

  it("a server that answered within timeoutMs: until it has been silent for timeoutMs", () => {
    const liveness = { heardAt: now - 300 };
    expect(extraWaitMs(liveness, 1000, 1000)).toBe(700);
    now += 700;
    expect(extraWaitMs(liveness, 1700, 1000)).toBe(0);
    liveness.heardAt = now - 0.4;
    expect(extraWaitMs(liveness, 1700, 1000)).toBe(1000); // 999.6 rounded up
  });

  it("a server silent for timeoutMs: the grace turn at the first expiry only", () => {
    const liveness = { heardAt: now - 1000 };
    expect(extraWaitMs(liveness, 1000, 1000)).toBe(GRACE_MS);
    expect(extraWaitMs(liveness, 1400, 1000)).toBe(0);
  });

  it(`never past ${PATIENCE_MS} ms in all, however busy the server`, () => {
    const liveness = { heardAt: now };
    expect(extraWaitMs(liveness, 4800, 1000)).toBe(200);
    expect(extraWaitMs(liveness, PATIENCE_MS, 1000)).toBe(0);
  });

  it("one record per client object", () => {
    const client = {};
    expect(livenessOf(client)).toBe(livenessOf(client));
    expect(livenessOf({})).not.toBe(livenessOf(client));
  });
});

describe("through RedisStore and a limiter with default options", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * An ioredis-shaped client: the key "stuck" is never answered, every other key at once (with a
   * fixed window's full answer at this process's clock: allowed, 9 left, the window ending in a minute).
   */
  function client(): IORedisLike {
    const answer = () => {
      const now = Date.now();
      return [now, 1, 9, now + 60_000, 0, 0, now + 60_000, 0];
    };
    const reply = (key: string) => (key.includes("stuck") ? new Promise<unknown>(() => {}) : Promise.resolve(answer()));
    return {
      evalsha: (_sha, _n, key) => reply(key as string),
      eval: (_script, _n, key) => reply(key as string),
      del: async () => 1,
      defineCommand: () => undefined,
    };
  }

  const limits = fixedWindow({ limit: 10, window: "1m" });

  it("a call waits while the server answers other calls, at most 5 s in all", async () => {
    const limiter = new RateLimiter({ store: new RedisStore(client()), limits });
    const stuck = limiter.limit("stuck");
    let settledAt: number | undefined;
    void stuck.then(() => (settledAt = performance.now()));
    // another decision answered every 500 ms: the server is busy, not hung
    for (let t = 500; t <= 6000; t += 500) {
      await vi.advanceTimersByTimeAsync(500);
      if (settledAt === undefined) expect((await limiter.limit(`other:${t}`)).reason).toBe("ok");
    }
    expect(settledAt).toBe(PATIENCE_MS);
    expect((await stuck).reason).toBe("timeout");
  });

  it("a call on a silent client times out after timeoutMs and one turn", async () => {
    const limiter = new RateLimiter({ store: new RedisStore(client()), limits });
    expect((await limiter.limit("first")).reason).toBe("ok"); // heard at t=0
    await vi.advanceTimersByTimeAsync(300);
    const stuck = limiter.limit("stuck");
    let settledAt: number | undefined;
    void stuck.then(() => (settledAt = performance.now()));
    await vi.advanceTimersByTimeAsync(2000);
    // 1300: the server silent for 1300 ms at the expiry, one turn, then the fallback
    expect(settledAt).toBe(300 + 1000 + GRACE_MS);
    expect((await stuck).reason).toBe("timeout");
  });
});
