import { describe, expect, it } from "vitest";
import {
  DEFAULT_HEADER_STYLES,
  type Decision,
  type HeaderStyle,
  MemoryStore,
  type PartitionKeyOption,
  type Policy,
  RateLimiter,
  SluiceConfigError,
  createGuard,
  fixedWindow,
  leakyBucket,
  setRateLimitHeaders,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "./index.js";
import { HEADER_FORMATTERS, compileRateLimitHeaders, ietfPolicyHeader, partitionKeyOf, resolveHeaderStyles } from "./adapter.js";

/** 42 s into a minute: the current 1-minute window ends 18 s later, at 1_700_000_040_000. */
const T0 = 1_700_000_022_000;

function setup(limits: Policy | Policy[]) {
  let t = T0;
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => t }), limits });
  return {
    limiter,
    at(ms: number) {
      t = ms;
    },
  };
}

/** The headers written for `decision`, as a plain object with lowercase names (so extra headers show up). */
function written(decision: Decision, styles: readonly HeaderStyle[], policies: readonly Policy[]): Record<string, string> {
  const headers = new Headers();
  setRateLimitHeaders(headers, decision, styles, policies);
  return Object.fromEntries(headers);
}

describe('"ietf" style', () => {
  it("writes one policy and its state exactly", async () => {
    const { limiter } = setup(fixedWindow({ limit: 100, window: "1m" }));
    const decision = await limiter.limit("k", { cost: 58 });
    expect(written(decision, ["ietf"], limiter.policies)).toEqual({
      "ratelimit-policy": '"100-per-1m";q=100;w=60',
      ratelimit: '"100-per-1m";r=42;t=18',
    });
  });

  it("rounds t up to whole seconds from the store's now", async () => {
    const { limiter, at } = setup(fixedWindow({ limit: 100, window: "1m" }));
    at(T0 + 1); // 17_999 ms left
    expect(written(await limiter.limit("k"), ["ietf"], limiter.policies).ratelimit).toBe('"100-per-1m";r=99;t=18');
    at(T0 + 999); // 17_001 ms left
    expect(written(await limiter.limit("k"), ["ietf"], limiter.policies).ratelimit).toBe('"100-per-1m";r=98;t=18');
    at(T0 + 1000); // 17_000 ms left
    expect(written(await limiter.limit("k"), ["ietf"], limiter.policies).ratelimit).toBe('"100-per-1m";r=97;t=17');
  });

  it("writes one comma-separated member per policy, in configuration order, for every algorithm", async () => {
    const { limiter } = setup([
      fixedWindow({ limit: 100, window: "1m" }),
      tokenBucket({ capacity: 10, refillRate: 3 }), // w = ceil(10 * 1 s / 3) = 4
      leakyBucket({ rate: 10, period: "1s", burst: 5 }), // w = ceil(5 * 1 s / 10) = 1
      slidingWindow({ limit: 1000, window: "1h" }),
      slidingLog({ limit: 5, window: "10s" }),
    ]);
    const policyHeader =
      '"100-per-1m";q=100;w=60, "10-burst-3-per-1s";q=10;w=4, "5-burst-10-per-1s";q=5;w=1, "1000-per-1h";q=1000;w=3600, "5-per-10s";q=5;w=10';

    const allowed = await limiter.limit("k", { cost: 2 });
    // t is the time until the quota next grows. Token bucket: T = 333_334 µs, the next token in
    // T → t=1; leaky bucket: T = 100 ms, the next drip in 100 ms → t=1; sliding window (1h): now
    // is 822 s into window 472222 with 2 counted; a 999th unit fits once the window has rolled
    // (2778 s) and the previous count weighs at most 1 (half of the next window, 1800 s): 4578 s;
    // sliding log: the one entry leaves in 10 s
    const state =
      '"100-per-1m";r=98;t=18, "10-burst-3-per-1s";r=8;t=1, "5-burst-10-per-1s";r=3;t=1, "1000-per-1h";r=998;t=4578, "5-per-10s";r=3;t=10';
    expect(written(allowed, ["ietf"], limiter.policies)).toEqual({ "ratelimit-policy": policyHeader, ratelimit: state });

    // cost 4 is denied by the leaky bucket (retry 100 ms) and the log (retry 10 s): nothing consumed,
    // so the others report the same state, and the two that denied it r=0 (nothing left for this
    // request, though a smaller one would fit); Retry-After comes from the binding policy (the log)
    const denied = await limiter.limit("k", { cost: 4 });
    expect(denied.allowed).toBe(false);
    expect(denied.policies.map((p) => [p.allowed, p.remaining])).toEqual([
      [true, 98],
      [true, 8],
      [false, 3],
      [true, 998],
      [false, 3],
    ]);
    expect(written(denied, ["ietf"], limiter.policies)).toEqual({
      "ratelimit-policy": policyHeader,
      ratelimit: '"100-per-1m";r=98;t=18, "10-burst-3-per-1s";r=8;t=1, "5-burst-10-per-1s";r=0;t=1, "1000-per-1h";r=998;t=4578, "5-per-10s";r=0;t=10',
      "retry-after": "10",
    });
  });

  it("gives q/w of bucket policies from capacity/burst and the time to refill or drain", () => {
    expect(
      ietfPolicyHeader([
        tokenBucket({ capacity: 100, refillRate: 10 }), // 100 * 1 s / 10 = 10 s
        tokenBucket({ capacity: 100, refillRate: 10, interval: "1m" }), // 100 * 60 s / 10 = 600 s
        tokenBucket({ capacity: 7, refillRate: 2, interval: "500ms", name: "tb" }), // 7 * 0.5 s / 2 = 1.75 → 2
        leakyBucket({ rate: 2, period: "1m", burst: 3, queue: 2 }), // 3 * 60 s / 2 = 90 s
        leakyBucket({ rate: 1000, period: "1s", burst: 1 }), // 0.001 s → 1
      ]),
    ).toBe(
      '"100-burst-10-per-1s";q=100;w=10, "100-burst-10-per-1m";q=100;w=600, "tb";q=7;w=2, "3-burst-2-per-1m-queue-2";q=3;w=90, "1-burst-1000-per-1s";q=1;w=1',
    );
  });

  it("gives w of window policies in whole seconds, rounded up", () => {
    expect(
      ietfPolicyHeader([
        fixedWindow({ limit: 5, window: 1500 }),
        slidingWindow({ limit: 6, window: "1d" }),
        slidingLog({ limit: 7, window: "500ms", name: "log" }),
      ]),
    ).toBe('"5-per-1500ms";q=5;w=2, "6-per-1d";q=6;w=86400, "log";q=7;w=1');
  });
});

