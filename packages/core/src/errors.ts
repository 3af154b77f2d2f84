/**
 * Errors thrown by Sluice. A denial is never an error: it is a {@link Decision} with
 * `allowed: false`. These classes are for misconfiguration and bad input only.
 *
 * @module
 */

/**
 * Where an error records the Sluice classes it belongs to (most derived first), so that `instanceof`
 * answers the same across two copies of this module: the ESM and CommonJS builds loaded side by
 * side, or an entry point (`@sluice/core/store`) bundled with its own copy. `Symbol.for` gives every
 * copy the same key.
 */
const CLASSES: unique symbol = Symbol.for("@sluice/core:error-classes") as never;

/** The class name `instanceof` checks for, kept on each class (it survives minifiers that rename classes). */
const CLASS_NAME: unique symbol = Symbol.for("@sluice/core:error-class-name") as never;

/** Base class of every error Sluice throws. Messages start with `[sluice]`. */
export class SluiceError extends Error {
  /** @internal */
  static readonly [CLASS_NAME]: string = "SluiceError";

  /**
   * `error instanceof SluiceConfigError` (or any Sluice error class) is true for an error made by
   * that class in any copy of `@sluice/core`, not only this one.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    // only Sluice's own classes match by name: a subclass of yours keeps the ordinary check
    if (typeof value !== "object" || value === null || !Object.prototype.hasOwnProperty.call(this, CLASS_NAME)) return false;
    const classes = (value as { [CLASSES]?: unknown })[CLASSES];
    return Array.isArray(classes) && classes.includes((this as unknown as { [CLASS_NAME]: string })[CLASS_NAME]);
  }

  override name: string = "SluiceError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message.startsWith("[sluice]") ? message : `[sluice] ${message}`, options);
    const classes: string[] = [];
    for (let c: unknown = new.target; typeof c === "function" && CLASS_NAME in c; c = Object.getPrototypeOf(c)) {
      const name = (c as { [CLASS_NAME]: string })[CLASS_NAME];
      if (!classes.includes(name)) classes.push(name);
    }
    Object.defineProperty(this, CLASSES, { value: classes, enumerable: false });
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
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceConfigError";
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
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceInputError";
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
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceTimeoutError";
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
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceStoreError";
  override name = "SluiceStoreError" as const;
  /**
   * `true` when the store certainly did not carry the call out: it never reached the store (the
   * connection was refused, the client was closed). A refund that failed so can be made again
   * (`RateLimiter.refund` keeps the decision's units refundable); after any other failure the
   * store may have applied the call.
   */
  readonly notApplied: boolean;

  constructor(message: string, options?: { cause?: unknown; notApplied?: boolean }) {
    super(message, options);
    this.notApplied = options?.notApplied === true;
  }
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
