/**
 * The keys reservations have seen but not yet believed hot, counted without an object per key.
 *
 * DESIGN: most keys of a public API are cold (an IP seen once a minute), and a limiter with
 * `reserve` on must not make them dearer. Tracking each one as an object in a map of `maxKeys`
 * costs an allocation per new key, a lookup into a map too large for the CPU's caches, and a second
 * lookup once the store has answered. Here a cold key is one slot of a fixed table of typed-array
 * numbers instead, chosen by a hash of the key: the slot keeps a fingerprint of the key (a second,
 * independent hash), the start of its counting window and the requests seen in it, exactly as a
 * tracked key's rate is counted. The key is tracked as an object only on the request that makes
 * its rate believed; until then it allocates nothing.
 *
 * Two keys on one slot take it in turn (the newer resets the count), so the table can only
 * undercount a key: a hot key shares its slot with a cold one now and then and still turns hot
 * within a few requests, and no cold key is ever taken for hot (short of two keys agreeing in both
 * 32-bit hashes, and then the key tracked measures its own rate from there).
 *
 * @module
 */

/** The fewest and the most slots of a table (a power of two between). */
const MIN_SLOTS = 1 << 10;
const MAX_SLOTS = 1 << 16;
/**
 * A slot is two 32-bit integers: the key's fingerprint (29 bits of a second hash) with its hits in
 * the window (3 bits: at most {@link MAX_HITS}; 0 with fingerprint 0 is an empty slot), and its
 * window's start (store ms, wrapping every 2^32 ms: an elapsed time is exact up to 24 days, and a
 * slot left that long reads as a new window or, at worst, a younger one).
 */
const WIDTH = 2;
const HITS_BITS = 3;
const HITS_MASK = (1 << HITS_BITS) - 1;
/** The most `minHits` a table counts to. */
export const MAX_HITS = HITS_MASK;

/** What a key that just turned hot was counted at: where its tracking starts from. */
export interface Warmed {
  /** The start of its counting window (local ms), its requests in that window, and its rate (per ms, > 0). */
  since: number;
  hits: number;
  rate: number;
}

/** Slots for a table beside `maxKeys` tracked keys: the power of two at or above it, within the bounds. */
export function coldSlots(maxKeys: number): number {
  let slots = MIN_SLOTS;
  while (slots < maxKeys && slots < MAX_SLOTS) slots *= 2;
  return slots;
}

/** A table of cold keys' counts (see the module notes). */
export class ColdKeys {
  readonly #cells: Int32Array;
  readonly #mask: number;
  readonly #maxAgeMs: number;
  readonly #minHits: number;
  /** Written by {@link ColdKeys.count} when it answers `true` (one object, reused: nothing allocated). */
  readonly warmed: Warmed = { since: 0, hits: 0, rate: 0 };

  /**
   * @param slots a power of two (see {@link coldSlots})
   * @param maxAgeMs the length of a counting window (ms)
   * @param minHits the fewest requests before a key's rate is believed (at most {@link MAX_HITS})
   */
  constructor(slots: number, maxAgeMs: number, minHits: number) {
    this.#cells = new Int32Array(slots * WIDTH);
    this.#mask = slots - 1;
    this.#maxAgeMs = maxAgeMs;
    this.#minHits = minHits;
  }

  /**
   * Counts a request for `key` at `now` (ms, whole or not: counted whole). Answers `true` when it
   * makes the key's rate believed: its slot is freed, and {@link ColdKeys.warmed} says what it was
   * counted at (the caller tracks the key from there). Counted as a tracked key's rate is:
   * `minHits` requests within a window of `maxAgeMs`, or a window that ends with `minHits` in it
   * (the request that ends it included, and not counted in the next).
   */
  count(key: string, now: number): boolean {
    // two 32-bit hashes in one pass: FNV-1a for the slot, a multiply-xorshift for the fingerprint
    let a = 0x811c9dc5;
    let b = 0x9747b28c ^ key.length;
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    a ^= a >>> 16;
    a = Math.imul(a, 0x85ebca6b);
    a ^= a >>> 13;
    const cells = this.#cells;
    const at = (a & this.#mask) * WIDTH;
    // never 0 with its hits (an empty slot reads as fingerprint 0, hits 0)
    const tag = (b | 1) << HITS_BITS;
    const ms = Math.floor(now) | 0;
    const word = cells[at] as number;
    if ((word & ~HITS_MASK) !== tag) {
      // a key not counted here (or pushed out by another): its first request
      cells[at] = tag | 1;
      cells[at + 1] = ms;
      return false;
    }
    const hits = (word & HITS_MASK) + 1;
    const since = cells[at + 1] as number;
    const elapsed = (ms - since) | 0;
    let rate = 0;
    if (elapsed >= this.#maxAgeMs) {
      if (hits >= this.#minHits) rate = hits / elapsed;
      else {
        // too few requests in a whole window: still cold, counted afresh from now
        cells[at] = tag;
        cells[at + 1] = ms;
        return false;
      }
    } else if (hits >= this.#minHits) rate = hits / Math.max(1, elapsed);
    else {
      cells[at] = tag | hits;
      return false;
    }
    // believed: the key leaves the table for its own tracking
    cells[at] = 0;
    const warmed = this.warmed;
    if (elapsed >= this.#maxAgeMs) {
      warmed.since = now;
      warmed.hits = 0;
    } else {
      warmed.since = now - elapsed;
      warmed.hits = hits;
    }
    warmed.rate = rate;
    return true;
  }
}
