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

/**
 * `SLUICE_PROPERTY_RUNS=<n>` in the environment: every property of the suite runs `n` times, on
 * every store, with limits long enough for it — a deeper search than the suite's own counts, run
 * by hand: some sequences (a bucket refilling while it holds more than its quota, say) take a few
 * hundred runs to come up, where the suite's 40–60 rarely reach them. Unset: the counts each store
 * asks for.
 */
export function deepRuns(): number | undefined {
  const given = typeof process === "undefined" ? undefined : process.env.SLUICE_PROPERTY_RUNS;
  if (given === undefined || given === "") return undefined;
  const n = Number(given);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`SLUICE_PROPERTY_RUNS must be a positive whole number of runs; got ${JSON.stringify(given)}`);
  return n;
}
