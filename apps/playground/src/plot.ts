/**
 * The plots, as SVG markup strings: the same code draws the page's columns and the SVG files that
 * `pnpm simulate` writes for the docs. No DOM and no Node APIs.
 *
 * Each algorithm gets one panel of three charts over the same time axis: requests per bin (allowed,
 * delayed, denied), the remaining quota, and the `Retry-After` (seconds) told to denied requests.
 * Dashed lines mark the fixed window's edges.
 *
 * @module
 */
import { ALGORITHM_TITLES, type AlgorithmId, type AlgorithmRun, type Simulation, type View, niceStep } from "./simulation.js";

/** The colours of the series (also used by the page's legend). */
export const COLORS = {
  allowed: "#2f9e44",
  delayed: "#f08c00",
  denied: "#e03131",
  remaining: "#1c7ed6",
  retryAfter: "#7048e8",
  edge: "#868e96",
  grid: "#e9ecef",
  axis: "#495057",
  text: "#212529",
  muted: "#6c757d",
} as const;

/** Scales shared by the panels drawn side by side, so that they compare. */
export interface Scales {
  /** The top of the requests chart: the most requests in one bin. */
  requestsPerBin: number;
  /** The top of the Retry-After chart, in seconds. */
  retryAfterS: number;
}

/** The scales that fit every run given. */
export function scalesFor(runs: readonly AlgorithmRun[]): Scales {
  let requestsPerBin = 1;
  let retryAfterS = 1;
  for (const run of runs) {
    const s = run.series;
    for (let i = 0; i < s.allowed.length; i++) {
      requestsPerBin = Math.max(requestsPerBin, (s.allowed[i] ?? 0) + (s.delayed[i] ?? 0) + (s.denied[i] ?? 0));
      retryAfterS = Math.max(retryAfterS, s.retryAfterS[i] ?? 0);
    }
  }
  return { requestsPerBin, retryAfterS };
}

