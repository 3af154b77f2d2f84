/**
 * Policy names a server sends are data: a policy called like a member of `Object.prototype` is read,
 * joined across the two IETF fields and kept apart from the others like any other name.
 */
import { describe, expect, it } from "vitest";
import { parseRateLimit } from "./index.js";

const NAMES = ["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"];

describe("parseRateLimit: names of Object.prototype's members", () => {
  it("joins each by name across RateLimit-Policy and RateLimit, in the server's order", () => {
    const headers = new Headers({
      "RateLimit-Policy": NAMES.map((name, i) => `"${name}";q=${10 + i};w=60`).join(", "),
      RateLimit: [...NAMES].reverse().map((name, i) => `"${name}";r=${i};t=${30 + i}`).join(", "),
    });
    expect(parseRateLimit(headers).policies).toEqual([
      { policy: "toString", quota: 10, window: 60, remaining: 4, resetSeconds: 34 },
      { policy: "constructor", quota: 11, window: 60, remaining: 3, resetSeconds: 33 },
      { policy: "__proto__", quota: 12, window: 60, remaining: 2, resetSeconds: 32 },
      { policy: "hasOwnProperty", quota: 13, window: 60, remaining: 1, resetSeconds: 31 },
      { policy: "valueOf", quota: 14, window: 60, remaining: 0, resetSeconds: 30 },
    ]);
  });

  it("a name only RateLimit carries is a policy of its own, not a member", () => {
    const info = parseRateLimit({ ratelimit: '"__proto__";r=0;t=5, "toString";r=3;t=1' });
    expect(info.policies).toEqual([
      { policy: "__proto__", remaining: 0, resetSeconds: 5 },
      { policy: "toString", remaining: 3, resetSeconds: 1 },
    ]);
    expect(Object.getPrototypeOf(info.policies[0])).toBe(Object.prototype);
  });
});
