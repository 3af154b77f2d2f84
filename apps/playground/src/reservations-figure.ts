/**
 * The reservations timeline of the docs (`docs/reservations-timeline.svg`, written by `pnpm
 * simulate`): three limiter instances with `reserve` on share one key of a store a round trip away,
 * in simulated time, and every decision and every store call is drawn where it happened. The real
 * `@sluice/core` decides; the store is a `MemoryStore` behind a wrapper (a limiter never reserves
 * over a `MemoryStore` itself) whose answers arrive a fixed round trip after each call.
 *
 * @module
 */
import { MemoryStore, RateLimiter, type Store, fixedWindow } from "@sluice/core";
import type { BoundStore, StoreNamespace } from "@sluice/core/store";
import { COLORS, escapeXml } from "./plot.js";

/** Where `pnpm simulate` writes the figure, from the repository root. */
export const RESERVATIONS_FIGURE_OUT = "docs/reservations-timeline.svg";

/** The scenario: each instance's steady rate, the key's limit, the store's round trip, the span drawn. */
export const RESERVATIONS_SCENARIO = {
  instances: [
    { name: "A", perSecond: 80 },
    { name: "B", perSecond: 40 },
    { name: "C", perSecond: 2 },
  ],
  limit: 1200,
  windowMs: 1000,
  roundTripMs: 50,
  fromMs: 700,
  toMs: 2900,
} as const;

/** One store call of an instance: when it was sent and answered, and the units of a reservation. */
export interface StoreCall {
  readonly instance: number;
  readonly method: string;
  readonly sentMs: number;
  readonly answeredMs: number;
  readonly units?: number;
}

/** One decision of an instance: when, and whether a reservation made it (else the store). */
export interface LocalDecision {
  readonly instance: number;
  readonly atMs: number;
  readonly reserved: boolean;
}

export interface ReservationsTimeline {
  readonly calls: StoreCall[];
  readonly decisions: LocalDecision[];
}

/** The simulated clock, and a store whose answers arrive a round trip after their call. */
function farStore(roundTripMs: number, clock: { ms: number }, calls: StoreCall[]) {
  const memory = new MemoryStore({ clock: () => Date.UTC(2026, 0, 1) + Math.floor(clock.ms) });
  const due: { at: number; deliver: () => void }[] = [];
  const storeOf = (instance: number): Store => ({
    bind(namespace: StoreNamespace): BoundStore {
      const b = memory.bind(namespace);
      const later = <T>(method: string, run: () => T | PromiseLike<T>, units?: number): Promise<T> => {
        const call: StoreCall = { instance, method, sentMs: clock.ms, answeredMs: clock.ms + roundTripMs, ...(units === undefined ? {} : { units }) };
        calls.push(call);
        const value = run();
        return new Promise((resolve) => due.push({ at: call.answeredMs, deliver: () => resolve(value) }));
      };
      return {
        consume: (key, cost) => later("consume", () => b.consume(key, cost)),
        peek: (key) => later("peek", () => b.peek(key)),
        reset: (key) => later("reset", () => b.reset(key)),
        refund: (key, cost, charge) => later("refund", () => b.refund(key, cost, charge)),
        release: (key, lease) => later("release", () => b.release(key, lease)),
        reserve: (key, units, holdMs) => later("reserve", () => b.reserve!(key, units, holdMs), units),
      };
    },
  });
  const advance = async (ms: number) => {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      due.sort((a, b) => a.at - b.at);
      const next = due[0];
      if (next === undefined || next.at > ms) break;
      due.shift();
      clock.ms = next.at;
      next.deliver();
    }
    clock.ms = ms;
  };
  return { storeOf, advance };
}

/** Runs the scenario: the same timeline every time. */
export async function simulateReservations(scenario = RESERVATIONS_SCENARIO): Promise<ReservationsTimeline> {
  const clock = { ms: 0 };
  const calls: StoreCall[] = [];
  const decisions: LocalDecision[] = [];
  const far = farStore(scenario.roundTripMs, clock, calls);
  const limits = fixedWindow({ limit: scenario.limit, window: scenario.windowMs });
  const limiters = scenario.instances.map(
    (_, i) => new RateLimiter({ store: far.storeOf(i), limits, prefix: "timeline", denyCache: false, timeoutMs: false, reserve: { clock: () => clock.ms } }),
  );
  // every arrival of every instance, in time order
  const arrivals = scenario.instances
    .flatMap((inst, i) => Array.from({ length: Math.floor((scenario.toMs * inst.perSecond) / 1000) }, (_, k) => ({ i, atMs: Math.round(((k + 0.5) * 1000) / inst.perSecond) })))
    .sort((a, b) => a.atMs - b.atMs || a.i - b.i);
  for (const { i, atMs } of arrivals) {
    await far.advance(atMs);
    void limiters[i]!.limit("shared").then((d) => decisions.push({ instance: i, atMs, reserved: d.reserved === true }));
  }
  await far.advance(scenario.toMs + 10 * scenario.roundTripMs);
  const shown = (ms: number) => ms >= scenario.fromMs && ms < scenario.toMs;
  return {
    calls: calls.filter((c) => shown(c.sentMs)),
    decisions: decisions.filter((d) => shown(d.atMs)).sort((a, b) => a.atMs - b.atMs || a.instance - b.instance),
  };
}

