/**
 * The cold-key table: it counts a key alone exactly as a tracked key's rate is counted (the
 * reference below is that count, one object per key), it never counts one key's requests toward
 * another's however many share its slots, and a hot key among many cold ones still turns hot.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ColdKeys } from "./cold-keys.js";

const MAX_AGE_MS = 1000;
const MIN_HITS = 4;

/** A tracked key's rate counting, one object per key: what the table must agree with for a key alone. */
function reference() {
  let seen = false;
  let since = 0;
  let hits = 0;
  let rate = 0;
  return (now: number): number => {
    if (!seen) {
      seen = true;
      since = now;
      hits = 1;
      return 0;
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
    return rate;
  };
}

/** The requests at which the table answers hot, and the rate it answered. */
function countAll(table: ColdKeys, requests: readonly { key: string; at: number }[]) {
  const warmed: { index: number; key: string; rate: number }[] = [];
  requests.forEach(({ key, at }, index) => {
    const rate = table.count(key, at);
    if (rate > 0) warmed.push({ index, key, rate });
  });
  return warmed;
}

describe("ColdKeys", () => {
  it("turns a key hot at its fourth request within a window, with the rate of that window", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    expect([0, 1, 2, 3].map((t) => table.count("k", t))).toEqual([0, 0, 0, 4 / 3]);
    // the key left the table: counted from its first request again
    expect([10, 11, 12, 13].map((t) => table.count("k", t))).toEqual([0, 0, 0, 4 / 3]);
  });

  it("ends a window at maxAgeMs: hot when the request ending it is the fourth, else counted afresh", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    expect([0, 500, 900, 1000].map((t) => table.count("a", t))).toEqual([0, 0, 0, 4 / 1000]);
    // two in a whole window: cold, and the request ending it starts the next window uncounted
    expect([0, 1000, 1001, 1002, 1003, 1004].map((t) => table.count("b", t))).toEqual([0, 0, 0, 0, 0, 4 / 4]);
    // whole ms: 0.9 and 1.2 are 0 and 1
    expect([0.9, 1.2, 2, 3.7].map((t) => table.count("c", t))).toEqual([0, 0, 0, 4 / 3]);
  });

  it("tells long keys apart by their ends and by characters spread between (a decision reads at most 128 of a key's characters)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 129, max: 4096 }), fc.nat(), fc.constantFrom("start", "end", "length"), (length, seed, where) => {
        // two keys of random letters, the same but for one character near an end, or one character more
        let s = seed;
        const chars = Array.from({ length }, () => {
          s = (Math.imul(s, 1103515245) + 12345) >>> 0;
          return String.fromCharCode(97 + (s % 26));
        });
        const key = chars.join("");
        const at = where === "start" ? s % 32 : length - 1 - (s % 32);
        const other = where === "length" ? `${key}x` : key.slice(0, at) + (key[at] === "a" ? "b" : "a") + key.slice(at + 1);
        const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
        // three of one within a window, then the other: counted as one key, that would be the fourth
        expect([key, key, key, other].map((k, i) => table.count(k, i))).toEqual([0, 0, 0, 0]);
        // and the long key alone is counted as any other
        const alone = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
        expect([key, key, key, key].map((k, i) => alone.count(k, i))).toEqual([0, 0, 0, 4 / 3]);
      }),
      { numRuns: 50 },
    );
  });

  it("counts afresh when the clock goes back (a store failing over), never reading a rate from it", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    expect([5000, 5001, 5002, 4000, 4001, 4002].map((t) => table.count("f", t))).toEqual([0, 0, 0, 0, 0, 0]);
    expect(table.count("f", 4003)).toBe(4 / 3);
  });

  it("reads an elapsed time across the 32-bit wrap of its clock", () => {
    const table = new ColdKeys(1024, MAX_AGE_MS, MIN_HITS);
    const start = 2 ** 32 - 2;
    expect([start, start + 1, start + 2, start + 3].map((t) => table.count("w", t))).toEqual([0, 0, 0, 4 / 3]);
    expect([start, start + 1000, start + 1001, start + 1002, start + 1003].map((t) => table.count("v", t))).toEqual([0, 0, 0, 0, 0]);
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
          expect(table.count(key, at)).toBe(expected);
          if (expected > 0) return;
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
});
