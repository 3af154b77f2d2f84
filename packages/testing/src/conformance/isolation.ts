/**
 * Isolation: two keys, or two prefixes, never share state; two limiters with the same prefix and
 * limits do. Keys are compared as exact strings (case, spaces, Unicode normalisation, hash tags).
 *
 * @module
 */
import { fixedWindow } from "@sluice/core";
import { expect, it } from "vitest";
import type { SuiteContext } from "./context.js";

/** Keys and prefixes never share state. */
export function testIsolation(suite: SuiteContext): void {
  it("keys and prefixes never share state; the same prefix and limits do", async () => {
    const policy = fixedWindow({ limit: 1, window: "1m" });
    const prefix = suite.prefix("iso");
    const a = suite.limiter(policy, prefix);
    const sameNamespace = suite.limiter(policy, prefix);
    const otherPrefix = suite.limiter(policy);
    suite.at(0);
    expect((await a.limit("k")).allowed).toBe(true);
    expect((await a.limit("k")).allowed).toBe(false);
    expect((await a.limit("k2")).allowed).toBe(true);
    expect((await otherPrefix.limit("k")).allowed).toBe(true);
    expect((await sameNamespace.limit("k")).allowed).toBe(false);
    // keys that differ only by case, by a trailing space or by unicode normalisation are distinct
    expect((await a.limit("K")).allowed).toBe(true);
    expect((await a.limit("k ")).allowed).toBe(true);
    expect((await a.limit("caf\u00e9")).allowed).toBe(true);
    expect((await a.limit("cafe\u0301")).allowed).toBe(true);
    expect((await a.limit("{tag}:with:colons")).allowed).toBe(true);
    expect((await a.limit("{tag}:with:colons")).allowed).toBe(false);
  });
}
