/**
 * Errors thrown by Sluice. A denial is never an error: it is a {@link Decision} with
 * `allowed: false`. These classes are for misconfiguration, bad input and store failures only.
 *
 * **Matching.** Every error has a stable `code` (one per class, see {@link SluiceErrorCode}); a
 * configuration or input error also has `option`, the option or argument it is about, as a path
 * from the argument of the call that threw:
 *
 * ```ts
 * if (error instanceof SluiceError && error.code === "SLUICE_CONFIG" && error.option === "limit") …
 * ```
 *
 * **Paths.** A factory names its own options (`"limit"`, `"window"`, `"block.base"`); a constructor
 * or function that holds a list or a map names the path from its own options: `"limits[1]"`,
 * `"tiers.pro.limits[0]"`, `"tiers.pro.mode"`, `"denyCache.maxKeys"`. Where Sluice runs a factory
 * on your behalf (the Durable Object rebuilding policies from their wire form), the factory's path
 * is put under the holder's (`"policies[0].limit"`). Request-time arguments are named as the
 * method takes them: `"key"`, `"cost"`, `"lease"`, `"decision"`, `"options"` (the options argument
 * itself, when it is not an object).
 *
 * **Messages.** One format in every package: `[sluice] [<package>] <option> must be <what is
 * allowed>; got <the value>`, e.g. `[sluice] [redis] clock must be "server" or "client"; got "x"`.
 * Core leaves out its tag (`[sluice] limit must be a positive safe integer; got 0`), and
 * configuration an adapter hands to core carries the adapter's tag (`[sluice] [hono] key must be
 * …`). Messages are for people and may be reworded; match `code` and `option`.
 *
 * @module
 */
/**
 * Where an error records the Sluice classes it belongs to (most derived first), so that `instanceof`
 * answers the same across two copies of this module: the ESM and CommonJS builds loaded side by
 * side, or an entry point (`@sluice/core/store`) bundled with its own copy. `Symbol.for` gives every
 * copy the same key; `@sluice/client`, which depends on nothing, marks its option errors with it
 * too (`["SluiceConfigError", "SluiceError"]`).
 */
const CLASSES: unique symbol = Symbol.for("@sluice/core:error-classes") as never;

/** The class name `instanceof` checks for, kept on each class (it survives minifiers that rename classes). */
const CLASS_NAME: unique symbol = Symbol.for("@sluice/core:error-class-name") as never;

/**
 * The stable code of each error class, for programs to match (`error.code === "SLUICE_CONFIG"`).
 * One per class; a code never changes meaning, and new ones are only added.
 *
 * | code | class | when |
 * |---|---|---|
 * | `"SLUICE_CONFIG"` | {@link SluiceConfigError} | an option is wrong (thrown by factories and constructors) |
 * | `"SLUICE_INPUT"` | {@link SluiceInputError} | an argument of a request-time call is wrong (`key`, `cost`, …), before any state is touched |
 * | `"SLUICE_TIMEOUT"` | {@link SluiceTimeoutError} | a store call did not answer within `timeoutMs` |
 * | `"SLUICE_STORE"` | {@link SluiceStoreError} | a store failed or answered something malformed |
 * | `"SLUICE_ERROR"` | {@link SluiceError} | the base class made directly; Sluice itself never throws it |
 */
export type SluiceErrorCode = "SLUICE_ERROR" | "SLUICE_CONFIG" | "SLUICE_INPUT" | "SLUICE_TIMEOUT" | "SLUICE_STORE";

/**
 * Base class of every error Sluice throws. Messages start with `[sluice]`; `code` says which kind
 * of error it is.
 *
 * @example
 * ```ts
 * try { await limiter.limit(key); }
 * catch (e) { if (e instanceof SluiceError) log.error(e.code, e.message); }
 * ```
 */
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
  /** What kind of error this is, stable across versions: see {@link SluiceErrorCode}. */
  readonly code: SluiceErrorCode = "SLUICE_ERROR";
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

/** What a {@link SluiceConfigError} or {@link SluiceInputError} is made with. */
export interface SluiceOptionErrorOptions {
  /** The option or argument path the error is about: `"limit"`, `"limits[1]"`, `"block.base"`, `"cost"`. */
  option: string;
  /** The error that caused this one, if any. */
  cause?: unknown;
}

/**
 * A configuration mistake: thrown synchronously by factories and constructors (and by a tiered
 * guard at the first request that names an unknown tier). `code` is `"SLUICE_CONFIG"`; `option`
 * names the option (a path such as `"limits[1]"` or `"block.base"`: see the module's notes); the
 * message names the option, the value and what is allowed.
 *
 * @example
 * ```ts
 * try { fixedWindow({ limit: 0, window: "1m" }); }
 * catch (e) {
 *   e instanceof SluiceConfigError; // true
 *   e.code;    // "SLUICE_CONFIG"
 *   e.option;  // "limit"
 *   e.message; // "[sluice] limit must be a positive safe integer; got 0"
 * }
 * ```
 */