describe('"draft-7", "draft-6" and "legacy" styles (binding policy)', () => {
  const limits = [
    fixedWindow({ limit: 100, window: "1m" }),
    leakyBucket({ rate: 10, period: "1s", burst: 5 }),
    slidingLog({ limit: 5, window: "10s" }),
  ];

  it("describe the allowed request's binding policy: least remaining, first on ties", async () => {
    const { limiter } = setup(limits);
    const decision = await limiter.limit("k", { cost: 2 });
    expect(decision.policy).toBe("5-burst-10-per-1s"); // r=3, tied with the log (r=3) and configured first
    expect(written(decision, ["draft-7"], limiter.policies)).toEqual({
      ratelimit: "limit=5, remaining=3, reset=1",
      "ratelimit-policy": "5;w=1",
    });
    expect(written(decision, ["draft-6"], limiter.policies)).toEqual({
      "ratelimit-limit": "5",
      "ratelimit-remaining": "3",
      "ratelimit-reset": "1",
    });
    expect(written(decision, ["legacy"], limiter.policies)).toEqual({
      "x-ratelimit-limit": "5",
      "x-ratelimit-remaining": "3",
      "x-ratelimit-reset": "1700000023", // ceil((T0 + 200 ms) / 1000)
    });
  });

  it("describe the denied request's binding policy: the largest retryAfterMs, with Retry-After", async () => {
    const { limiter } = setup(limits);
    await limiter.limit("k", { cost: 2 });
    const decision = await limiter.limit("k", { cost: 4 });
    expect(decision.policy).toBe("5-per-10s");
    expect(written(decision, ["draft-7"], limiter.policies)).toEqual({
      ratelimit: "limit=5, remaining=3, reset=10",
      "ratelimit-policy": "5;w=10",
      "retry-after": "10",
    });
    expect(written(decision, ["draft-6", "legacy"], limiter.policies)).toEqual({
      "ratelimit-limit": "5",
      "ratelimit-remaining": "3",
      "ratelimit-reset": "10",
      "x-ratelimit-limit": "5",
      "x-ratelimit-remaining": "3",
      "x-ratelimit-reset": "1700000032",
      "retry-after": "10",
    });
  });

  it("legacy X-RateLimit-Reset is ceil(resetAt / 1000) epoch seconds", async () => {
    const { limiter, at } = setup(fixedWindow({ limit: 100, window: "1m" }));
    expect(written(await limiter.limit("k"), ["legacy"], limiter.policies)["x-ratelimit-reset"]).toBe("1700000040");
    const bucket = setup(tokenBucket({ capacity: 10, refillRate: 3 }));
    bucket.at(T0 + 5);
    // full again 333.334 ms after now = T0 + 5 → resetAt = T0 + 339 (ms rounded up) → 1700000023 s
    const d = await bucket.limiter.limit("k");
    expect(d.resetAt).toBe(T0 + 339);
    expect(written(d, ["legacy"], bucket.limiter.policies)["x-ratelimit-reset"]).toBe("1700000023");
    at(T0 + 18_000); // exactly on the window edge: a new window ending a minute later
    expect(written(await limiter.limit("k"), ["legacy"], limiter.policies)).toEqual({
      "x-ratelimit-limit": "100",
      "x-ratelimit-remaining": "99",
      "x-ratelimit-reset": "1700000100",
    });
  });
});

