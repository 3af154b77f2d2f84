/**
 * The lease-holding body: with a `concurrency()` limit, the request's lease is held until its
 * response has been produced, and freed once, whatever happens (the body ends, fails or is
 * cancelled; there is no body; the handler threw).
 *
 * @module
 */
import type { RateLimiter } from "../limiter/index.js";
import type { Decision, MaybePromise } from "../types.js";
import type { Outcome } from "./platform.js";

/**
 * The outcomes of HEAD requests that hold a concurrency lease: their response's body is never sent
 * (a framework may drop it unread, as Hono does), so the lease is released as soon as the handler
 * has answered.
 */
export const HEAD_REQUESTS = new WeakSet<Outcome>();

export function noteHead(outcome: Outcome, request: Request): void {
  if (request.method === "HEAD") HEAD_REQUESTS.add(outcome);
}

/** Frees a decision's concurrency lease; a failure goes to the limiter's `onStoreFailure`. Never rejects. */
export function releaseLease(limiter: RateLimiter, key: string, decision: Decision): Promise<void> {
  let released: Promise<unknown>;
  try {
    released = limiter.release(key, decision);
  } catch (error) {
    released = Promise.reject(error);
  }
  return released.then(ignore, (error: unknown) => limiter.reportStoreFailure(error));
}

function ignore(): void {}

/**
 * The response whose production ends the request's concurrency lease: without a body (a redirect,
 * a 204, `Response.error()`, any answer to a HEAD request) the lease is released now; with one, a copy is returned whose body
 * passes the handler's through and releases when it ends (before the end reaches the client), fails
 * or is cancelled (the client went away). Released once, whatever happens.
 */
export function holdUntilProduced(response: Response, limiter: RateLimiter, key: string, decision: Decision, head: boolean): MaybePromise<Response> {
  const body = response.status === 0 || head ? null : response.body;
  if (body === null) return releaseLease(limiter, key, decision).then(() => response);
  let released: Promise<void> | undefined;
  const done = () => (released ??= releaseLease(limiter, key, decision));
  const reader = body.getReader();
  const passed = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (error) {
          await done();
          throw error;
        }
        if (chunk.done) {
          await done();
          controller.close();
        } else controller.enqueue(chunk.value);
      },
      async cancel(reason) {
        try {
          await reader.cancel(reason);
        } finally {
          await done();
        }
      },
    },
    // read the handler's body only as fast as the server sends it
    { highWaterMark: 0 },
  );
  return new Response(passed, { status: response.status, statusText: response.statusText, headers: response.headers });
}
