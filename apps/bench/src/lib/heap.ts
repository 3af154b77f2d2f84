/**
 * Bytes per idle key. Run it in a fresh process ({@link runInChild}) so that no earlier
 * measurement's garbage or compiled code is in the heap.
 *
 * Every key string is built first, then the limiter; one warm-up decision on a separate key
 * compiles the path and takes the store's first allocation; a full GC and the baseline; one
 * decision per key; a full GC and the measure. Key strings exist before the baseline, so they are
 * not counted (a store that copies or prefixes keys pays for its copies). The figure is the V8 heap
 * (`heapUsed`) plus ArrayBuffer backing stores (`arrayBuffers`): typed arrays keep their contents
 * outside the V8 heap, and leaving them out would flatter a store built on them.
 *
 * @module
 */

/** Makes one decision for `key`. */
export type Decide = (key: string) => Promise<unknown>;

/** One subject's memory figures. */
export interface HeapResult {
  readonly subject: string;
  readonly keys: number;
  /** `heapUsed` after minus before. */
  readonly heapBytes: number;
  /** `arrayBuffers` after minus before. */
  readonly arrayBufferBytes: number;
  /** `(heapBytes + arrayBufferBytes) / keys`. */
  readonly bytesPerKey: number;
}

function collect(): void {
  const gc = globalThis.gc;
  if (typeof gc !== "function") throw new Error("run with node --expose-gc: a heap delta without a forced GC means nothing");
  gc();
  gc();
}

function footprint(): { heap: number; arrayBuffers: number } {
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, arrayBuffers: usage.arrayBuffers };
}

/** Measures the bytes `keyCount` idle keys cost the limiter that `create` builds (sized for `keyCount` keys). */
export async function measureHeapHere(subject: string, keyCount: number, create: (keyCount: number) => Decide): Promise<HeapResult> {
  const keys: string[] = [];
  for (let i = 0; i < keyCount; i++) keys.push(`user:${i}`);
  const decide = create(keyCount);
  await decide("warm-up");
  collect();
  const before = footprint();
  for (let i = 0; i < keyCount; i++) await decide(keys[i] as string);
  collect();
  const after = footprint();
  // the keys and the limiter must stay reachable until after the measure
  if (keys.length !== keyCount || typeof decide !== "function") throw new Error("unreachable");
  const heapBytes = after.heap - before.heap;
  const arrayBufferBytes = after.arrayBuffers - before.arrayBuffers;
  return { subject, keys: keyCount, heapBytes, arrayBufferBytes, bytesPerKey: (heapBytes + arrayBufferBytes) / keyCount };
}