/** Escapes text for SVG/HTML. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A duration for labels: "20 ms", "2 s", "1.5 s", "1 min". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${+(ms / 1000).toFixed(3)} s`;
}

/** A time-axis label for `ms` (after trace time 0) with ticks every `stepMs`. */
export function formatTick(ms: number, stepMs: number): string {
  if (stepMs >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  const decimals = stepMs >= 1000 ? 0 : Math.min(3, Math.ceil(-Math.log10(stepMs / 1000) - 1e-9));
  return `${(ms / 1000).toFixed(decimals)} s`;
}

/** Width of one panel, in SVG units. */
export const PANEL_WIDTH = 360;
const LEFT = 46;
const RIGHT = 14;
const PLOT_WIDTH = PANEL_WIDTH - LEFT - RIGHT;
const HEADING = 62;
const LABEL = 20;
const CHARTS = [
  { id: "requests", height: 110 },
  { id: "remaining", height: 80 },
  { id: "retry", height: 80 },
] as const;
const AXIS = 34;

/** Height of a panel, with or without its heading. */
export function panelHeight(heading: boolean): number {
  return (heading ? HEADING : 8) + CHARTS.reduce((sum, c) => sum + LABEL + c.height, 0) + AXIS;
}

function n(x: number): string {
  return (Math.round(x * 100) / 100).toString();
}

function text(x: number, y: number, content: string, attrs = ""): string {
  return `<text x="${n(x)}" y="${n(y)}"${attrs ? ` ${attrs}` : ""}>${escapeXml(content)}</text>`;
}

/** Options of {@link renderPanel}. */
export interface PanelOptions {
  /** Draw the algorithm's title, policies and counts above the charts (the docs SVG does; the page has HTML for it). */
  heading?: boolean;
  /** The fixed window's length, to mark its edges. */
  fixedWindowMs?: number | undefined;
}

/** One algorithm's panel as an SVG group at (x, y). */
export function renderPanel(run: AlgorithmRun, view: View, scales: Scales, x: number, y: number, options: PanelOptions = {}): string {
  const out: string[] = [`<g transform="translate(${n(x)},${n(y)})" data-algorithm="${run.algorithm}">`];
  let top = 8;
  if (options.heading) {
    const t = run.totals;
    out.push(text(LEFT, 20, ALGORITHM_TITLES[run.algorithm], `font-size="16" font-weight="700" fill="${COLORS.text}"`));
    out.push(text(LEFT, 38, run.policyNames.join(" + "), `font-size="12" fill="${COLORS.muted}" font-family="ui-monospace,Menlo,Consolas,monospace"`));
    const parts = [
      `<tspan fill="${COLORS.allowed}" font-weight="700">allowed ${t.allowed}</tspan>`,
      `<tspan fill="${COLORS.denied}" font-weight="700">denied ${t.denied}</tspan>`,
      ...(t.delayed > 0 ? [`<tspan fill="${COLORS.delayed}">delayed ${t.delayed}</tspan>`] : []),
      ...(t.never > 0 ? [`<tspan fill="${COLORS.muted}">never ${t.never}</tspan>`] : []),
    ];
    out.push(`<text x="${LEFT}" y="56" font-size="13">${parts.join(`<tspan fill="${COLORS.muted}"> · </tspan>`)}</text>`);
    top = HEADING;
  }

  const bins = view.bins;
  const binWidth = PLOT_WIDTH / bins;
  const xOfMs = (ms: number) => LEFT + ((ms - view.startMs) / (view.endMs - view.startMs)) * PLOT_WIDTH;
  const tickStep = niceStep((view.endMs - view.startMs) / 5);
  const ticks: number[] = [];
  for (let t = Math.ceil(view.startMs / tickStep) * tickStep; t <= view.endMs; t += tickStep) ticks.push(t);
  const edges: number[] = [];
  const w = options.fixedWindowMs;
  if (w !== undefined && w > 0 && (view.endMs - view.startMs) / w <= 40) {
    for (let e = Math.ceil(view.startMs / w) * w; e <= view.endMs; e += w) if (e > view.startMs) edges.push(e);
  }
  const s = run.series;
  const remainingTop = Math.max(run.quota, ...s.remaining, 1);
  const gap = binWidth > 3 ? 0.6 : 0;

  for (const chart of CHARTS) {
    const y0 = top + LABEL;
    const h = chart.height;
    const base = y0 + h;
    const yMax = chart.id === "requests" ? scales.requestsPerBin : chart.id === "remaining" ? remainingTop : scales.retryAfterS;
    const yOf = (v: number) => base - (v / yMax) * h;
    const title =
      chart.id === "requests"
        ? `Requests per ${formatDuration(view.binMs)}`
        : chart.id === "remaining"
          ? "Remaining quota"
          : "Retry-After told to denied requests (s)";
    out.push(text(LEFT, top + 14, title, `font-size="12" font-weight="600" fill="${COLORS.axis}"`));
    // grid, axes, y labels
    for (const t of ticks) out.push(`<line x1="${n(xOfMs(t))}" x2="${n(xOfMs(t))}" y1="${n(y0)}" y2="${n(base)}" stroke="${COLORS.grid}"/>`);
    out.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_WIDTH}" y1="${n(y0)}" y2="${n(y0)}" stroke="${COLORS.grid}"/>`);
    out.push(text(LEFT - 5, y0 + 4, String(yMax), `font-size="11" text-anchor="end" fill="${COLORS.muted}"`));
    out.push(text(LEFT - 5, base + 4, "0", `font-size="11" text-anchor="end" fill="${COLORS.muted}"`));

    if (chart.id === "requests") {
      for (let b = 0; b < bins; b++) {
        const x = LEFT + b * binWidth;
        let level = 0;
        for (const [key, color] of [
          ["allowed", COLORS.allowed],
          ["delayed", COLORS.delayed],
          ["denied", COLORS.denied],
        ] as const) {
          const v = s[key][b] ?? 0;
          if (v === 0) continue;
          out.push(
            `<rect x="${n(x)}" y="${n(yOf(level + v))}" width="${n(Math.max(binWidth - gap, 0.5))}" height="${n((v / yMax) * h)}" fill="${color}"/>`,
          );
          level += v;
        }
      }
    } else if (chart.id === "remaining") {
      let line = "";
      for (let b = 0; b < bins; b++) {
        const y = n(yOf(s.remaining[b] ?? 0));
        line += `${b === 0 ? "M" : "L"}${n(LEFT + b * binWidth)},${y}H${n(LEFT + (b + 1) * binWidth)}`;
      }
      out.push(`<path d="${line}V${n(base)}H${LEFT}Z" fill="${COLORS.remaining}" fill-opacity="0.15"/>`);
      out.push(`<path d="${line}" fill="none" stroke="${COLORS.remaining}" stroke-width="1.5"/>`);
    } else {
      for (let b = 0; b < bins; b++) {
        const v = s.retryAfterS[b];
        if (v === null || v === undefined) continue;
        out.push(
          `<rect x="${n(LEFT + b * binWidth)}" y="${n(Math.min(yOf(v), base - 2))}" width="${n(Math.max(binWidth - gap, 0.5))}" height="${n(Math.max((v / yMax) * h, 2))}" fill="${COLORS.retryAfter}"/>`,
        );
      }
      if (run.totals.denied === 0) {
        out.push(text(LEFT + PLOT_WIDTH / 2, y0 + h / 2 + 4, "nothing denied", `font-size="12" text-anchor="middle" fill="${COLORS.muted}"`));
      } else if (run.totals.maxRetryAfterS === 0 && run.totals.never > 0) {
        out.push(text(LEFT + PLOT_WIDTH / 2, y0 + h / 2 + 4, "cost can never pass", `font-size="12" text-anchor="middle" fill="${COLORS.muted}"`));
      }
    }
    for (const e of edges) {
      out.push(`<line x1="${n(xOfMs(e))}" x2="${n(xOfMs(e))}" y1="${n(y0)}" y2="${n(base)}" stroke="${COLORS.edge}" stroke-dasharray="4 3"/>`);
    }
    out.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_WIDTH}" y1="${n(base)}" y2="${n(base)}" stroke="${COLORS.axis}"/>`);
    out.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${n(y0)}" y2="${n(base)}" stroke="${COLORS.axis}"/>`);
    top = base;
  }
  for (const t of ticks) {
    out.push(`<line x1="${n(xOfMs(t))}" x2="${n(xOfMs(t))}" y1="${n(top)}" y2="${n(top + 4)}" stroke="${COLORS.axis}"/>`);
    out.push(text(xOfMs(t), top + 16, formatTick(t, tickStep), `font-size="11" text-anchor="middle" fill="${COLORS.muted}"`));
  }
  out.push(text(LEFT + PLOT_WIDTH, top + 30, "time since trace start", `font-size="11" text-anchor="end" fill="${COLORS.muted}"`));
  out.push("</g>");
  return out.join("");
}

