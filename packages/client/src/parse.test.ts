/**
 * `parseRateLimit` on every header style, by example: exact values, precedence, and malformed
 * fields ignored as the IETF draft requires.
 */
import { describe, expect, it } from "vitest";
import { parseRateLimit } from "./index.js";

/** 2023-11-14T22:14:00Z */
const NOW = 1_700_000_040_000;

describe("IETF lists (RateLimit + RateLimit-Policy)", () => {
  it("joins the two fields by policy name, in the server's order", () => {
    const headers = new Headers({
      "RateLimit-Policy": '"burst";q=10;w=20, "per-minute";q=30;w=60, "per-day";q=1000;w=86400',
      RateLimit: '"burst";r=0;t=20, "per-minute";r=20;t=120, "per-day";r=990;t=6360',
      "Retry-After": "2",
      "X-RateLimit-Limit": "10",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": "1700000060",
    });
    expect(parseRateLimit(headers, { now: NOW })).toEqual({
      style: "ietf",
      retryAfterSeconds: 2,
      policies: [
        { policy: "burst", quota: 10, window: 20, remaining: 0, resetSeconds: 20 },
        { policy: "per-minute", quota: 30, window: 60, remaining: 20, resetSeconds: 120 },
        { policy: "per-day", quota: 1000, window: 86400, remaining: 990, resetSeconds: 6360 },
      ],
    });
  });

  it("the draft's example fields: qu, pk, token names, policies in only one of the fields", () => {
    const info = parseRateLimit({
      "ratelimit-policy": '"permin";q=50;w=60, "perhr";q=1000;w=3600;qu="content-bytes", day;q=5000;w=86400',
      ratelimit: '"permin";r=30;t=20;pk=:ZmM6NTU6:, "other";r=1;t=1',
    });
    expect(info.policies).toEqual([
      { policy: "permin", quota: 50, window: 60, remaining: 30, resetSeconds: 20, partitionKey: "ZmM6NTU6" },
      { policy: "perhr", quota: 1000, window: 3600, unit: "content-bytes" },
      { policy: "day", quota: 5000, window: 86400 },
      { policy: "other", remaining: 1, resetSeconds: 1 },
    ]);
  });

  it("express-rate-limit's draft-8: spaces after ';', pk as a Byte Sequence, several limiters in one field", () => {
    const info = parseRateLimit([
      ["RateLimit-Policy", '"5-in-1min"; q=5; w=60; pk=:NTcwYWJlOWU2YjNi:'],
      ["RateLimit", '"5-in-1min"; r=4; t=60'],
      ["RateLimit-Policy", '"100-in-1day"; q=100; w=86400; pk=:NTcwYWJlOWU2YjNi:'],
      ["RateLimit", '"100-in-1day"; r=99; t=86400'],
    ]);
    expect(info.policies).toEqual([
      { policy: "5-in-1min", quota: 5, window: 60, remaining: 4, resetSeconds: 60, partitionKey: "NTcwYWJlOWU2YjNi" },
      { policy: "100-in-1day", quota: 100, window: 86400, remaining: 99, resetSeconds: 86400, partitionKey: "NTcwYWJlOWU2YjNi" },
    ]);
  });

  it("a malformed RateLimit field is ignored entirely; the policies are still read", () => {
    const info = parseRateLimit({
      "ratelimit-policy": '"a";q=10;w=60',
      ratelimit: '"a";r=5;t=10, "b";r=oops=1',
    });
    expect(info.policies).toEqual([{ policy: "a", quota: 10, window: 60 }]);
  });

  it("a malformed RateLimit-Policy is ignored entirely; RateLimit alone still counts", () => {
    const info = parseRateLimit({ "ratelimit-policy": '"a";q=10;w=60,', ratelimit: '"a";r=5;t=10' });
    expect(info).toEqual({ style: "ietf", retryAfterSeconds: undefined, policies: [{ policy: "a", remaining: 5, resetSeconds: 10 }] });
  });

  it("parameters that are not non-negative Integers are left out; members that are not named are skipped", () => {
    const info = parseRateLimit({
      "ratelimit-policy": '"a";q=-1;w=1.5;qu=?1, 100;w=60, ("x");q=1',
      ratelimit: '"a";r="5";t=10, "a";r=1;t=1',
    });
    expect(info.policies).toEqual([{ policy: "a", resetSeconds: 10 }]);
  });

  it("duplicate names: the first member wins", () => {
    expect(parseRateLimit({ ratelimit: '"a";r=5;t=10, "a";r=1;t=1' }).policies).toEqual([{ policy: "a", remaining: 5, resetSeconds: 10 }]);
  });

  it("takes precedence over draft-6 and X-RateLimit", () => {
    const info = parseRateLimit({
      ratelimit: '"a";r=5;t=10',
      "ratelimit-limit": "7",
      "ratelimit-remaining": "1",
      "x-ratelimit-remaining": "2",
    });
    expect(info.style).toBe("ietf");
    expect(info.policies).toEqual([{ policy: "a", remaining: 5, resetSeconds: 10 }]);
  });
});

