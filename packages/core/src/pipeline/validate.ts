/**
 * Validation: every option is checked once, when the adapter is created, and turned into the
 * {@link Config} the check chain runs on. Misconfiguration throws `SluiceConfigError` naming the
 * option.
 *
 * @module
 */
import { UNKNOWN_CLIENT_KEY, clientIp, validateClientIpOptions } from "../client-ip.js";
import { SluiceConfigError, describe, nestOptionError } from "../errors.js";
import { type HeaderStyle, resolveHeaderStyles, resolvePartitionKey } from "../headers.js";
import { RateLimiter } from "../limiter/index.js";
import type { Decision, MaybePromise } from "../types.js";
import { requireFunction } from "./assert.js";
import type { CallbackName, DecisionInfo, PipelineCommonOptions, PipelineOptions, PipelineTieredOptions } from "./options.js";
import type { Platform } from "./platform.js";
import { type Target, targetOf, tieredPicker } from "./tiers.js";

/** The validated options. */
export interface Config<Args extends unknown[]> {
  keyOf: (...args: Args) => MaybePromise<string>;
  skip: ((...args: Args) => MaybePromise<boolean>) | undefined;
  cost: number | ((...args: Args) => MaybePromise<number>) | undefined;
  onLimited: ((...args: [...Args, decision: Decision]) => MaybePromise<Response>) | undefined;
  styles: readonly HeaderStyle[];
  /** The `partitionKey` salt; `undefined` when `pk` is off. */
  pkSalt: string | undefined;
  /** Whether a dry-run decision writes the rate-limit headers. */
  dryRunHeaders: boolean;
  pick: (args: Args, key: string) => Target | Promise<Target>;
  onDecision: ((...args: [...Args, decision: Decision, info: DecisionInfo]) => void) | undefined;
  countWhen: ((...args: [...Args, response: Response, decision: Decision]) => boolean | Promise<boolean>) | undefined;
  /** `onCallbackError`, or the default: `console.error`, naming the adapter and the callback. */
  reportCallbackError: (args: Args, error: unknown, callback: CallbackName) => void;
}

/**
 * Validates `options` for `platform`: every `SluiceConfigError` carries the adapter's tag
 * (`platform.tag`: `[sluice] [hono] key must be …`), whichever validator wrote it, and its `option`
 * is the path in `options`.
 */
export function validate<Args extends unknown[]>(options: PipelineOptions<Args>, platform: Platform<Args>): Config<Args> {
  try {
    return configure(options, platform);
  } catch (error) {
    // one tag for every message, whichever validator wrote it
    throw platform.tag === undefined ? error : nestOptionError(error, "", platform.tag);
  }
}

function configure<Args extends unknown[]>(options: PipelineOptions<Args>, platform: Platform<Args>): Config<Args> {
  if (typeof options !== "object" || options === null) {
    throw new SluiceConfigError(`options must be an object with limiter (or tiers) and key (or trust); got ${describe(options)}`, { option: "options" });
  }
  const { skip, cost, onLimited } = options;
  const keyOf = keyFunction(options, platform);
  requireFunction(skip, "skip", true);
  requireFunction(onLimited, "onLimited", true);
  requireFunction(options.onDecision, "onDecision", true);
  requireFunction(options.countWhen, "countWhen", true);
  requireFunction(options.onCallbackError, "onCallbackError", true);
  if (typeof cost !== "function" && cost !== undefined && !(typeof cost === "number" && Number.isSafeInteger(cost) && cost > 0)) {
    throw new SluiceConfigError(`cost must be a positive safe integer or a function; got ${describe(cost)}`, { option: "cost" });
  }
  const styles = resolveHeaderStyles(options.headers);
  const pkSalt = resolvePartitionKey(options.partitionKey);
  const dryRunHeaders = options.dryRunHeaders ?? false;
  if (typeof dryRunHeaders !== "boolean") {
    throw new SluiceConfigError(`dryRunHeaders must be true or false; got ${describe(dryRunHeaders)}`, { option: "dryRunHeaders" });
  }
  const limiter = (options as { limiter?: unknown }).limiter;
  const tiers = (options as { tiers?: unknown }).tiers;
  if (tiers !== undefined && limiter !== undefined) {
    throw new SluiceConfigError("tiers must be left out when limiter is given: give limiter or tiers, not both", { option: "tiers" });
  }
  let pick: Config<Args>["pick"];
  if (tiers !== undefined) pick = tieredPicker(options as PipelineTieredOptions<Args>, platform.tag);
  else if (limiter instanceof RateLimiter) {
    const target = targetOf(limiter);
    pick = () => target; // the limiter checks the key
  } else {
    throw new SluiceConfigError(`limiter must be a RateLimiter (or give tiers); got ${describe(limiter)}`, { option: "limiter" });
  }
  const { onDecision, countWhen } = options;
  const reportCallbackError = callbackErrorReporter(options.onCallbackError, platform.where);
  return { keyOf, skip, cost, onLimited, styles, pkSalt, dryRunHeaders, pick, onDecision, countWhen, reportCallbackError };
}

/** `onCallbackError` as the pipeline calls it; what it throws itself is ignored. */
function callbackErrorReporter<Args extends unknown[]>(
  onCallbackError: ((...args: [...Args, error: unknown, callback: CallbackName]) => void) | undefined,
  where: string,
): Config<Args>["reportCallbackError"] {
  if (onCallbackError === undefined) {
    return (_args, error, callback) => {
      const consequence = callback === "countWhen" ? "the response was served and the request counts (nothing refunded)" : "the request went on";
      console.error(`[sluice] ${where}: ${callback} threw; ${consequence}. Pass onCallbackError to report it yourself.`, error);
    };
  }
  return (args, error, callback) => {
    try {
      onCallbackError(...args, error, callback);
    } catch {
      // a failing reporter must not break the request either
    }
  };
}

/** `key`, or the client address with `trust`. */
function keyFunction<Args extends unknown[]>(options: PipelineCommonOptions<Args>, platform: Platform<Args>): (...args: Args) => MaybePromise<string> {
  const { key, trust, ipv6Subnet } = options;
  if (key !== undefined && trust !== undefined) {
    throw new SluiceConfigError("trust must be left out when key is given: give key or trust, not both (trust keys requests by client address)", {
      option: "trust",
    });
  }
  if (trust !== undefined) {
    validateClientIpOptions({ trust, ipv6Subnet });
    const ipOptions = { trust, ipv6Subnet };
    return (...args) => clientIp(platform.request(...args), ipOptions) ?? UNKNOWN_CLIENT_KEY;
  }
  if (typeof key !== "function") {
    throw new SluiceConfigError(
      `key must be a function (${platform.params ?? "request"}) => string, or give trust ("cloudflare", "vercel" or a number of trusted proxies) to key requests by client address (no header is trusted by default); got ${describe(key)}`,
      { option: "key" },
    );
  }
  if (ipv6Subnet !== undefined) {
    throw new SluiceConfigError("ipv6Subnet must be left out without trust: it applies only with trust (with key, normalize addresses yourself: normalizeIp)", {
      option: "ipv6Subnet",
    });
  }
  return key;
}
