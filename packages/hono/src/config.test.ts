/**
 * Configuration errors of the Hono middleware are thrown by `rateLimiter()` itself, as a
 * `SluiceConfigError` naming the option (`code: "SLUICE_CONFIG"`), never at the first request.
 */
import { MemoryStore, RateLimiter, SluiceConfigError, fixedWindow, slidingWindow } from "@sluice/core";
import { describe, expect, it } from "vitest";
import { type HonoRateLimiterOptions, rateLimiter } from "./index.js";

/** A whole minute (and second) in epoch ms, so window arithmetic is easy to read. */
const T0 = 1_700_000_040_000;

/** A memory store on a clock the test moves by hand. */
function clock(start = T0) {
  const state = { t: start };
  return { state, store: new MemoryStore({ clock: () => state.t }) };
}

function threePerMinute(store: MemoryStore) {
  return new RateLimiter({ store, limits: fixedWindow({ limit: 3, window: "1m" }) });
}

describe("configuration errors are thrown by rateLimiter(), not at the first request", () => {
  const { store } = clock();
  const limiter = threePerMinute(store);
  // [label, options, message, option]: every option of rateLimiter(), with its path; the tag is hono's
  const free = fixedWindow({ limit: 1, window: "1m" });
  const cases: [string, unknown, RegExp, string][] = [
    ["no options", undefined, /^\[sluice\] \[hono\] options must be an object with limiter \(or tiers\) and key \(or trust\); got undefined$/, "options"],
    ["neither key nor trust", { limiter }, /^\[sluice\] \[hono\] key must be a function \(c\) => string, or give trust .*got undefined$/, "key"],
    ["key that is not a function", { limiter, key: "x-api-key" }, /^\[sluice\] \[hono\] key must be a function .*got "x-api-key"$/, "key"],
    ["key and trust", { limiter, key: () => "k", trust: 1 }, /^\[sluice\] \[hono\] trust must be left out when key is given/, "trust"],
    ["bad trust", { limiter, trust: "x-forwarded-for" }, /^\[sluice\] \[hono\] trust must be "cloudflare", "vercel" or a positive integer/, "trust"],
    ["trust 0", { limiter, trust: 0 }, /^\[sluice\] \[hono\] trust must be/, "trust"],
    ["bad ipv6Subnet", { limiter, trust: "cloudflare", ipv6Subnet: 129 }, /^\[sluice\] \[hono\] ipv6Subnet must be an integer from 1 to 128; got 129$/, "ipv6Subnet"],
    ["ipv6Subnet without trust", { limiter, key: () => "k", ipv6Subnet: 56 }, /^\[sluice\] \[hono\] ipv6Subnet must be left out without trust/, "ipv6Subnet"],
    ["no limiter or tiers", { key: () => "k" }, /^\[sluice\] \[hono\] limiter must be a RateLimiter \(or give tiers\); got undefined$/, "limiter"],
    ["limiter and tiers", { limiter, tiers: { free }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers must be left out when limiter is given/, "tiers"],
    ["cost 0", { limiter, key: () => "k", cost: 0 }, /^\[sluice\] \[hono\] cost must be a positive safe integer or a function; got 0$/, "cost"],
    ["cost 1.5", { limiter, key: () => "k", cost: 1.5 }, /cost must be/, "cost"],
    ["skip not a function", { limiter, key: () => "k", skip: true }, /^\[sluice\] \[hono\] skip must be a function; got true$/, "skip"],
    ["onLimited not a function", { limiter, key: () => "k", onLimited: 429 }, /^\[sluice\] \[hono\] onLimited must be a function; got 429$/, "onLimited"],
    ["onDecision not a function", { limiter, key: () => "k", onDecision: "log" }, /^\[sluice\] \[hono\] onDecision must be a function/, "onDecision"],
    ["countWhen not a function", { limiter, key: () => "k", countWhen: 400 }, /^\[sluice\] \[hono\] countWhen must be a function/, "countWhen"],
    ["onCallbackError not a function", { limiter, key: () => "k", onCallbackError: {} }, /^\[sluice\] \[hono\] onCallbackError must be a function/, "onCallbackError"],
    ["ietf with draft-7", { limiter, key: () => "k", headers: ["ietf", "draft-7"] }, /"ietf" and "draft-7", which both write/, "headers"],
    ["unknown header style", { limiter, key: () => "k", headers: "draft-8" }, /^\[sluice\] \[hono\] headers must be/, "headers"],
    ["partitionKey", { limiter, key: () => "k", partitionKey: "yes" }, /^\[sluice\] \[hono\] partitionKey must be/, "partitionKey"],
    ["dryRunHeaders", { limiter, key: () => "k", dryRunHeaders: "yes" }, /^\[sluice\] \[hono\] dryRunHeaders must be true or false/, "dryRunHeaders"],
    ["tiers without tier", { tiers: { free }, key: () => "k" }, /^\[sluice\] \[hono\] tier must be a function/, "tier"],
    ["empty tiers", { tiers: {}, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers must be an object/, "tiers"],
    ["a tier's policy", { tiers: { free: [free, "x"] }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers\.free\[1\] must be a policy/, "tiers.free[1]"],
    ["a tier's mode", { tiers: { free: { limits: free, mode: "off" } }, tier: () => "free", key: () => "k" }, /^\[sluice\] \[hono\] tiers\.free\.mode must be/, "tiers.free.mode"],
    ["negative tierCacheTtlMs", { tiers: { free }, tier: () => "free", key: () => "k", tierCacheTtlMs: -1 }, /^\[sluice\] \[hono\] tierCacheTtlMs must be/, "tierCacheTtlMs"],
    ["zero tierCacheMaxKeys", { tiers: { free }, tier: () => "free", key: () => "k", tierCacheMaxKeys: 0 }, /^\[sluice\] \[hono\] tierCacheMaxKeys must be/, "tierCacheMaxKeys"],
    ["a tiered prefix", { tiers: { free }, tier: () => "free", key: () => "k", prefix: "a b" }, /^\[sluice\] \[hono\] prefix must be/, "prefix"],
    ["a tiered store", { tiers: { free }, tier: () => "free", key: () => "k", store: {} }, /^\[sluice\] \[hono\] store must be a Store/, "store"],
    ["a tiered mode", { tiers: { free }, tier: () => "free", key: () => "k", mode: "shadow" }, /^\[sluice\] \[hono\] mode must be/, "mode"],
    ["a tiered denyCache", { tiers: { free }, tier: () => "free", key: () => "k", denyCache: { maxKeys: -1 } }, /^\[sluice\] \[hono\] denyCache\.maxKeys must be/, "denyCache.maxKeys"],
    ["a tiered onStoreError", { tiers: { free }, tier: () => "free", key: () => "k", onStoreError: "open" }, /^\[sluice\] \[hono\] onStoreError must be/, "onStoreError"],
    ["a tiered onStoreFailure", { tiers: { free }, tier: () => "free", key: () => "k", onStoreFailure: 1 }, /^\[sluice\] \[hono\] onStoreFailure must be a function/, "onStoreFailure"],
    ["a tiered timeoutMs", { tiers: { free }, tier: () => "free", key: () => "k", timeoutMs: 0 }, /^\[sluice\] \[hono\] timeoutMs must be/, "timeoutMs"],
  ];

  it.each(cases)("%s", (_name, options, message, option) => {
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(SluiceConfigError);
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(message);
    expect(() => rateLimiter(options as HonoRateLimiterOptions)).toThrow(expect.objectContaining({ code: "SLUICE_CONFIG", option }));
  });

  it("a valid configuration does not throw", () => {
    expect(() => rateLimiter({ limiter, trust: "cloudflare" })).not.toThrow();
    expect(() => rateLimiter({ limiter: new RateLimiter({ limits: slidingWindow({ limit: 1, window: "1s" }) }), key: () => "k" })).not.toThrow();
  });
});