/** One panel as a standalone `<svg>` (the page's columns). */
export function renderPanelSvg(run: AlgorithmRun, view: View, scales: Scales, options: PanelOptions = {}): string {
  const height = panelHeight(options.heading === true);
  const label = `${ALGORITHM_TITLES[run.algorithm]}: ${run.totals.allowed} allowed, ${run.totals.denied} denied`;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${PANEL_WIDTH} ${height}" width="${PANEL_WIDTH}" height="${height}" role="img" aria-label="${escapeXml(label)}" font-family="system-ui,-apple-system,'Segoe UI',Roboto,sans-serif">` +
    renderPanel(run, view, scales, 0, 0, options) +
    "</svg>"
  );
}

/** Options of {@link renderComparisonSvg}. */
export interface ComparisonOptions {
  title: string;
  /** Lines under the title. */
  caption?: readonly string[];
}

/** A legend row at (x, y). */
function legend(x: number, y: number, withDelayed: boolean, withEdges: boolean): string {
  const items: [string, string, "rect" | "dash"][] = [
    ["allowed", COLORS.allowed, "rect"],
    ...(withDelayed ? ([["delayed (leaky-bucket queue)", COLORS.delayed, "rect"]] as [string, string, "rect"][]) : []),
    ["denied", COLORS.denied, "rect"],
    ["remaining", COLORS.remaining, "rect"],
    ["Retry-After", COLORS.retryAfter, "rect"],
    ...(withEdges ? ([["fixed-window edge", COLORS.edge, "dash"]] as [string, string, "dash"][]) : []),
  ];
  const out: string[] = [];
  let cx = x;
  for (const [label, color, kind] of items) {
    out.push(
      kind === "rect"
        ? `<rect x="${cx}" y="${y - 9}" width="10" height="10" fill="${color}"/>`
        : `<line x1="${cx}" x2="${cx + 12}" y1="${y - 4}" y2="${y - 4}" stroke="${color}" stroke-dasharray="4 3" stroke-width="1.5"/>`,
    );
    out.push(text(cx + 15, y, label, `font-size="12" fill="${COLORS.text}"`));
    cx += 15 + label.length * 6.4 + 16;
  }
  return out.join("");
}

/**
 * Several algorithms' panels side by side, with a title, caption and legend: the docs SVG.
 * Scales are shared so the panels compare.
 */
export function renderComparisonSvg(simulation: Simulation, algorithms: readonly AlgorithmId[], options: ComparisonOptions): string {
  const runs = algorithms.map((a) => {
    const run = simulation.runs[a];
    if (run === undefined) throw new Error(`no run for ${a}: ${simulation.scenario.errors[a] ?? simulation.scenario.errors.traffic ?? "not simulated"}`);
    return run;
  });
  const scales = scalesFor(runs);
  const caption = options.caption ?? [];
  const margin = 16;
  const headerHeight = 34 + caption.length * 18 + 26;
  const width = margin * 2 + runs.length * PANEL_WIDTH;
  const height = headerHeight + panelHeight(true) + margin;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeXml(options.title)}" font-family="system-ui,-apple-system,'Segoe UI',Roboto,sans-serif">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    text(margin + LEFT, 30, options.title, `font-size="18" font-weight="700" fill="${COLORS.text}"`),
  ];
  caption.forEach((line, i) => out.push(text(margin + LEFT, 52 + i * 18, line, `font-size="13" fill="${COLORS.muted}"`)));
  const withDelayed = runs.some((r) => r.totals.delayed > 0);
  out.push(legend(margin + LEFT, headerHeight - 6, withDelayed, simulation.scenario.fixedWindowMs !== undefined));
  runs.forEach((run, i) => {
    out.push(renderPanel(run, simulation.view, scales, margin + i * PANEL_WIDTH, headerHeight, { heading: true, fixedWindowMs: simulation.scenario.fixedWindowMs }));
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
