/**
 * The Worker of the Durable Object benchmark, bundled for workerd and run by Miniflare. It makes
 * the decisions itself, inside workerd, so that what is measured is the Worker → object path that
 * production runs (not Node ↔ workerd HTTP):
 *
 * `GET /run?contender=…&ops=N&inFlight=M&keys=K&shards=S` makes N decisions with M callers in
 * flight over K keys, each awaited, and answers `{ allowed }`; the bench times the request.
 *
 * - `ceiling`: a trivial counter object (`Counter`): one RPC per decision that adds one to an
 *   integer in its SQLite key-value storage and returns it — the least a decision that lives in a
 *   Durable Object can cost. Addressed like Sluice's objects: one per key, or one per shard.
 * - `sluice`: `RateLimiter` over `DurableObjectStore` (`SluiceLimiter`), a fixed window whose quota
 *   never runs out, `shards: 0` (one object per key) or `shards: S`.
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { RateLimiter, fixedWindow } from "@sluice/core";
import { DurableObjectStore, type SluiceLimiter } from "@sluice/cloudflare";

export { SluiceLimiter } from "@sluice/cloudflare";

/** The ceiling: one integer per object, incremented in its storage. */
export class Counter extends DurableObject {
  incr(): number {
    const kv = this.ctx.storage.kv;
    const next = ((kv.get("n") as number | undefined) ?? 0) + 1;
    kv.put("n", next);
    return next;
  }
}

interface Env {
  SLUICE: DurableObjectNamespace<SluiceLimiter>;
  COUNTER: DurableObjectNamespace<Counter>;
}

const NEVER = 1_000_000_000;

/** FNV-1a, 32 bits: spreads keys over shards for the ceiling as the store does for Sluice. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

const limiters = new Map<number, RateLimiter>();

function sluiceLimiter(env: Env, shards: number): RateLimiter {
  let limiter = limiters.get(shards);
  if (limiter === undefined) {
    limiter = new RateLimiter({
      store: new DurableObjectStore(env.SLUICE, { shards }),
      limits: fixedWindow({ limit: NEVER, window: "1h" }),
      prefix: "bench",
      onStoreError: "deny", // a store failure must never be measured as a fallback decision
    });
    limiters.set(shards, limiter);
  }
  return limiter;
}

async function run(env: Env, contender: string, ops: number, inFlight: number, keyCount: number, shards: number): Promise<number> {
  const keys: string[] = [];
  for (let i = 0; i < keyCount; i++) keys.push(`user:${i}`);
  let next = 0;
  let allowed = 0;
  let caller: () => Promise<void>;
  if (contender === "ceiling") {
    const stubs = keys.map((key) => env.COUNTER.get(env.COUNTER.idFromName(shards === 0 ? key : `shard:${fnv1a(key) % shards}`)));
    caller = async () => {
      while (next < ops) {
        const i = next++;
        if ((await stubs[i % keyCount]!.incr()) > 0) allowed++;
      }
    };
  } else if (contender === "sluice") {
    const limiter = sluiceLimiter(env, shards);
    caller = async () => {
      while (next < ops) {
        const i = next++;
        const decision = await limiter.limit(keys[i % keyCount]!);
        if (decision.allowed && decision.reason === "ok") allowed++;
      }
    };
  } else {
    throw new Error(`unknown contender ${contender}`);
  }
  const callers: Promise<void>[] = [];
  for (let c = 0; c < inFlight; c++) callers.push(caller());
  await Promise.all(callers);
  return allowed;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const q = (name: string) => Number(url.searchParams.get(name) ?? "0");
    try {
      const allowed = await run(env, url.searchParams.get("contender") ?? "", q("ops"), q("inFlight"), q("keys"), q("shards"));
      return Response.json({ allowed });
    } catch (error) {
      return Response.json({ error: String((error as Error)?.stack ?? error) }, { status: 500 });
    }
  },
};
