/**
 * When a limiter with reservations talks to its store: the questions a store far away raises
 * (what is asked near a window's end, how soon the next reservation goes out after one ends), how
 * keys are forgotten once more come than `maxKeys`, and what a cold key costs. The promises every
 * store keeps (never over, staleness, give-backs) are the conformance suite's, in `@sluice/testing`.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, type Policy, RateLimiter, type Store, fixedWindow } from "./index.js";
import type { BoundStore, StoreNamespace } from "./types.js";

/** The start of a 1-second window. */
const T0 = 1_700_000_000_000;

/**
 * A store `rttMs` away, on a clock the test moves: a call is applied at once and its answer is
 * delivered when the clock reaches the call's time plus `rttMs` (meanwhile requests keep coming).
 */
function farStore(rttMs: number) {
  const clock = { ms: 0, rttMs };
  const memory = new MemoryStore({ clock: () => T0 + clock.ms });
  const due: { at: number; deliver: () => void }[] = [];
  const log: { method: string; key: string; at: number; units?: number }[] = [];
  const later = <T>(method: string, key: string, run: () => T | PromiseLike<T>, units?: number): Promise<T> => {
    log.push({ method, key, at: clock.ms, ...(units === undefined ? {} : { units }) });
    const value = run();
    const at = clock.ms + clock.rttMs;
    // answers are delivered in the order they are due
    const i = due.findIndex((d) => d.at > at);
    return new Promise((resolve) => due.splice(i < 0 ? due.length : i, 0, { at, deliver: () => resolve(value) }));
  };
  const store: Store = {
    bind(namespace: StoreNamespace): BoundStore {
      const b = memory.bind(namespace);
      return {
        consume: (key, cost) => later("consume", key, () => b.consume(key, cost)),
        peek: (key) => later("peek", key, () => b.peek(key)),
        reset: (key) => later("reset", key, () => b.reset(key)),
        refund: (key, cost, charge) => later("refund", key, () => b.refund(key, cost, charge)),
        release: (key, lease) => later("release", key, () => b.release(key, lease)),
        reserve: (key, units, holdMs) => later("reserve", key, () => b.reserve!(key, units, holdMs), units),
      };
    },
  };
  /** Moves the clock to `ms`, delivering every answer due by then at its own time. */
  const advance = async (ms: number) => {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      const next = due[0];
      if (next === undefined || next.at > ms) break;
      due.shift();
      clock.ms = next.at;
      next.deliver();
    }
    clock.ms = ms;
  };
  return { store, clock, log, advance };
}

/** One decision, its answer (and the work it started) delivered before the clock moves on. */
async function ask(far: ReturnType<typeof farStore>, limiter: RateLimiter, key: string) {
  const decision = limiter.limit(key);
  await far.advance(far.clock.ms);
  return decision;
}

function limiterOn(far: ReturnType<typeof farStore>, limits: Policy, maxKeys?: number): RateLimiter {
  const reserve = { clock: () => far.clock.ms, ...(maxKeys === undefined ? {} : { maxKeys }) };
  return new RateLimiter({ store: far.store, limits, denyCache: false, timeoutMs: false, reserve });
}

/** Requests every `everyMs` from `fromMs` to `toMs` (decisions not awaited one by one, as a server). */
async function steady(far: ReturnType<typeof farStore>, limiter: RateLimiter, key: string, fromMs: number, toMs: number, everyMs: number) {
  const reserved: number[] = [];
  for (let t = fromMs; t < toMs; t += everyMs) {
    await far.advance(t);
    void limiter.limit(key).then((d) => {
      if (d.reserved === true) reserved.push(t);
    });
  }
  await far.advance(toMs + 1000);
  return reserved;
}