const CALL_COLORS: Readonly<Record<string, string>> = { reserve: COLORS.delayed, refund: COLORS.retryAfter, consume: COLORS.remaining };

/** The figure: a lane per instance above the store's, a call drawn from its lane to the store and back. */
export function renderReservationsSvg(timeline: ReservationsTimeline, scenario = RESERVATIONS_SCENARIO): string {
  const width = 900;
  const left = 150;
  const right = 20;
  const laneH = 54;
  const top = 60;
  const storeY = top + scenario.instances.length * laneH + 40;
  const height = storeY + 112;
  const x = (ms: number) => left + ((ms - scenario.fromMs) / (scenario.toMs - scenario.fromMs)) * (width - left - right);
  const laneY = (i: number) => top + i * laneH + laneH / 2;
  const n = (v: number) => +v.toFixed(1);
  const parts: string[] = [];
  for (let edge = Math.ceil(scenario.fromMs / scenario.windowMs) * scenario.windowMs; edge < scenario.toMs; edge += scenario.windowMs) {
    parts.push(`<line x1="${n(x(edge))}" x2="${n(x(edge))}" y1="${top - 10}" y2="${storeY + 10}" stroke="${COLORS.edge}" stroke-dasharray="4 3"/>`);
    parts.push(`<text x="${n(x(edge)) + 4}" y="${top - 14}" font-size="11" fill="${COLORS.muted}">window ends</text>`);
  }
  scenario.instances.forEach((inst, i) => {
    const y = laneY(i);
    const mine = timeline.decisions.filter((d) => d.instance === i);
    const local = mine.filter((d) => d.reserved).length;
    parts.push(`<text x="10" y="${y - 4}" font-size="13" font-weight="600" fill="${COLORS.text}">instance ${inst.name}</text>`);
    parts.push(`<text x="10" y="${y + 12}" font-size="11" fill="${COLORS.muted}">${inst.perSecond}/s: ${local} of ${mine.length} local</text>`);
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y}" y2="${y}" stroke="${COLORS.grid}"/>`);
    for (const d of mine) {
      if (d.reserved) parts.push(`<line x1="${n(x(d.atMs))}" x2="${n(x(d.atMs))}" y1="${y - 9}" y2="${y + 9}" stroke="${COLORS.allowed}" stroke-width="1"/>`);
      else parts.push(`<circle cx="${n(x(d.atMs))}" cy="${y}" r="2.5" fill="${COLORS.remaining}"/>`);
    }
  });
  parts.push(`<line x1="${left}" x2="${width - right}" y1="${storeY}" y2="${storeY}" stroke="${COLORS.axis}" stroke-width="2"/>`);
  parts.push(`<text x="10" y="${storeY + 4}" font-size="13" font-weight="600" fill="${COLORS.text}">the store</text>`);
  parts.push(`<text x="10" y="${storeY + 20}" font-size="11" fill="${COLORS.muted}">${scenario.roundTripMs} ms away</text>`);
  for (const c of timeline.calls) {
    const y = laneY(c.instance) + 10;
    const mid = (c.sentMs + c.answeredMs) / 2;
    const color = CALL_COLORS[c.method] ?? COLORS.axis;
    parts.push(`<polyline points="${n(x(c.sentMs))},${y} ${n(x(mid))},${storeY} ${n(x(c.answeredMs))},${y}" fill="none" stroke="${color}" stroke-width="${c.method === "consume" ? 0.8 : 1.4}" opacity="0.8"/>`);
    if (c.method === "reserve") parts.push(`<text x="${n(x(c.answeredMs)) + 2}" y="${y + 12}" font-size="10" fill="${COLORS.delayed}">+${c.units}</text>`);
  }
  const decisions = timeline.decisions.length;
  const byMethod = (m: string) => timeline.calls.filter((c) => c.method === m).length;
  const caption = [
    `One key, fixedWindow ${scenario.limit} per ${scenario.windowMs / 1000} s, three instances with reserve on. ${decisions} decisions, ${timeline.calls.length} store calls: ${byMethod("consume")} decisions by the store (blue dots and lines),`,
    `${byMethod("reserve")} reservations (orange, +units charged ahead), ${byMethod("refund")} give-backs of unused units (purple). A green tick is a decision made locally from units in hand.`,
    "A and B turn hot and decide locally; a window's units serve only inside it, so at its end each asks afresh and decides through the store for",
    "a round trip meanwhile. C, two requests a second, never reserves: each of its requests is one store call, exactly as without the option.",
  ];
  const legend = caption.map((line, k) => `<text x="10" y="${storeY + 48 + k * 15}" font-size="11" fill="${COLORS.text}">${escapeXml(line)}</text>`);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="22" font-size="14" font-weight="600" fill="${COLORS.text}">Reservations: local decisions and store calls, ${scenario.fromMs / 1000}–${scenario.toMs / 1000} s (simulated time)</text>`,
    ...parts,
    ...legend,
    "</svg>",
    "",
  ].join("\n");
}
