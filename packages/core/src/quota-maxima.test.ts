/**
 * The configuration maxima: every quota (a window's limit, a bucket's capacity, burst and queue, a
 * concurrency cap, every quota an override gives) is at most 2^52 (`MAX_QUOTA`), so that every
 * number a store answers stays exactly representable on every Redis client.
 */
import { describe, expect, it } from "vitest";
import { MAX_QUOTA, MemoryStore, RateLimiter, SluiceConfigError, SluiceInputError, concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from "./index.js";
import { MAX_QUOTA as STORE_MAX_QUOTA, maxQuota } from "./store.js";

function configError(make: () => unknown): SluiceConfigError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(SluiceConfigError);
    return error as SluiceConfigError;
  }
  throw new Error("expected a SluiceConfigError");
}

async function inputError(call: () => Promise<unknown>): Promise<SluiceInputError> {
  const error = await call().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(SluiceInputError);
  return error as SluiceInputError;
}

const TOO_LARGE = "must be at most 2^52 (4503599627370496), so that every number a store answers stays exact on every Redis client; got";

describe("MAX_QUOTA", () => {
  it("is 2^52, from @sluice/core and from @sluice/core/store", () => {
    expect(MAX_QUOTA).toBe(2 ** 52);
    expect(STORE_MAX_QUOTA).toBe(MAX_QUOTA);
  });

  // each factory takes MAX_QUOTA itself (`atMax`) unless its algorithm's own bound is lower (a
  // bucket's span, 2^50 µs), and refuses anything above it
  it.each([
    ["fixedWindow", "limit", (q: number) => fixedWindow({ limit: q, window: "1d" }), true],
    ["slidingLog", "limit", (q: number) => slidingLog({ limit: q, window: "1d" }), true],
    ["slidingWindow", "limit", (q: number) => slidingWindow({ limit: q, window: 1 }), true],
    ["concurrency", "limit", (q: number) => concurrency({ limit: q }), true],
    ["tokenBucket", "capacity", (q: number) => tokenBucket({ capacity: q, refillRate: 1 }), false],
    ["leakyBucket", "burst", (q: number) => leakyBucket({ rate: 1, period: "1s", burst: q }), false],
    ["leakyBucket", "queue", (q: number) => leakyBucket({ rate: 1, period: "1s", burst: 1, queue: q }), false],
  ] as const)("%s refuses a %s above it, naming the option (SluiceConfigError)", (_factory, option, make, atMax) => {
    if (atMax) expect((make(MAX_QUOTA) as { limit: number }).limit).toBe(MAX_QUOTA);
    for (const quota of [MAX_QUOTA + 1, 2 ** 53 - 1]) {
      const error = configError(() => make(quota));
      expect(error.option).toBe(option);
      expect(error.message).toBe(`[sluice] ${option} ${TOO_LARGE} ${quota}`);
    }
  });

  it("is the largest quota an override may give any policy (the least of it and the algorithm's own)", () => {
    expect(maxQuota(fixedWindow({ limit: 1, window: "1m" }))).toBe(MAX_QUOTA);
    expect(maxQuota(slidingLog({ limit: 1, window: "1m" }))).toBe(MAX_QUOTA);
    expect(maxQuota(concurrency({ limit: 1 }))).toBe(MAX_QUOTA);
    expect(maxQuota(slidingWindow({ limit: 1, window: 1 }))).toBe(MAX_QUOTA);
    expect(maxQuota(slidingWindow({ limit: 1, window: "1m" }))).toBe(Math.floor(Number.MAX_SAFE_INTEGER / 60_000));
    expect(maxQuota(tokenBucket({ capacity: 1, refillRate: 1 }))).toBe(2 ** 40);
  });

  it("a hand-made policy above it is refused at construction (SluiceConfigError naming the policy)", () => {
    const huge = { ...fixedWindow({ limit: 5, window: "1m" }), limit: 2 ** 53 - 1 };
    expect(configError(() => new RateLimiter({ limits: [huge as never] })).option).toBe("limits[0]");
  });
});

describe("setOverride above MAX_QUOTA", () => {
  const limiter = () => new RateLimiter({ store: new MemoryStore(), limits: [fixedWindow({ limit: 10, window: "1m", name: "fw" }), concurrency({ limit: 4, name: "cc" })] });

  it("a quota above it is a SluiceInputError naming the field", async () => {
    for (const quota of [MAX_QUOTA + 1, 2 ** 53 - 1]) {
      for (const name of ["fw", "cc"]) {
        const error = await inputError(() => limiter().setOverride("k", { quotas: { [name]: quota } }));
        expect(error.option).toBe(`override.quotas.${name}`);
        expect(error.message).toContain(`quota at most ${MAX_QUOTA}`);
      }
    }
  });

  it("a scale whose quota goes above it is a SluiceInputError naming the scale; one that reaches it exactly is set", async () => {
    // 10 × 2^49: above 2^52, below 2^53
    const error = await inputError(() => limiter().setOverride("k", { scale: 2 ** 49 }));
    expect(error.option).toBe("override.scale");
    const l = new RateLimiter({ store: new MemoryStore(), limits: [fixedWindow({ limit: 4, window: "1m", name: "fw" })] });
    await l.setOverride("k", { scale: MAX_QUOTA / 4 });
    const d = await l.limit("k", { cost: MAX_QUOTA - 1 });
    expect([d.allowed, d.limit, d.remaining]).toEqual([true, MAX_QUOTA, 1]);
  });
});
