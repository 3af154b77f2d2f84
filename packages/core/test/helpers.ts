/**
 * Helpers shared by core's tests: the check every configuration error passes, the hints its
 * messages repeat, and a store that counts the calls it is asked.
 */
import { expect } from "vitest";
import { type MemoryStore, SluiceConfigError, type Store } from "../src/index.js";

/**
 * `make` throws a {@link SluiceConfigError} with `message` (a regular expression, or a string the
 * message contains), code `SLUICE_CONFIG`, its message starting with the option it names.
 */
export function expectConfigError(make: () => unknown, message: string | RegExp) {
  expect(make).toThrow(SluiceConfigError);
  expect(make).toThrow(message);
  let error: SluiceConfigError | undefined;
  try {
    make();
  } catch (thrown) {
    error = thrown as SluiceConfigError;
  }
  expect(error?.code).toBe("SLUICE_CONFIG");
  // one format: the message starts with the option the error names (errors.test.ts pins each option)
  expect(error?.message.startsWith(`[sluice] ${error.option} `), error?.message).toBe(true);
}

/** The hint of every duration option's message. */
export const DURATION_HINT = 'must be a duration: a positive integer of milliseconds or a string like "500ms", "10s", "1m", "1h", "1d"';
/** The hint of every name's message (a policy's name, the prefix). */
export const NAME_HINT =
  'must be 1-128 visible ASCII characters without spaces, quotes, backslashes, commas, semicolons, "=", parentheses or braces';

/** A store that counts calls and delegates to a MemoryStore. */
export function countingStore(inner: MemoryStore) {
  const calls = { consume: 0, peek: 0, reset: 0, refund: 0, release: 0 };
  const store: Store = {
    bind(namespace) {
      const bound = inner.bind(namespace);
      return {
        consume: (key, cost) => (calls.consume++, bound.consume(key, cost)),
        peek: (key) => (calls.peek++, bound.peek(key)),
        reset: (key) => (calls.reset++, bound.reset(key)),
        refund: (key, cost, charge) => (calls.refund++, bound.refund(key, cost, charge)),
        release: (key, lease) => (calls.release++, bound.release(key, lease)),
      };
    },
  };
  return { store, calls };
}