describe("draft-7 (RateLimit dictionary)", () => {
  it("reads limit, remaining, reset and the window of RateLimit-Policy", () => {
    expect(parseRateLimit({ ratelimit: "limit=100, remaining=42, reset=18", "ratelimit-policy": "100;w=60" })).toEqual({
      style: "draft-7",
      retryAfterSeconds: undefined,
      policies: [{ policy: "default", quota: 100, window: 60, remaining: 42, resetSeconds: 18 }],
    });
  });

  it("picks the policy member whose quota matches, else the first", () => {
    expect(parseRateLimit({ ratelimit: "limit=50, remaining=1, reset=5", "ratelimit-policy": "10;w=1, 50;w=60, 1000;w=3600" }).policies).toEqual([
      { policy: "default", quota: 50, window: 60, remaining: 1, resetSeconds: 5 },
    ]);
    expect(parseRateLimit({ ratelimit: "limit=7, remaining=1", "ratelimit-policy": "10;w=1, 50;w=60" }).policies).toEqual([
      { policy: "default", quota: 7, window: 1, remaining: 1 },
    ]);
  });

  it("wins over draft-6 and legacy fields; a malformed dictionary falls through to them", () => {
    expect(parseRateLimit({ ratelimit: "limit=100, remaining=42, reset=18", "x-ratelimit-remaining": "1" }).style).toBe("draft-7");
    const info = parseRateLimit({ ratelimit: "limit=100, remaining=42,", "ratelimit-remaining": "3" });
    expect(info).toEqual({ style: "draft-6", retryAfterSeconds: undefined, policies: [{ policy: "default", remaining: 3 }] });
  });
});

describe("draft-6 (RateLimit-Limit, -Remaining, -Reset)", () => {
  it("reads the three fields and the window of RateLimit-Policy", () => {
    const info = parseRateLimit(
      { "RateLimit-Limit": "100", "RateLimit-Remaining": "42", "RateLimit-Reset": "18", "RateLimit-Policy": "100;w=60" },
      { now: NOW },
    );
    expect(info).toEqual({
      style: "draft-6",
      retryAfterSeconds: undefined,
      policies: [{ policy: "default", quota: 100, window: 60, remaining: 42, resetSeconds: 18 }],
    });
  });

  it("draft-3's quota policies inside RateLimit-Limit", () => {
    expect(parseRateLimit({ "ratelimit-limit": "10, 10;w=1, 50;w=60", "ratelimit-remaining": "9" }).policies).toEqual([
      { policy: "default", quota: 10, remaining: 9 },
    ]);
    expect(parseRateLimit({ "ratelimit-limit": "10;w=1", "ratelimit-remaining": "9" }).policies).toEqual([
      { policy: "default", quota: 10, window: 1, remaining: 9 },
    ]);
  });

  it("a reset that is an epoch time is turned into seconds from now", () => {
    expect(parseRateLimit({ "ratelimit-reset": "1700000100" }, { now: NOW }).policies).toEqual([{ policy: "default", resetSeconds: 60 }]);
  });

  it("a value that is not a number is left out", () => {
    expect(parseRateLimit({ "ratelimit-limit": "ten", "ratelimit-remaining": "-1", "ratelimit-reset": "3" }).policies).toEqual([
      { policy: "default", resetSeconds: 3 },
    ]);
  });
});

