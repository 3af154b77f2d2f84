/**
 * The cold-key table: it counts a key alone exactly as a tracked key's rate is counted (the
 * reference below is that count, one object per key), it never counts one key's requests toward
 * another's however many share its slots, and a hot key among many cold ones still turns hot.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ColdKeys, coldSlots } from "./cold-keys.js";

const MAX_AGE_MS = 1000;
const MIN_HITS = 4;

/** A tracked key's rate counting, one object per key: what the table must agree with for a key alone. */
function reference() {
  let seen = false;
  let since = 0;
  let hits = 0;
  let rate = 0;
  return (now: number): { since: number; hits: number; rate: number } | undefined => {
    if (!seen) {
      seen = true;
      since = now;
      hits = 1;
      return undefined;
    }
    hits++;
    const elapsed = now - since;
    if (elapsed >= MAX_AGE_MS) {
      rate = hits >= MIN_HITS ? hits / elapsed : 0;
      hits = 0;
      since = now;
    } else if (hits >= MIN_HITS) {
      const young = hits / Math.max(1, elapsed);
      if (young > rate) rate = young;
    }
    return rate > 0 ? { since, hits, rate } : undefined;
  };
}

/** The requests at which the table answers hot, and what it answered. */
function countAll(table: ColdKeys, requests: readonly { key: string; at: number }[]) {
  const warmed: { index: number; key: string; since: number; hits: number; rate: number }[] = [];
  requests.forEach(({ key, at }, index) => {
    if (table.count(key, at)) warmed.push({ index, key, ...table.warmed });
  });
  return warmed;
}

describe("ColdKeys", () => {
  it("turns a key hot at its fourth request within a window, with the rate of that window", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    expect([0, 1, 2].map((t) => table.count("k", t))).toEqual([false, false, false]);
    expect(table.count("k", 3)).toBe(true);
    expect(table.warmed).toEqual({ since: 0, hits: 4, rate: 4 / 3 });
    // the key left the table: counted from its first request again
    expect([10, 11, 12].map((t) => table.count("k", t))).toEqual([false, false, false]);
  });

  it("ends a window at maxAgeMs: hot when the request ending it is the fourth, else counted afresh", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    expect([0, 500, 900].map((t) => table.count("a", t))).toEqual([false, false, false]);
    expect(table.count("a", 1000)).toBe(true);
    expect(table.warmed).toEqual({ since: 1000, hits: 0, rate: 4 / 1000 });
    // two in a whole window: cold, and the request ending it starts the next window uncounted
    expect([0, 1000, 1001, 1002, 1003].map((t) => table.count("b", t))).toEqual([false, false, false, false, false]);
    expect(table.count("b", 1004)).toBe(true);
    expect(table.warmed).toEqual({ since: 1000, hits: 4, rate: 4 / 4 });
  });

  it("counts a key alone exactly as a tracked key's rate is counted", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1500 }), { minLength: 1, maxLength: 60 }), fc.string({ maxLength: 40 }), (gaps, key) => {
        const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
        const model = reference();
        let at = 1_000_000;
        for (const gap of gaps) {
          at += gap;
          const expected = model(at);
          expect(table.count(key, at)).toBe(expected !== undefined);
          if (expected !== undefined) {
            expect(table.warmed).toEqual(expected);
            return;
          }
        }
      }),
    );
  });

  it("never counts one key's requests toward another's: keys seen three times each never turn hot, on a table far smaller than the keys", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 24 }), { minLength: 2000, maxLength: 3000 }), fc.nat(), (keys, seed) => {
        // each key three times, in a shuffled order, all within one window: only a key counted
        // with another's requests could reach four
        const requests = keys.flatMap((key) => [key, key, key]);
        let s = seed;
        for (let i = requests.length - 1; i > 0; i--) {
          s = (Math.imul(s, 1103515245) + 12345) >>> 0;
          const j = s % (i + 1);
          [requests[i], requests[j]] = [requests[j] as string, requests[i] as string];
        }
        const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
        expect(countAll(table, requests.map((key, i) => ({ key, at: i / requests.length })))).toEqual([]);
      }),
      { numRuns: 20 },
    );
  });

  it("turns a steady hot key hot within a few of its requests, among cold keys sharing its slots", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 40, maxLength: 40 }), fc.string({ minLength: 1, maxLength: 20 }), (others, hotKey) => {
        const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
        const requests: { key: string; at: number }[] = [];
        let cold = 0;
        others.forEach((n, i) => {
          // the hot key every 10 ms, and between its requests up to 5 keys never seen again
          requests.push({ key: hotKey, at: i * 10 });
          for (let k = 0; k < n; k++) requests.push({ key: `\u0000cold-${cold++}`, at: i * 10 + 1 });
        });
        // (the table counts the hot key afresh after each answer: a limiter tracks it from the first)
        const warmed = countAll(table, requests);
        expect(warmed.length).toBeGreaterThan(0);
        expect(warmed.every((w) => w.key === hotKey && w.rate > 0)).toBe(true);
        // within its first 20 requests: a cold key on its slot costs it at most 3 requests (its
        // count starts again), and 5 such keys among the first 100 others would be a 1-in-10^9 event
        expect(requests.slice(0, (warmed[0]?.index ?? 0) + 1).filter((r) => r.key === hotKey).length).toBeLessThanOrEqual(20);
      }),
    );
  });

  it("sizes the table at the power of two at or above maxKeys, from 1,024 to 65,536 slots", () => {
    expect([1, 1024, 1025, 10_000, 65_536, 1_000_000].map(coldSlots)).toEqual([1024, 1024, 2048, 16_384, 65_536, 65_536]);
  });
});