describe("defaults and Retry-After", () => {
  it('defaults to ["ietf", "legacy"]', async () => {
    expect(DEFAULT_HEADER_STYLES).toEqual(["ietf", "legacy"]);
    expect(Object.isFrozen(DEFAULT_HEADER_STYLES)).toBe(true);
    expect(resolveHeaderStyles(undefined)).toBe(DEFAULT_HEADER_STYLES);
    const { limiter } = setup(fixedWindow({ limit: 100, window: "1m" }));
    expect(written(await limiter.limit("k", { cost: 58 }), resolveHeaderStyles(undefined), limiter.policies)).toEqual({
      "ratelimit-policy": '"100-per-1m";q=100;w=60',
      ratelimit: '"100-per-1m";r=42;t=18',
      "x-ratelimit-limit": "100",
      "x-ratelimit-remaining": "42",
      "x-ratelimit-reset": "1700000040",
    });
  });

  it("adds Retry-After, rounded up, only to denials", async () => {
    const { limiter, at } = setup(fixedWindow({ limit: 3, window: "1m" }));
    at(T0 + 1);
    for (let i = 0; i < 3; i++) expect(written(await limiter.limit("k"), ["ietf"], limiter.policies)["retry-after"]).toBeUndefined();
    const denied = await limiter.limit("k");
    expect(denied.retryAfterMs).toBe(17_999);
    expect(written(denied, ["draft-6"], limiter.policies)).toEqual({
      "ratelimit-limit": "3",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "18",
      "retry-after": "18",
    });

    const bucket = setup(tokenBucket({ capacity: 1, refillRate: 3 }));
    await bucket.limiter.limit("k");
    const d = await bucket.limiter.limit("k");
    expect(d.retryAfterMs).toBe(334); // ceil(333.334 ms)
    expect(written(d, [], bucket.limiter.policies)).toEqual({ "retry-after": "1" });
  });

  it("writes no Retry-After when the cost can never pass (retryAfterMs Infinity)", async () => {
    const { limiter } = setup(fixedWindow({ limit: 100, window: "1m" }));
    const decision = await limiter.limit("k", { cost: 101 });
    expect(decision).toMatchObject({ allowed: false, reason: "cost-exceeds-limit", retryAfterMs: Infinity });
    expect(written(decision, ["ietf", "legacy"], limiter.policies)).toEqual({
      "ratelimit-policy": '"100-per-1m";q=100;w=60',
      ratelimit: '"100-per-1m";r=0;t=18', // the policy that denied it: r=0
      "x-ratelimit-limit": "100",
      "x-ratelimit-remaining": "100",
      "x-ratelimit-reset": "1700000040",
    });
  });
});