describe("legacy X-RateLimit-*", () => {
  it("X-RateLimit-Reset as epoch seconds (> 1e9): seconds from now, rounded up, never negative", () => {
    const headers = { "x-ratelimit-limit": "60", "x-ratelimit-remaining": "59", "x-ratelimit-reset": "1700000060" };
    expect(parseRateLimit(headers, { now: NOW })).toEqual({
      style: "legacy",
      retryAfterSeconds: undefined,
      policies: [{ policy: "default", quota: 60, remaining: 59, resetSeconds: 20 }],
    });
    expect(parseRateLimit(headers, { now: NOW + 500 }).policies[0]?.resetSeconds).toBe(20);
    expect(parseRateLimit(headers, { now: NOW + 1_000 }).policies[0]?.resetSeconds).toBe(19);
    expect(parseRateLimit(headers, { now: NOW + 60_000 }).policies[0]?.resetSeconds).toBe(0);
  });

  it("X-RateLimit-Reset as epoch milliseconds (> 1e12) or as a delta", () => {
    expect(parseRateLimit({ "x-ratelimit-reset": "1700000045500" }, { now: NOW }).policies[0]?.resetSeconds).toBe(6);
    expect(parseRateLimit({ "x-ratelimit-reset": "45" }, { now: NOW }).policies[0]?.resetSeconds).toBe(45);
    expect(parseRateLimit({ "x-ratelimit-reset": "1.5" }, { now: NOW }).policies[0]?.resetSeconds).toBe(1.5);
  });

  it("reads Node's IncomingHttpHeaders and Map entries", () => {
    expect(parseRateLimit({ "x-ratelimit-remaining": ["3"], "content-length": 12, host: undefined }).policies).toEqual([
      { policy: "default", remaining: 3 },
    ]);
    expect(parseRateLimit(new Map([["X-RateLimit-Remaining", "4"]])).policies).toEqual([{ policy: "default", remaining: 4 }]);
  });
});

describe("Retry-After", () => {
  it("delay-seconds", () => {
    expect(parseRateLimit({ "retry-after": "120" }).retryAfterSeconds).toBe(120);
    expect(parseRateLimit({ "retry-after": " 0 " }).retryAfterSeconds).toBe(0);
  });

  it("an HTTP-date in any of the three forms: seconds from now, rounded up, never negative", () => {
    const now = Date.UTC(1994, 10, 6, 8, 49, 30, 500); // Sun, 06 Nov 1994 08:49:30.5 GMT
    expect(parseRateLimit({ "retry-after": "Sun, 06 Nov 1994 08:49:37 GMT" }, { now }).retryAfterSeconds).toBe(7);
    expect(parseRateLimit({ "retry-after": "Sunday, 06-Nov-94 08:49:37 GMT" }, { now }).retryAfterSeconds).toBe(7);
    expect(parseRateLimit({ "retry-after": "Sun Nov  6 08:49:37 1994" }, { now }).retryAfterSeconds).toBe(7);
    expect(parseRateLimit({ "retry-after": "Sun, 06 Nov 1994 08:49:00 GMT" }, { now }).retryAfterSeconds).toBe(0);
    expect(parseRateLimit({ "retry-after": new Date(NOW + 30_000).toUTCString() }, { now: NOW }).retryAfterSeconds).toBe(30);
  });

  it("invalid values are undefined", () => {
    for (const value of ["-1", "1.5", "soon", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "06 Nov 1994 08:49:37"]) {
      expect(parseRateLimit({ "retry-after": value }).retryAfterSeconds, value).toBeUndefined();
    }
  });

  it("the same value on two lines, combined by Headers", () => {
    const headers = new Headers();
    headers.append("Retry-After", "5");
    headers.append("Retry-After", "5");
    expect(parseRateLimit(headers).retryAfterSeconds).toBe(5);
  });
});

it("no rate-limit headers: no policies, no style", () => {
  expect(parseRateLimit(new Headers({ "content-type": "text/plain" }))).toEqual({ policies: [], retryAfterSeconds: undefined, style: undefined });
});