describe("reservations with the store a round trip away", () => {
  it("near a window's end, no reservation is asked for that would end before it could serve: one reservation a window", async () => {
    const far = farStore(50);
    const limiter = limiterOn(far, fixedWindow({ limit: 100_000, window: "1s" }));
    await steady(far, limiter, "k", 0, 3000, 2);
    const reserves = far.log.filter((c) => c.method === "reserve");
    // one at the start of each window, sized for the whole of it; none in a window's second half
    // (a reservation asked for there used to arrive as its window ended, and went straight back)
    expect(reserves.map((r) => Math.floor(r.at / 1000))).toEqual([0, 1, 2, 3]);
    for (const r of reserves) expect(r.at % 1000).toBeLessThan(100);
  });

  it("once a window ends, the first request that finds no units asks for the next reservation, beside its own store decision", async () => {
    const far = farStore(50);
    const limiter = limiterOn(far, fixedWindow({ limit: 100_000, window: "1s" }));
    const reserved = await steady(far, limiter, "k", 0, 1500, 2);
    // the units of the first window end before it does; the request that finds none goes to the
    // store and, at once, asks for units of the new window (not when its own answer is back)
    const firstAfterEdge = far.log.find((c) => c.method === "reserve" && c.at >= 1000 - 20);
    const lastReservedBefore = Math.max(...reserved.filter((t) => t < 1000));
    expect(firstAfterEdge?.at).toBeLessThanOrEqual(1000 + 2);
    expect(lastReservedBefore).toBeGreaterThan(1000 - 20);
    // so the new window is served from a reservation one round trip after its start
    expect(Math.min(...reserved.filter((t) => t >= 1000))).toBeLessThanOrEqual(1000 + 50 + 2);
  });

  it("one answer slower than a whole hold does not stop reservations: the next ones measure the round trip again", async () => {
    const far = farStore(1500);
    const limiter = limiterOn(far, fixedWindow({ limit: 1_000_000, window: "1h" }));
    const reserved: number[] = [];
    for (let t = 0; t < 6000; t += 2) {
      await far.advance(t);
      // the store is 1.5 s away for the first reservation, then 50 ms
      if (far.log.some((c) => c.method === "reserve")) far.clock.rttMs = 50;
      void limiter.limit("k").then((d) => {
        if (d.reserved === true) reserved.push(t);
      });
    }
    await far.advance(7000);
    // the first came back too late to serve and went back; the next were asked for all the same
    expect(far.log.filter((c) => c.method === "reserve").length).toBeGreaterThan(2);
    expect(reserved.filter((t) => t >= 4000).length).toBeGreaterThan(900);
  });
});

describe("more keys than maxKeys", () => {
  /** A limiter tracking at most 3 keys, and "hot" served from its reservation. */
  async function hotAmongThree() {
    const far = farStore(0);
    const limiter = limiterOn(far, fixedWindow({ limit: 1_000_000, window: "1h" }), 3);
    for (let t = 0; t < 20; t++) {
      await far.advance(t);
      await ask(far, limiter, "hot");
    }
    await far.advance(30);
    expect((await ask(far, limiter, "hot")).reserved).toBe(true);
    return { far, limiter };
  }
  const calls = (far: ReturnType<typeof farStore>, method: string, key?: string) => far.log.filter((c) => c.method === method && (key === undefined || c.key === key)).length;

  it("forgets the oldest tracked key first, however many keys turn hot, and gives a forgotten key's units back", async () => {
    const { far, limiter } = await hotAmongThree();
    // a thousand keys, each hot at once (4 requests) and so tracked, each forgotten in turn:
    // "hot" is the first to go, its units given back once
    for (let i = 0; i < 1000; i++) for (let n = 0; n < 4; n++) await ask(far, limiter, `warm-${i}`);
    await far.advance(40);
    expect(calls(far, "refund", "hot")).toBe(1);
    expect(calls(far, "reserve", "warm-0")).toBe(1);
    expect(calls(far, "refund", "warm-0")).toBe(1);
    // the newest are kept: the last one's reservation serves; "hot" is counted afresh (the store decides)
    expect((await ask(far, limiter, "warm-999")).reserved).toBe(true);
    expect(calls(far, "refund", "warm-999")).toBe(0);
    expect((await ask(far, limiter, "hot")).reserved).not.toBe(true);
  });

  it("keys too slow to reserve, however many, never push a tracked key out", async () => {
    const { far, limiter } = await hotAmongThree();
    const before = far.log.length;
    for (let i = 0; i < 20_000; i++) await ask(far, limiter, `cold-${i}`);
    // each cold key cost its own store decision and nothing else; "hot" still holds its units
    expect(far.log.slice(before).map((c) => c.method)).toEqual(Array(20_000).fill("consume"));
    expect((await ask(far, limiter, "hot")).reserved).toBe(true);
    expect(calls(far, "refund", "hot")).toBe(0);
  });
});

describe("a cold key", () => {
  it("costs no clock read and no store call but its own", async () => {
    const far = farStore(0);
    let reads = 0;
    const limiter = new RateLimiter({
      store: far.store,
      limits: fixedWindow({ limit: 1000, window: "1h" }),
      denyCache: false,
      timeoutMs: false,
      reserve: {
        clock: () => {
          reads++;
          return far.clock.ms;
        },
      },
    });
    for (let s = 0; s < 20; s++) {
      await far.advance(s * 1000);
      const d = await ask(far, limiter, "once-a-second");
      expect(d.reserved).not.toBe(true);
    }
    expect(reads).toBe(0);
    expect(far.log.map((c) => c.method)).toEqual(Array(20).fill("consume"));
  });
});