describe("relative values use decision.now, never the edge clock", () => {
  const policy = fixedWindow({ limit: 10, window: "1m", name: "p" });
  function decisionAt(now: number): Decision {
    const result = { policy: "p", allowed: false, limit: 10, remaining: 0, resetAt: now + 30_500, retryAfterMs: 2_001, delayMs: 0, refillAt: now + 30_500 };
    return {
      allowed: false,
      now,
      limit: 10,
      remaining: 0,
      resetAt: now + 30_500,
      retryAfterMs: 2_001,
      delayMs: 0,
      policy: "p",
      policies: [result],
      reason: "limit",
      pending: Promise.resolve(),
    };
  }

  // a store clock far in the past and far in the future of this machine's Date.now()
  for (const now of [1_000_000_000, Date.now() + 10 * 365 * 86_400_000]) {
    it(`computes t, reset, RateLimit-Reset and Retry-After from now = ${now}`, () => {
      const d = decisionAt(now);
      expect(written(d, ["ietf", "legacy"], [policy])).toEqual({
        "ratelimit-policy": '"p";q=10;w=60',
        ratelimit: '"p";r=0;t=31',
        "x-ratelimit-limit": "10",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(Math.ceil((now + 30_500) / 1000)),
        "retry-after": "3",
      });
      expect(written(d, ["draft-7"], [policy])).toEqual({
        ratelimit: "limit=10, remaining=0, reset=31",
        "ratelimit-policy": "10;w=60",
        "retry-after": "3",
      });
      expect(written(d, ["draft-6"], [policy])["ratelimit-reset"]).toBe("31");
    });
  }

  it("never writes a negative relative value", () => {
    const d = decisionAt(5_000_000);
    d.resetAt = d.now - 2_500;
    (d.policies[0] as { resetAt: number }).resetAt = d.now - 2_500;
    (d.policies[0] as { refillAt: number }).refillAt = d.now - 2_500;
    expect(written(d, ["ietf"], [policy]).ratelimit).toBe('"p";r=0;t=0');
    expect(written(d, ["draft-6"], [policy])["ratelimit-reset"]).toBe("0");
  });
});

