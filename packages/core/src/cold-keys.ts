/**
 * The keys reservations have seen but not yet believed hot, counted without an object per key.
 *
 * DESIGN: most keys of a public API are cold (an IP seen once a minute), and a limiter with
 * `reserve` on must not make them dearer. Tracking each one as an object in a map of `maxKeys`
 * costs an allocation per new key, a lookup into a map too large for the CPU's caches, and a second
 * lookup once the store has answered. Here a cold key is one slot of a fixed table of typed-array
 * numbers instead, chosen by a hash of the key: the slot keeps a fingerprint of the key (29 bits
 * of a second, independent hash), the start of its counting window and the requests seen in it,
 * counted as a tracked key's rate is. The key is tracked as an object only from the count that
 * makes its rate believed; until then it allocates nothing.
 *
 * Two keys on one slot take it in turn (the newer resets the count), so the table can only
 * undercount a key: a hot key shares its slot with a cold one now and then and still turns hot
 * within a few requests, and no cold key is ever taken for hot (short of two keys agreeing in slot
 * and fingerprint, and then the key tracked measures its own rate from there).
 *
 * @module
 */

/**
 * Slots of a table: 4,096 (32 KB, within a core's first-level data cache). Measured on Redis (a
 * decision's CPU in this process, 60,000 keys each seen once a second, the table's share of the
 * profile): 65,536 slots (512 KB) cost about 2%, 16,384 about 1.5–1.8%, 4,096 about 1–1.3%, 1,024
 * about 0.5–0.8%: past the first-level cache every count is a cache miss. What a small table gives
 * up: a hot key's count starts again when another key takes its slot, so among N keys new to the
 * table each second a key at r requests a second is counted to 4 in a row with odds of about
 * exp(−3N / (4,096 r)) per try (a try every 4/r s): with 1,000 new keys a second every key at 4 a
 * second or more turns hot within seconds; with 60,000 a second, a key at 50 a second within a
 * fraction of a second (odds 0.4 a try), one at 10 a second only after half a minute or so.
 */
export const COLD_SLOTS = 1 << 12;

/**
 * A slot is two 32-bit integers: the key's fingerprint (29 bits of a second hash) with its hits in
 * the window (3 bits: at most 7; 0 with fingerprint 0 is an empty slot), and its
 * window's start (store ms, wrapping every 2^32 ms: an elapsed time is exact up to 24 days, and a
 * slot left that long reads as a new window or, at worst, a younger one).
 */
const WIDTH = 2;
const HITS_BITS = 3;
const HITS_MASK = (1 << HITS_BITS) - 1;
/** Keys up to this long are hashed whole; longer ones by their first and last `EDGE` characters and `SAMPLES` between. */
const WHOLE = 128;
const EDGE = 32;
const SAMPLES = 64;

/** A table of cold keys' counts (see the module notes). */
export class ColdKeys {
  readonly #cells: Int32Array;
  readonly #mask: number;
  readonly #maxAgeMs: number;
  readonly #minHits: number;

  /**
   * @param slots a power of two ({@link COLD_SLOTS} but in tests)
   * @param maxAgeMs the length of a counting window (ms)
   * @param minHits the fewest requests before a key's rate is believed (at most 7)
   */
  constructor(slots: number, maxAgeMs: number, minHits: number) {
    this.#cells = new Int32Array(slots * WIDTH);
    this.#mask = slots - 1;
    this.#maxAgeMs = maxAgeMs;
    this.#minHits = minHits;
  }

  /**
   * Counts a request for `key` at `now` (ms, whole or not: counted whole). Answers the key's rate
   * (requests per ms) when this request makes it believed, and the key leaves the table (the
   * caller tracks it from there); else 0. Counted as a tracked key's rate is: `minHits` requests
   * within a window of `maxAgeMs` (the rate of that young window), or a window that ends with
   * `minHits` in it (the request that ends it included, and not counted in the next).
   */
  count(key: string, now: number): number {
    // two 32-bit hashes in one pass: FNV-1a for the slot, a multiply-xorshift for the fingerprint.
    // A key of up to WHOLE characters is hashed whole; a longer one by its first and last EDGE
    // and SAMPLES evenly spaced between (with its length): a decision reads at most 128 of its
    // characters, however long the key (up to 4,096; a token as a key is a few hundred)
    const n = key.length;
    let a = 0x811c9dc5;
    let b = 0x9747b28c ^ n;
    // one pass over [i, stop) by `step`: the whole key, or its first EDGE, the middle sampled, its last EDGE
    let i = 0;
    let step = 1;
    let stop = n <= WHOLE ? n : EDGE;
    for (;;) {
      for (; i < stop; i += step) {
        const c = key.charCodeAt(i);
        a = Math.imul(a ^ c, 0x01000193);
        b = Math.imul(b ^ c, 0x5bd1e995);
        b ^= b >>> 15;
      }
      if (stop === n) break;
      if (stop === EDGE) {
        step = Math.ceil((n - 2 * EDGE) / SAMPLES);
        stop = n - EDGE;
      } else {
        i = n - EDGE;
        step = 1;
        stop = n;
      }
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
    const elapsed = (ms - (cells[at + 1] as number)) | 0;
    if ((word & ~HITS_MASK) !== tag || elapsed < 0) {
      // a key not counted here (or pushed out by another), or a store clock that went back (a
      // failover): counted from this request, as a key first seen
      cells[at] = tag | 1;
      cells[at + 1] = ms;
      return 0;
    }
    const hits = (word & HITS_MASK) + 1;
    let rate: number;
    if (elapsed >= this.#maxAgeMs) {
      if (hits < this.#minHits) {
        // too few requests in a whole window: still cold, counted afresh from now
        cells[at] = tag;
        cells[at + 1] = ms;
        return 0;
      }
      rate = hits / elapsed;
    } else if (hits >= this.#minHits) rate = hits / Math.max(1, elapsed);
    else {
      cells[at] = tag | hits;
      return 0;
    }
    // believed: the key leaves the table for its own tracking
    cells[at] = 0;
    return rate;
  }
}
