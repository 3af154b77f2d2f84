/**
 * The reservations timeline of the docs: what it shows is what `@sluice/core` does in its scenario,
 * and the committed SVG is what `pnpm simulate` renders today.
 */
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { RESERVATIONS_FIGURE_OUT, RESERVATIONS_SCENARIO, renderReservationsSvg, simulateReservations } from "../src/reservations-figure.js";

describe("the reservations timeline", () => {
  it("shows the hot instances deciding locally, the slow one through the store, and a fresh reservation after each window", async () => {
    const timeline = await simulateReservations();
    const of = (i: number) => timeline.decisions.filter((d) => d.instance === i);
    const local = (i: number) => of(i).filter((d) => d.reserved).length / of(i).length;
    expect(local(0)).toBeGreaterThan(0.9);
    expect(local(1)).toBeGreaterThan(0.9);
    expect(of(2).length).toBeGreaterThan(0);
    expect(local(2)).toBe(0);
    // far fewer store calls than decisions; each hot instance reserves once per window shown
    expect(timeline.calls.length).toBeLessThan(timeline.decisions.length / 5);
    const reserves = (i: number) => timeline.calls.filter((c) => c.instance === i && c.method === "reserve").map((c) => Math.floor(c.sentMs / RESERVATIONS_SCENARIO.windowMs));
    expect(reserves(0)).toEqual([1, 2]);
    expect(reserves(1)).toEqual([1, 2]);
  });

  it(`${RESERVATIONS_FIGURE_OUT} is what \`pnpm simulate\` renders today`, async () => {
    const committed = await readFile(new URL(`../../../${RESERVATIONS_FIGURE_OUT}`, import.meta.url), "utf8");
    expect(committed, `${RESERVATIONS_FIGURE_OUT} is stale: run pnpm simulate`).toBe(renderReservationsSvg(await simulateReservations()));
  });
});
