/**
 * Bodies and waits for the tests of every adapter (a concurrency lease is held until a streamed
 * body ends): `@sluice/testing/streams`. No Node API: the same helpers run in workerd.
 *
 * @module
 */

/** Resolves after `ms` milliseconds of the (real or faked) `setTimeout`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A body that enqueues `chunks` chunks, `${label} 0\n`, `${label} 1\n`…, one every `everyMs`, then
 * closes. It produces only when read (a pull stream), so a reader that stops reading holds it open
 * for as long as it likes: what a test waits for is the reader, never the clock.
 *
 * @example
 * ```ts
 * const response = new Response(slowBody(4, 50), { headers: { "content-type": "text/csv" } });
 * ```
 */
export function slowBody(chunks: number, everyMs: number, label = "chunk"): ReadableStream<Uint8Array> {
  let sent = 0;
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      await sleep(everyMs);
      controller.enqueue(encoder.encode(`${label} ${sent}\n`));
      if (++sent === chunks) controller.close();
    },
  });
}