describe("resolveHeaderStyles", () => {
  it("accepts one style, a list (deduplicated, frozen), or false", () => {
    expect(resolveHeaderStyles("draft-7")).toEqual(["draft-7"]);
    expect(resolveHeaderStyles(["draft-6", "legacy", "draft-6"])).toEqual(["draft-6", "legacy"]);
    expect(Object.isFrozen(resolveHeaderStyles(["legacy"]))).toBe(true);
    expect(resolveHeaderStyles(false)).toEqual([]);
    expect(resolveHeaderStyles([])).toEqual([]);
    expect(resolveHeaderStyles(["ietf", "draft-6", "legacy"])).toEqual(["ietf", "draft-6", "legacy"]);
  });

  it.each([
    ["draft-8", "headers"],
    ["IETF", "headers"],
    [true, "headers"],
    [null, "headers"],
    [1, "headers"],
    [["ietf", 5], "headers[1]"],
    [["legacy", "x-ratelimit"], "headers[1]"],
  ])("rejects %j with a SluiceConfigError naming %s", (value, option) => {
    expect(() => resolveHeaderStyles(value)).toThrow(SluiceConfigError);
    expect(() => resolveHeaderStyles(value)).toThrow(new RegExp(`^\\[sluice\\] ${option.replace(/[[\]]/g, "\\$&")} must be "ietf", "draft-7", "draft-6", "legacy"`));
    expect(() => resolveHeaderStyles(value)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("names the bad value", () => {
    expect(() => resolveHeaderStyles(["ietf", "draft-8"])).toThrow(/got "draft-8"$/);
  });

  it('rejects "ietf" with "draft-7": both write RateLimit', () => {
    expect(() => resolveHeaderStyles(["ietf", "draft-7"])).toThrow(SluiceConfigError);
    expect(() => resolveHeaderStyles(["draft-7", "legacy", "ietf"])).toThrow(
      '[sluice] headers must not hold both "ietf" and "draft-7", which both write the RateLimit header; choose one',
    );
  });
});

describe("HEADER_FORMATTERS: one entry per style", () => {
  it("lists exactly the styles resolveHeaderStyles accepts, each with the header names it writes", () => {
    expect(Object.keys(HEADER_FORMATTERS)).toEqual(["ietf", "draft-7", "draft-6", "legacy"]);
    expect(HEADER_FORMATTERS.ietf.fields).toEqual(["RateLimit", "RateLimit-Policy"]);
    expect(() => resolveHeaderStyles(["draft-6", "legacy"])).not.toThrow();
  });

  it("compileRateLimitHeaders writes what setRateLimitHeaders writes", async () => {
    const { limiter } = setup([tokenBucket({ capacity: 2, refillRate: 1 }), slidingWindow({ limit: 5, window: "1m" })]);
    for (let i = 0; i < 4; i++) {
      const d = await limiter.limit("k");
      const compiled = new Headers();
      compileRateLimitHeaders(["ietf", "legacy"], limiter.policies)(compiled, d, undefined);
      expect(Object.fromEntries(compiled)).toEqual(written(d, ["ietf", "legacy"], limiter.policies));
    }
  });
});

describe("partitionKey: the draft's pk parameter", () => {
  const guardFor = (options: { prefix?: string; partitionKey?: PartitionKeyOption }) => {
    let t = T0;
    const limiter = new RateLimiter({
      store: new MemoryStore({ clock: () => t }),
      limits: fixedWindow({ limit: 5, window: "1m", name: "p" }),
      prefix: options.prefix ?? "sluice",
    });
    const guard = createGuard({ limiter, key: (r) => r.headers.get("x-key") ?? "none", partitionKey: options.partitionKey });
    return async (key: string) => {
      t += 1;
      const { headers } = await guard(new Request("https://x.test/", { headers: { "x-key": key } }));
      return { rateLimit: headers.get("RateLimit") ?? "", policy: headers.get("RateLimit-Policy") ?? "" };
    };
  };
  const pkOf = (value: string) => /;pk=(:[A-Za-z0-9+/=]*:)/.exec(value)?.[1];

  it("is off by default", async () => {
    expect((await guardFor({})("alice")).rateLimit).toBe('"p";r=4;t=18');
  });

  it("adds a Byte Sequence of 12 hash bytes to every member, never the key itself", async () => {
    const check = guardFor({ partitionKey: true });
    const first = await check("alice@example.com");
    const pk = pkOf(first.rateLimit) as string;
    expect(pk).toMatch(/^:[A-Za-z0-9+/]{16}:$/);
    expect(first.rateLimit).toBe(`"p";r=4;t=18;pk=${pk}`);
    expect(first.policy).toBe(`"p";q=5;w=60;pk=${pk}`);
    expect(first.rateLimit).not.toContain("alice");
    expect(pk).toBe(partitionKeyOf("sluice::alice@example.com"));
    // the same key keeps its pk; another key, prefix or salt gets another
    expect(pkOf((await check("alice@example.com")).rateLimit)).toBe(pk);
    expect(pkOf((await check("bob@example.com")).rateLimit)).not.toBe(pk);
    expect(pkOf((await guardFor({ partitionKey: true, prefix: "other" })("alice@example.com")).rateLimit)).not.toBe(pk);
    const salted = pkOf((await guardFor({ partitionKey: { salt: "s3cret" } })("alice@example.com")).rateLimit);
    expect(salted).toBe(partitionKeyOf("sluice::alice@example.com", "s3cret"));
    expect(salted).not.toBe(pk);
  });

  it("rejects anything but true, false or { salt: string }", () => {
    for (const bad of ["yes", 1, null, {}, { salt: 3 }]) {
      expect(() => guardFor({ partitionKey: bad as never })).toThrow(
        /^\[sluice\] partitionKey must be true, false or \{ salt: string \}; got /,
      );
    }
  });
});
