/**
 * `pnpm simulate`: runs the playground's simulation in Node (the same module the page runs) and
 * writes its plots as SVG files for the docs.
 *
 * - no arguments: writes the docs figures (`docs/playground-window-edge.svg`: fixed window beside
 *   sliding window and token bucket on the window-edge preset; `docs/playground-free-plan.svg`: all
 *   five on the free plan; `docs/reservations-timeline.svg`: three instances with reservations on
 *   one key, see `reservations-figure.ts`);
 * - `--query "<the page's query string>" --out <file.svg> [--algorithms fixedWindow,tokenBucket]`:
 *   renders any state the page can show (the output path is relative to the repository root).
 *
 * @module
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { FIGURES, type Figure, allowedCounts, renderFigure } from "./docs-figures.js";
import { RESERVATIONS_FIGURE_OUT, renderReservationsSvg, simulateReservations } from "./reservations-figure.js";
import { ALGORITHMS, type AlgorithmId, PRESETS } from "./simulation.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

async function write(figure: Figure): Promise<void> {
  const { svg, simulation } = await renderFigure(figure);
  const path = resolve(ROOT, figure.out);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, svg);
  console.log(`${relative(ROOT, path)}: ${simulation.scenario.trace.length} requests; allowed: ${allowedCounts(simulation, figure.algorithms)}`);
}

const { values } = parseArgs({ options: { query: { type: "string" }, out: { type: "string" }, algorithms: { type: "string" } } });

if (values.query === undefined && values.out === undefined && values.algorithms === undefined) {
  for (const figure of FIGURES) await write(figure);
  const timeline = await simulateReservations();
  const path = resolve(ROOT, RESERVATIONS_FIGURE_OUT);
  await writeFile(path, renderReservationsSvg(timeline));
  console.log(`${relative(ROOT, path)}: ${timeline.decisions.length} decisions, ${timeline.calls.length} store calls`);
} else {
  if (values.query === undefined || values.out === undefined) {
    throw new Error(`--query and --out go together, e.g. --query "preset=pro" --out docs/pro.svg (presets: ${PRESETS.map((p) => p.id).join(", ")})`);
  }
  const algorithms = (values.algorithms?.split(",").map((a) => a.trim()) ?? [...ALGORITHMS]) as AlgorithmId[];
  for (const a of algorithms) {
    if (!ALGORITHMS.includes(a)) throw new Error(`--algorithms: unknown algorithm ${JSON.stringify(a)}; use ${ALGORITHMS.join(", ")}`);
  }
  const query = values.query.replace(/^\?/, "");
  await write({ out: values.out, query, algorithms, title: `Sluice playground: ${query}`, caption: () => [] });
}
