/**
 * The figures `pnpm simulate` writes for the docs, as data and a pure render function (no file
 * system), so a test can check that the committed SVGs are what the simulation renders today.
 *
 * @module
 */
import { renderComparisonSvg } from "./plot.js";
import { ALGORITHMS, ALGORITHM_TITLES, type AlgorithmId, type Simulation, simulate, stateFromQuery } from "./simulation.js";

/** One docs figure: the page state (as the page's query string) and the algorithms to show. */
export interface Figure {
  /** Path relative to the repository root. */
  out: string;
  query: string;
  algorithms: readonly AlgorithmId[];
  title: string;
  caption: (simulation: Simulation) => string[];
}

/** "fixed window 200, sliding window 101, …": the allowed counts of the algorithms. */
export function allowedCounts(simulation: Simulation, algorithms: readonly AlgorithmId[]): string {
  return algorithms.map((a) => `${ALGORITHM_TITLES[a].toLowerCase()} ${simulation.runs[a]?.totals.allowed ?? "?"}`).join(", ");
}

/** The figures the README and docs show. */
export const FIGURES: readonly Figure[] = [
  {
    out: "docs/playground-window-edge.svg",
    query: "preset=window-edge",
    algorithms: ["fixedWindow", "slidingWindow", "tokenBucket"],
    title: "200 requests in 2 seconds across a minute boundary, limit 100 per minute",
    caption: (sim) => [
      "100 requests in the last second before the minute boundary (dashed), 100 in the first second after it; one client.",
      `Allowed: ${allowedCounts(sim, ["fixedWindow", "slidingWindow", "tokenBucket"])} (token bucket: capacity 100, refill 100 per minute).`,
    ],
  },
  {
    out: "docs/playground-free-plan.svg",
    query: "preset=free",
    algorithms: ALGORITHMS,
    title: "The demo's free plan (30 per minute, burst 10, 1,000 per day) under bursts of 40 requests every 15 s",
    caption: (sim) => [
      "Each algorithm alone at 30 per minute (buckets: burst 10; the leaky bucket also queues 10), plus the per-day fixed window.",
      `Allowed of ${sim.scenario.trace.length}: ${allowedCounts(sim, ALGORITHMS)}.`,
    ],
  },
];

/** Simulates a figure's state and renders it; throws if any setting is refused. */
export async function renderFigure(figure: Figure): Promise<{ svg: string; simulation: Simulation }> {
  const state = stateFromQuery(figure.query);
  const simulation = await simulate(state.settings, figure.algorithms);
  const errors = Object.entries(simulation.scenario.errors);
  if (errors.length > 0) throw new Error(`${figure.query}: ${errors.map(([k, v]) => `${k}: ${v}`).join("; ")}`);
  const svg = renderComparisonSvg(simulation, figure.algorithms, { title: figure.title, caption: figure.caption(simulation) });
  return { svg, simulation };
}
