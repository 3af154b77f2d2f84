/**
 * The limiter's side of concurrency leases (the cap itself is `algorithms/concurrency/`): drawing
 * a lease id for a request, reading the lease a caller hands back to `release`, and remembering the
 * leases the fallback store holds while the store is down.
 *
 * @module
 */
import { SluiceInputError, describe } from "./errors.js";
import type { Decision } from "./types.js";

/** One buffer for every lease id drawn (ids are drawn synchronously, one at a time). */
const LEASE_WORDS = new Uint32Array(2);

/**
 * A fresh lease id: a random positive safe integer (53 bits from `crypto.getRandomValues`,
 * available in every runtime Sluice runs on), so two requests of a key never share one.
 */
export function newLeaseId(): number {
  crypto.getRandomValues(LEASE_WORDS);
  const id = ((LEASE_WORDS[0] as number) & 0x1f_ffff) * 0x1_0000_0000 + (LEASE_WORDS[1] as number);
  return id === 0 ? 1 : id;
}

/** The lease decimal forms `limit()` hands out: a positive safe integer without leading zeros. */
const LEASE_TEXT = /^[1-9][0-9]{0,15}$/;

/**
 * The lease id in what a caller hands to `release`: a decision `limit()` returned, or its `lease`
 * string. `undefined` for a decision that holds no lease. Throws {@link SluiceInputError} (option
 * `lease`) for anything else.
 */
export function leaseIdOf(lease: unknown): number | undefined {
  let text: unknown = lease;
  if (typeof lease === "object" && lease !== null) {
    if (typeof (lease as Decision).now !== "number") {
      throw new SluiceInputError(`lease must be a Decision from limit() or its lease string (a positive integer); got ${describe(lease)}`, {
        option: "lease",
      });
    }
    text = (lease as Decision).lease;
    if (text === undefined) return undefined;
  }
  if (typeof text !== "string" || !LEASE_TEXT.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new SluiceInputError(`lease must be a Decision from limit() or its lease string (a positive integer); got ${describe(text)}`, {
      option: "lease",
    });
  }
  return Number(text);
}

/**
 * The leases the fallback store acquired while the store was down (they live only there, so their
 * release must go there): at most `max`, the oldest forgotten first.
 */
export class FallbackLeases {
  readonly #ids = new Set<number>();
  constructor(readonly max: number) {}
  add(id: number): void {
    if (this.#ids.size >= this.max) this.#ids.delete(this.#ids.values().next().value as number);
    this.#ids.add(id);
  }
  /** Forgets `id`; whether the fallback held it. */
  delete(id: number): boolean {
    return this.#ids.delete(id);
  }
}
