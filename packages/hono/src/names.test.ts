/**
 * Names are data through the Hono middleware too: tiers, policies and keys named like members of
 * `Object.prototype` limit, count and write headers exactly as ordinary names do.
 */
import { MemoryStore, type Policy, fixedWindow } from "@sluice/core";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { rateLimiter } from "./index.js";

/** A whole minute in epoch ms. */
const T0 = 1_700_000_040_000;
const NAMES = ["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"];

describe.each(NAMES)("the name %j", (name) => {
  it("as a tier, its policy and the key: one request, then a 429 with the tier's headers", async () => {
    const tiers: Record<string, Policy[]> = { other: [fixedWindow({ limit: 5, window: "1m", name: "base" })] };
    // defined, not assigned: assigning __proto__ (Object.assign too) would set the prototype
    Object.defineProperty(tiers, name, { value: [fixedWindow({ limit: 1, window: "1m", name })], enumerable: true });
    const app = new Hono();
    app.use(
      rateLimiter({
        store: new MemoryStore({ clock: () => T0 }),
        tiers,
        tier: (c) => c.req.header("x-tier") ?? name,
        tierCacheTtlMs: 0,
        key: () => name,
        headers: "ietf",
      }),
    );
    app.get("/", (c) => c.text("ok"));
    const first = await app.request("/");
    expect([first.status, first.headers.get("ratelimit"), first.headers.get("ratelimit-policy")]).toEqual([200, `"${name}";r=0;t=60`, `"${name}";q=1;w=60`]);
    const second = await app.request("/");
    expect(second.status).toBe(429);
    expect(Object.fromEntries(second.headers)).toEqual({
      "content-type": "application/problem+json",
      ratelimit: `"${name}";r=0;t=60`,
      "ratelimit-policy": `"${name}";q=1;w=60`,
      "retry-after": "60",
    });
    expect(await second.json()).toMatchObject({ "violated-policies": [name], retryAfter: 60 });
    // the other tier counts the same key apart
    const other = await app.request("/", { headers: { "x-tier": "other" } });
    expect([other.status, other.headers.get("ratelimit")]).toEqual([200, '"base";r=4;t=60']);
  });
});
