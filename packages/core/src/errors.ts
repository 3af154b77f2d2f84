/**
 * Errors thrown by Sluice. A denial is never an error: it is a {@link Decision} with
 * `allowed: false`. These classes are for misconfiguration and bad input only.
 *
 * @module
 */

/** Base class of every error Sluice throws. Messages start with `[sluice]`. */
export class SluiceError extends Error {
  override name: string = "SluiceError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message.startsWith("[sluice]") ? message : `[sluice] ${message}`, options);
  }
}

/**
 * A configuration mistake: thrown synchronously by factories and constructors (and by a tiered
 * guard at the first request that names an unknown tier). The message names the option, the value
 * and what is allowed.
 *
 * @example
 * ```ts
 * try { fixedWindow({ limit: 0, window: "1m" }); }
 * catch (e) { e instanceof SluiceConfigError; // true: "limit must be a positive safe integer, got 0"
 * }
 * ```
 */
export class SluiceConfigError extends SluiceError {
  override name = "SluiceConfigError" as const;
}

/**
 * Bad input at request time (a cost that is not a positive safe integer, a key that is not a
 * non-empty string). Thrown before any state is read or written.
 *
 * @example
 * ```ts
 * await limiter.limit("user:1", { cost: 0 }); // rejects with SluiceInputError
 * ```
 */
export class SluiceInputError extends SluiceError {
  override name = "SluiceInputError" as const;
}

/**
 * A store call that did not answer within the limiter's `timeoutMs` (default 1000 ms for
 * asynchronous stores). The limiter treats it as a store failure (`reason: "timeout"`) and follows
 * its `onStoreError`; it reaches `onStoreFailure`, never the caller of `limit()`.
 *
 * @example
 * ```ts
 * new RateLimiter({ store, limits, onStoreFailure: (e) => { if (e instanceof SluiceTimeoutError) metrics.timeouts++; } });
 * ```
 */
export class SluiceTimeoutError extends SluiceError {
  override name = "SluiceTimeoutError" as const;
}

/**
 * A store failed or answered something malformed (a reply of the wrong shape, say). The limiter
 * treats it as a store failure (`reason: "store-error"`) and follows its `onStoreError`.
 *
 * @example
 * ```ts
 * onStoreFailure: (e) => { if (e instanceof SluiceStoreError) log.warn(e.message, e.cause); }
 * ```
 */
export class SluiceStoreError extends SluiceError {
  override name = "SluiceStoreError" as const;
}

/** Formats a value for an error message: strings quoted, everything else as written in code. */
export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "function") return "a function";
  return "an object";
}
