/**
 * The option checks that both the pipeline's validation and the tiers run, in a module of their
 * own below both, so neither has to import the other for them.
 *
 * @module
 */
import { SluiceConfigError, describe } from "../errors.js";

/** Throws `SluiceConfigError` naming `option` unless `value` is a function (or left out, when `optional`). */
export function requireFunction(value: unknown, option: string, optional: boolean): void {
  if (value === undefined && optional) return;
  if (typeof value !== "function") throw new SluiceConfigError(`${option} must be a function; got ${describe(value)}`, { option });
}