export class SluiceConfigError extends SluiceError {
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceConfigError";
  override name = "SluiceConfigError" as const;
  override readonly code = "SLUICE_CONFIG" as const;
  /** The option path the error is about, e.g. `"limit"`, `"limits[1]"`, `"tiers.pro.mode"`, `"block.base"`. */
  readonly option: string;

  constructor(message: string, options: SluiceOptionErrorOptions) {
    super(message, options);
    this.option = optionOf(options);
  }
}

/**
 * Bad input at request time (a cost that is not a positive safe integer, a key that is not a
 * non-empty string). Thrown before any state is read or written. `code` is `"SLUICE_INPUT"`;
 * `option` names the argument (`"key"`, `"cost"`, `"lease"`, `"decision"`, `"options"`).
 *
 * @example
 * ```ts
 * try { await limiter.limit("user:1", { cost: 0 }); }
 * catch (e) { if (e instanceof SluiceInputError && e.option === "cost") return badRequest(e.message); }
 * ```
 */
export class SluiceInputError extends SluiceError {
  /** @internal */
  static override readonly [CLASS_NAME]: string = "SluiceInputError";
  override name = "SluiceInputError" as const;
  override readonly code = "SLUICE_INPUT" as const;
  /** The argument path the error is about, e.g. `"key"`, `"cost"`, `"lease"`. */
  readonly option: string;

  constructor(message: string, options: SluiceOptionErrorOptions) {
    super(message, options);
    this.option = optionOf(options);
  }
}

/** The option as given; `""` when a caller in plain JavaScript gave none (an option-less error, never one of Sluice's own). */
function optionOf(options: SluiceOptionErrorOptions | undefined): string {
  const option = options?.option;
  if (option === undefined) return "";
  return typeof option === "string" ? option : String(option);
}

/**
 * A store call that did not answer within the limiter's `timeoutMs` (default 1000 ms for
 * asynchronous stores); `code` is `"SLUICE_TIMEOUT"`. The limiter treats it as a store failure
 * (`reason: "timeout"`) and follows its `onStoreError`; it reaches `onStoreFailure`, never the caller of `limit()`.
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
  override readonly code = "SLUICE_TIMEOUT" as const;
}

/**
 * A store failed or answered something malformed (a reply of the wrong shape, say); `code` is
 * `"SLUICE_STORE"`. The limiter
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
  override readonly code = "SLUICE_STORE" as const;
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

/**
 * `message` under a package tag: `tagged("redis", "clock must be …")` is
 * `"[sluice] [redis] clock must be …"`; without a tag (core) the message is left as it is (the
 * error classes put `[sluice] ` in front).
 */
export function tagged(tag: string | undefined, message: string): string {
  return tag === undefined || tag === "" ? message : `[sluice] [${tag}] ${message}`;
}

/**
 * Joins an option path: `joinOption("limits[1]", "window")` is `"limits[1].window"`,
 * `joinOption("policies", "[0]")` is `"policies[0]"`, and an empty parent leaves the child.
 */
export function joinOption(parent: string, child: string): string {
  if (parent === "") return child;
  if (child === "") return parent;
  return child.startsWith("[") ? `${parent}${child}` : `${parent}.${child}`;
}

/**
 * The same error as `error`, with its option put under `parent` (`""` for none) and its message
 * tagged with `tag` (a package short name, `"hono"`; `undefined` keeps the tag it has): for a
 * holder that runs a validator on behalf of its own options (the Durable Object rebuilding
 * `policies[0]` with a factory; an adapter running core's validation). `error` becomes the cause.
 * Any other error is returned as it is.
 */
export function nestOptionError(error: unknown, parent: string, tag?: string): unknown {
  if (!(error instanceof SluiceConfigError) && !(error instanceof SluiceInputError)) return error;
  const option = joinOption(parent, error.option);
  // "[sluice] [pkg] rest" or "[sluice] rest"
  let rest = error.message.startsWith("[sluice] ") ? error.message.slice("[sluice] ".length) : error.message;
  let ownTag: string | undefined;
  const tagged = /^\[([^\]]+)\] /.exec(rest);
  if (tagged !== null) {
    ownTag = tagged[1];
    rest = rest.slice(tagged[0].length);
  }
  if (parent !== "" && error.option !== "" && rest.startsWith(error.option)) rest = option + rest.slice(error.option.length);
  const useTag = tag ?? ownTag;
  const message = `[sluice] ${useTag === undefined ? "" : `[${useTag}] `}${rest}`;
  const options = { option, cause: error };
  return error instanceof SluiceConfigError ? new SluiceConfigError(message, options) : new SluiceInputError(message, options);
}
