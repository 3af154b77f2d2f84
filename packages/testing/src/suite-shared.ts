/**
 * What the conformance suite and the suites it runs (the key schema's, the vectors' generator)
 * share, in a module of its own so that none of them imports another for it.
 *
 * @module
 */

/** 2026-01-01T00:00:00Z: a multiple of every window the suite uses, so windows start on it. */
export const T0 = 1_767_225_600_000;

let prefixCounter = 0;
/** A prefix no other test uses, so a shared store (one Redis) never mixes tests. */
export function uniquePrefix(label = "t"): string {
  prefixCounter += 1;
  return `conf-${label}-${Date.now().toString(36)}-${prefixCounter}-${Math.random().toString(36).slice(2, 8)}`;
}
