/**
 * The playground's model, shared by the page and by `pnpm simulate`: the settings (one flat string
 * map that the form edits and the URL carries), the presets, the traffic shapes, and a run of the
 * real `@sluice/core` limiters over a trace on a simulated clock (`MemoryStore({ clock })`).
 *
 * No DOM and no Node APIs: it runs in the browser and in Node alike.
 *
 * @module
 */
import {
  type Duration,
  type FixedWindowPolicy,
  MemoryStore,
  type Policy,
  RateLimiter,
  SluiceError,
  fixedWindow,
  toMs,
} from "@sluice/core";
import { type AlgorithmId, PLAYGROUND_ALGORITHMS, PLOTTED_ALGORITHMS, type SettingsReader } from "./algorithms/index.js";

export type { AlgorithmId } from "./algorithms/index.js";

/**
 * The algorithms the page plots (the five rate algorithms; not the concurrency cap), in the order it
 * shows them: those of the table in `algorithms/index.ts`, one file each.
 */
export const ALGORITHMS: readonly AlgorithmId[] = PLOTTED_ALGORITHMS;

/** Human titles of the algorithms. */
export const ALGORITHM_TITLES: Readonly<Record<AlgorithmId, string>> = Object.fromEntries(
  ALGORITHMS.map((algorithm) => [algorithm, PLAYGROUND_ALGORITHMS[algorithm].title]),
) as Record<AlgorithmId, string>;

/** The traffic shapes. */
export const SHAPES = ["edge", "steady", "bursts", "ramp", "trace"] as const;
/** One of {@link SHAPES}. */
export type ShapeId = (typeof SHAPES)[number];

/** Human titles of the traffic shapes. */
export const SHAPE_TITLES: Readonly<Record<ShapeId, string>> = {
  edge: "Spike across a fixed-window edge",
  steady: "Steady rate",
  bursts: "Bursts",
  ramp: "Ramp",
  trace: "Pasted trace",
};

/**
 * Epoch ms of trace time 0: midnight UTC, so windows of a second, a minute, an hour or a day all
 * start at trace time 0 (fixed windows are aligned to the epoch).
 */
export const T0_MS = Date.UTC(2026, 0, 1);

/** The one client whose requests the simulation sends. */
export const CLIENT_KEY = "client";

/** The most requests one simulation runs (the page stays responsive below it). */
export const MAX_REQUESTS = 50_000;

/** One request of a trace: when (ms after trace time 0) and how many units it costs. */
export interface TraceEntry {
  timeMs: number;
  cost: number;
}

/** How an input is read. */
export type FieldKind = "count" | "count0" | "rate" | "duration" | "text" | "shape";

/** Which part of the page a setting belongs to. */
export type FieldGroup = "traffic" | "plan" | AlgorithmId;

/** One setting: its key (in the URL and the settings map; the input's id with `.` as `-`). */
export interface Field {
  key: string;
  label: string;
  kind: FieldKind;
  group: FieldGroup;
  /** For traffic fields: the shape they shape. */
  shape?: ShapeId;
  hint?: string;
}

/** Every setting, in the order the page shows them and the URL writes them. */
export const FIELDS: readonly Field[] = [
  { key: "shape", label: "Traffic", kind: "shape", group: "traffic" },
  { key: "edge.perSide", label: "Requests each side", kind: "count", group: "traffic", shape: "edge" },
  { key: "edge.spread", label: "Spread each side", kind: "duration", group: "traffic", shape: "edge", hint: "e.g. 1s, 500ms" },
  { key: "edge.at", label: "Edge at", kind: "duration", group: "traffic", shape: "edge", hint: "a multiple of the fixed window" },
  { key: "steady.rate", label: "Requests per second", kind: "rate", group: "traffic", shape: "steady" },
  { key: "steady.duration", label: "For", kind: "duration", group: "traffic", shape: "steady" },
  { key: "bursts.size", label: "Requests per burst", kind: "count", group: "traffic", shape: "bursts" },
  { key: "bursts.spread", label: "Burst lasts", kind: "duration", group: "traffic", shape: "bursts" },
  { key: "bursts.every", label: "Every", kind: "duration", group: "traffic", shape: "bursts" },
  { key: "bursts.count", label: "Bursts", kind: "count", group: "traffic", shape: "bursts" },
  { key: "ramp.from", label: "From (requests/s)", kind: "rate", group: "traffic", shape: "ramp" },
  { key: "ramp.to", label: "To (requests/s)", kind: "rate", group: "traffic", shape: "ramp" },
  { key: "ramp.duration", label: "Over", kind: "duration", group: "traffic", shape: "ramp" },
  {
    key: "trace.text",
    label: "Trace",
    kind: "text",
    group: "traffic",
    shape: "trace",
    hint: "one request per line: time in ms, or time,cost",
  },
  { key: "daily", label: "Also per day (fixed window, 0 = off)", kind: "count0", group: "plan" },
  // then each algorithm's own, from its file in algorithms/
  ...ALGORITHMS.flatMap((algorithm) =>
    PLAYGROUND_ALGORITHMS[algorithm].fields.map((f): Field => ({ key: `${algorithm}.${f.name}`, label: f.label, kind: f.kind, group: algorithm })),
  ),
];

const FIELD_KEYS = new Set(FIELDS.map((f) => f.key));

/** Every setting as the form shows it: strings, keyed by {@link Field.key}. */
export type Settings = Record<string, string>;

/** "N per minute" for every algorithm, and the window-edge traffic. */
const BASE_SETTINGS: Settings = {
  shape: "edge",
  "edge.perSide": "100",
  "edge.spread": "1s",
  "edge.at": "1m",
  "steady.rate": "2",
  "steady.duration": "2m",
  "bursts.size": "40",
  "bursts.spread": "1s",
  "bursts.every": "15s",
  "bursts.count": "12",
  "ramp.from": "0",
  "ramp.to": "4",
  "ramp.duration": "3m",
  "trace.text": "0\n100\n200\n300,5\n1000\n1500,2\n",
  daily: "0",
  ...Object.fromEntries(ALGORITHMS.flatMap((algorithm) => PLAYGROUND_ALGORITHMS[algorithm].fields.map((f) => [`${algorithm}.${f.name}`, f.default]))),
};

/**
 * The demo API's plans (`apps/demo`): requests per minute, per day, and the burst a client may
 * spend at once.
 */
export const PLANS = {
  free: { perMinute: 30, perDay: 1_000, burst: 10 },
  pro: { perMinute: 300, perDay: 50_000, burst: 50 },
  enterprise: { perMinute: 3_000, perDay: 500_000, burst: 200 },
} as const;

/**
 * A plan as settings: every algorithm at the plan's per-minute rate, the buckets at its burst (the
 * leaky bucket with a queue as deep; each algorithm's file says how), and its daily cap as a second
 * limit.
 */
function planSettings(plan: keyof typeof PLANS): Settings {
  const { perMinute, perDay, burst } = PLANS[plan];
  return {
    // a client that sends bursts of 4× the plan's burst every 15 s: above the plan for the free and pro plans
    shape: "bursts",
    "bursts.size": String(burst * 4),
    "bursts.spread": "1s",
    "bursts.every": "15s",
    "bursts.count": "12",
    daily: String(perDay),
    ...Object.fromEntries(
      ALGORITHMS.flatMap((algorithm) => Object.entries(PLAYGROUND_ALGORITHMS[algorithm].plan({ perMinute, burst })).map(([name, value]) => [`${algorithm}.${name}`, value])),
    ),
  };
}

/** The presets, the first being the default. */
export const PRESETS = [
  {
    id: "window-edge",
    label: "Window edge: 200 requests in 2 s across a minute boundary, 100 per minute",
    description:
      "100 requests in the last second before a minute boundary and 100 in the first second after it, against \"100 per minute\". " +
      "A fixed window admits all 200; the sliding window, the sliding log and the buckets hold the line near 100.",
    settings: {},
  },
  {
    id: "free",
    label: "Free plan: 30/min, burst 10, 1,000/day",
    description: "The demo API's free plan: bursts of 40 requests every 15 s against 30 per minute (burst 10 for the buckets) and 1,000 per day.",
    settings: planSettings("free"),
  },
  {
    id: "pro",
    label: "Pro plan: 300/min, burst 50, 50,000/day",
    description: "The demo API's pro plan: bursts of 200 requests every 15 s against 300 per minute (burst 50 for the buckets) and 50,000 per day.",
    settings: planSettings("pro"),
  },
  {
    id: "enterprise",
    label: "Enterprise plan: 3,000/min, burst 200, 500,000/day",
    description:
      "The demo API's enterprise plan: bursts of 800 requests every 15 s against 3,000 per minute (burst 200 for the buckets) and 500,000 per day.",
    settings: planSettings("enterprise"),
  },
] as const satisfies readonly { id: string; label: string; description: string; settings: Settings }[];

/** The id of a preset. */
export type PresetId = (typeof PRESETS)[number]["id"];

/** The default preset: the seed article's window-edge case. */
export const DEFAULT_PRESET: PresetId = "window-edge";

/** True if `id` names a preset. */
export function isPresetId(id: string): id is PresetId {
  return PRESETS.some((p) => p.id === id);
}

/** The full settings of a preset. */
export function presetSettings(id: PresetId): Settings {
  const preset = PRESETS.find((p) => p.id === id) ?? PRESETS[0];
  return { ...BASE_SETTINGS, ...preset.settings };
}

/** What the page shows: a preset and the settings (the preset's, with the user's changes). */
export interface PlaygroundState {
  preset: PresetId;
  settings: Settings;
}

/**
 * Reads a state from a URL query string (`?preset=pro&fixedWindow.limit=50`): the preset's settings,
 * then every known key given. An unknown preset is the default one; unknown keys are ignored.
 */
export function stateFromQuery(query: string): PlaygroundState {
  const params = new URLSearchParams(query);
  const requested = params.get("preset");
  const preset = requested !== null && isPresetId(requested) ? requested : DEFAULT_PRESET;
  const settings = presetSettings(preset);
  for (const [key, value] of params) {
    if (FIELD_KEYS.has(key)) settings[key] = value;
  }
  return { preset, settings };
}

/** Writes a state as a query string: the preset, and only the settings that differ from it. */
export function stateToQuery(state: PlaygroundState): string {
  const base = presetSettings(state.preset);
  const params = new URLSearchParams({ preset: state.preset });
  for (const field of FIELDS) {
    const value = state.settings[field.key];
    if (value !== undefined && value !== base[field.key]) params.set(field.key, value);
  }
  return params.toString();
}

/** A setting that cannot be read: the message says which and why. */
export class SettingsError extends Error {
  override readonly name = "SettingsError";
}

function setting(settings: Settings, key: string): string {
  return (settings[key] ?? BASE_SETTINGS[key] ?? "").trim();
}

/** A count as core expects it: digits become a number, anything else goes to core as it is (and core says what is wrong). */
function countOption(settings: Settings, key: string): number {
  const text = setting(settings, key);
  return /^\d+$/.test(text) ? Number(text) : Number.NaN;
}

/** A duration as core accepts it: a number of ms, or a string like "1m". */
function durationOption(settings: Settings, key: string): Duration {
  const text = setting(settings, key);
  return /^\d+$/.test(text) ? Number(text) : (text as `${number}m`);
}

function trafficDurationMs(settings: Settings, key: string, label: string): number {
  try {
    return toMs(durationOption(settings, key), label);
  } catch (error) {
    throw new SettingsError(error instanceof Error ? error.message : String(error));
  }
}

function trafficCount(settings: Settings, key: string, label: string): number {
  const value = countOption(settings, key);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SettingsError(`${label} must be a positive whole number; got ${JSON.stringify(setting(settings, key))}`);
  }
  return value;
}

function trafficRate(settings: Settings, key: string, label: string, allowZero: boolean): number {
  const text = setting(settings, key);
  const value = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new SettingsError(`${label} must be a ${allowZero ? "non-negative" : "positive"} number of requests per second; got ${JSON.stringify(text)}`);
  }
  return value;
}

function checkSize(count: number): void {
  if (count > MAX_REQUESTS) {
    throw new SettingsError(`this traffic has ${count} requests; the playground runs at most ${MAX_REQUESTS}`);
  }
}

/**
 * Parses a pasted trace: one request per line, `time` (ms after trace time 0) or `time,cost`
 * (also `time cost` or `time;cost`). Blank lines and lines starting with `#` are skipped. The result
 * is sorted by time (stable).
 *
 * @throws {SettingsError} naming the line that cannot be read
 */
export function parseTrace(text: string): TraceEntry[] {
  const entries: TraceEntry[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const parts = line.split(/\s*[,;\s]\s*/);
    const timeText = parts[0] ?? "";
    const costText = parts[1];
    if (parts.length > 2 || !/^\d+(\.\d+)?$/.test(timeText) || (costText !== undefined && !/^\d+$/.test(costText))) {
      throw new SettingsError(`trace line ${index + 1}: expected "time" or "time,cost" (ms, whole units); got ${JSON.stringify(line)}`);
    }
    const cost = costText === undefined ? 1 : Number(costText);
    if (!Number.isSafeInteger(cost) || cost <= 0) {
      throw new SettingsError(`trace line ${index + 1}: cost must be a positive whole number; got ${JSON.stringify(costText)}`);
    }
    entries.push({ timeMs: Number(timeText), cost });
    checkSize(entries.length);
  }
  return entries.map((entry, i) => ({ entry, i })).sort((a, b) => a.entry.timeMs - b.entry.timeMs || a.i - b.i).map(({ entry }) => entry);
}

/** Writes a trace as {@link parseTrace} reads it (`time` for cost 1, else `time,cost`). */
export function formatTrace(trace: readonly TraceEntry[]): string {
  return trace.map((e) => (e.cost === 1 ? `${e.timeMs}` : `${e.timeMs},${e.cost}`)).join("\n") + "\n";
}

/** `count` requests spread evenly over `[startMs, startMs + spreadMs)`, on whole milliseconds. */
function spread(startMs: number, spreadMs: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => startMs + Math.floor((i * spreadMs) / count));
}

/**
 * The requests of the traffic the settings describe, sorted by time.
 *
 * - `edge`: `perSide` requests spread over `spread` before `at`, and `perSide` over `spread` after.
 * - `steady`: `rate` requests per second for `duration`.
 * - `bursts`: `count` bursts of `size` requests spread over `spread`, one burst every `every`.
 * - `ramp`: a rate growing linearly from `from` to `to` requests per second over `duration`.
 * - `trace`: the pasted trace.
 *
 * @throws {SettingsError} for a setting that cannot be read, or more than {@link MAX_REQUESTS} requests
 */
export function generateTrace(settings: Settings): TraceEntry[] {
  const shape = setting(settings, "shape");
  const ones = (times: number[]): TraceEntry[] => times.map((timeMs) => ({ timeMs, cost: 1 }));
  switch (shape) {
    case "edge": {
      const perSide = trafficCount(settings, "edge.perSide", "requests each side");
      const spreadMs = trafficDurationMs(settings, "edge.spread", "spread each side");
      const atMs = trafficDurationMs(settings, "edge.at", "edge at");
      checkSize(2 * perSide);
      if (spreadMs > atMs) throw new SettingsError(`spread each side (${spreadMs} ms) must not exceed the edge's time (${atMs} ms)`);
      return ones([...spread(atMs - spreadMs, spreadMs, perSide), ...spread(atMs, spreadMs, perSide)]);
    }
    case "steady": {
      const rate = trafficRate(settings, "steady.rate", "requests per second", false);
      const durationMs = trafficDurationMs(settings, "steady.duration", "duration");
      const count = Math.floor((rate * durationMs) / 1000);
      checkSize(count);
      return ones(Array.from({ length: count }, (_, i) => Math.floor((i * 1000) / rate)));
    }
    case "bursts": {
      const size = trafficCount(settings, "bursts.size", "requests per burst");
      const spreadMs = trafficDurationMs(settings, "bursts.spread", "burst length");
      const everyMs = trafficDurationMs(settings, "bursts.every", "burst interval");
      const count = trafficCount(settings, "bursts.count", "bursts");
      checkSize(size * count);
      if (spreadMs > everyMs) throw new SettingsError(`a burst (${spreadMs} ms) must not last longer than the interval between bursts (${everyMs} ms)`);
      return ones(Array.from({ length: count }, (_, j) => spread(j * everyMs, spreadMs, size)).flat());
    }
    case "ramp": {
      const from = trafficRate(settings, "ramp.from", "start rate", true);
      const to = trafficRate(settings, "ramp.to", "end rate", true);
      const durationMs = trafficDurationMs(settings, "ramp.duration", "ramp duration");
      if (from === 0 && to === 0) throw new SettingsError("a ramp needs a start or end rate above 0");
      // requests sent by time t (s): N(t) = from*t + (to - from)*t²/(2D); request k is sent when N(t) = k
      const seconds = durationMs / 1000;
      const a = (to - from) / (2 * seconds);
      const count = Math.floor(from * seconds + a * seconds * seconds + 1e-9);
      checkSize(count);
      return ones(
        Array.from({ length: count }, (_, k) => {
          const t = a === 0 ? k / from : (-from + Math.sqrt(from * from + 4 * a * k)) / (2 * a);
          return Math.min(durationMs - 1, Math.floor(t * 1000 + 1e-6));
        }),
      );
    }
    case "trace":
      return parseTrace(setting(settings, "trace.text"));
    default:
      throw new SettingsError(`traffic must be one of ${SHAPES.join(", ")}; got ${JSON.stringify(shape)}`);
  }
}

/** The policies of one algorithm's column: its own (its file in `algorithms/` builds it), then the daily cap if set. */
export function policiesFor(algorithm: AlgorithmId, settings: Settings): Policy[] {
  const read: SettingsReader = {
    count: (name) => countOption(settings, `${algorithm}.${name}`),
    duration: (name) => durationOption(settings, `${algorithm}.${name}`),
  };
  const main = PLAYGROUND_ALGORITHMS[algorithm].policy(read);
  const daily = dailyLimit(settings);
  return daily === 0 ? [main] : [main, fixedWindow({ limit: daily, window: "1d", name: "per-day" })];
}

/** The daily cap of the settings, 0 if off. */
export function dailyLimit(settings: Settings): number {
  const text = setting(settings, "daily");
  if (text === "" || text === "0") return 0;
  const daily = countOption(settings, "daily");
  if (!Number.isSafeInteger(daily) || daily <= 0) {
    throw new SettingsError(`the daily cap must be a whole number (0 = off); got ${JSON.stringify(text)}`);
  }
  return daily;
}

/** What the settings make: the trace and each algorithm's policies, or why not. */
export interface Scenario {
  /** The requests, sorted by time; empty if the traffic settings are wrong. */
  trace: TraceEntry[];
  /** The policies of each algorithm whose settings core accepts. */
  policies: Partial<Record<AlgorithmId, Policy[]>>;
  /** Messages for the traffic (`traffic`) and for each algorithm whose settings core refuses. */
  errors: Partial<Record<FieldGroup, string>>;
  /** The fixed window's length, to mark its edges on every plot (undefined if its settings are wrong). */
  fixedWindowMs: number | undefined;
}

function message(error: unknown): string {
  if (error instanceof SettingsError || error instanceof SluiceError) return error.message;
  throw error;
}

/** Builds the trace and the policies; each part that cannot be built gets a message instead. */
export function buildScenario(settings: Settings): Scenario {
  const scenario: Scenario = { trace: [], policies: {}, errors: {}, fixedWindowMs: undefined };
  try {
    scenario.trace = generateTrace(settings);
  } catch (error) {
    scenario.errors.traffic = message(error);
  }
  try {
    dailyLimit(settings);
  } catch (error) {
    scenario.errors.plan = message(error);
    return scenario;
  }
  for (const algorithm of ALGORITHMS) {
    try {
      scenario.policies[algorithm] = policiesFor(algorithm, settings);
    } catch (error) {
      scenario.errors[algorithm] = message(error);
    }
  }
  // the fixed window's column starts with its own policy, built by fixedWindow()
  const fixed = scenario.policies.fixedWindow?.[0] as FixedWindowPolicy | undefined;
  scenario.fixedWindowMs = fixed?.windowMs;
  return scenario;
}

/** The time axis of the plots: `bins` bins of `binMs` from `startMs` (ms after trace time 0). */
export interface View {
  startMs: number;
  endMs: number;
  binMs: number;
  bins: number;
}

/** The smallest of 1, 2, 5 × 10^k that is at least `x`. */
export function niceStep(x: number): number {
  if (!(x > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * power >= x - 1e-9) return m * power;
  return 10 * power;
}

/** The time axis for a trace: its span plus 5% each side, in about 120 bins of a round length. */
export function viewFor(trace: readonly TraceEntry[], targetBins = 120): View {
  const first = trace[0]?.timeMs ?? 0;
  const last = trace[trace.length - 1]?.timeMs ?? 0;
  const span = Math.max(last - first, 1000);
  const pad = span * 0.05;
  const binMs = Math.max(1, niceStep((span + 2 * pad) / targetBins));
  const startMs = Math.max(0, Math.floor((first - pad) / binMs) * binMs);
  const endMs = Math.max(startMs + binMs, Math.ceil((last + pad + 1) / binMs) * binMs);
  return { startMs, endMs, binMs, bins: Math.round((endMs - startMs) / binMs) };
}

/** One request's outcome, from the core's decision. */
export interface RequestOutcome {
  timeMs: number;
  cost: number;
  allowed: boolean;
  /** `decision.delayMs`: > 0 for a request the leaky bucket queued. */
  delayMs: number;
  remaining: number;
  /** `decision.retryAfterMs` (0 if allowed, `Infinity` if the cost can never pass). */
  retryAfterMs: number;
  /** The binding policy's name. */
  policy: string;
}

/** Per-bin series of a run, for the plots. */
export interface Series {
  /** Requests allowed at once. */
  allowed: number[];
  /** Requests allowed with a delay (leaky bucket queue). */
  delayed: number[];
  denied: number[];
  /** The least `remaining` seen in the bin: at its start (a peek) and after each request. */
  remaining: number[];
  /** The largest `Retry-After` (s) a denied client was told in the bin; null if none was denied (or only with "never"). */
  retryAfterS: (number | null)[];
}

/** Totals of a run, in requests. */
export interface Totals {
  requests: number;
  allowed: number;
  denied: number;
  /** Of the allowed: those the leaky bucket queued (`delayMs > 0`). */
  delayed: number;
  /** Of the denied: those whose cost can never pass (`retryAfterMs: Infinity`, no `Retry-After`). */
  never: number;
  /** The largest `Retry-After` (s) told, 0 if none. */
  maxRetryAfterS: number;
}

/** One algorithm's column: its decisions, totals and plot series. */
export interface AlgorithmRun {
  algorithm: AlgorithmId;
  /** The policies' names, the algorithm's own first. */
  policyNames: string[];
  /** The algorithm's own quota (limit, capacity or burst): the top of the remaining plot. */
  quota: number;
  outcomes: RequestOutcome[];
  totals: Totals;
  series: Series;
}

/** `Retry-After` in seconds as a client sees it: `ceil(retryAfterMs / 1000)`. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.ceil(retryAfterMs / 1000);
}

/**
 * Runs one limiter over a trace: a fresh `MemoryStore` whose clock is the simulated time, one
 * `limit(CLIENT_KEY, { cost })` per request at `T0_MS + timeMs`, and a `peek` at the start of each
 * bin (it consumes nothing) so the remaining plot shows refills between requests.
 */
export async function runAlgorithm(algorithm: AlgorithmId, policies: readonly Policy[], trace: readonly TraceEntry[], view: View): Promise<AlgorithmRun> {
  let nowMs = T0_MS;
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => nowMs }), limits: policies, prefix: "playground" });
  const series: Series = { allowed: [], delayed: [], denied: [], remaining: [], retryAfterS: [] };
  const totals: Totals = { requests: trace.length, allowed: 0, denied: 0, delayed: 0, never: 0, maxRetryAfterS: 0 };
  const outcomes: RequestOutcome[] = [];
  let next = 0;
  for (let bin = 0; bin < view.bins; bin++) {
    const binStart = view.startMs + bin * view.binMs;
    const binEnd = bin === view.bins - 1 ? Number.POSITIVE_INFINITY : binStart + view.binMs;
    nowMs = T0_MS + binStart;
    let remaining = (await limiter.peek(CLIENT_KEY)).remaining;
    let allowed = 0;
    let delayed = 0;
    let denied = 0;
    let retryAfterS: number | null = null;
    for (; next < trace.length && (trace[next] as TraceEntry).timeMs < binEnd; next++) {
      const { timeMs, cost } = trace[next] as TraceEntry;
      nowMs = T0_MS + timeMs;
      const decision = await limiter.limit(CLIENT_KEY, { cost });
      if (decision.reason === "store-error" || decision.reason === "timeout") {
        throw new Error(`the memory store failed at ${timeMs} ms: ${decision.reason}`);
      }
      outcomes.push({
        timeMs,
        cost,
        allowed: decision.allowed,
        delayMs: decision.delayMs,
        remaining: decision.remaining,
        retryAfterMs: decision.retryAfterMs,
        policy: decision.policy,
      });
      remaining = Math.min(remaining, decision.remaining);
      if (decision.allowed) {
        totals.allowed++;
        if (decision.delayMs > 0) {
          delayed++;
          totals.delayed++;
        } else {
          allowed++;
        }
      } else {
        denied++;
        totals.denied++;
        if (decision.retryAfterMs === Number.POSITIVE_INFINITY) {
          totals.never++;
        } else {
          const seconds = retryAfterSeconds(decision.retryAfterMs);
          retryAfterS = Math.max(retryAfterS ?? 0, seconds);
          totals.maxRetryAfterS = Math.max(totals.maxRetryAfterS, seconds);
        }
      }
    }
    series.allowed.push(allowed);
    series.delayed.push(delayed);
    series.denied.push(denied);
    series.remaining.push(remaining);
    series.retryAfterS.push(retryAfterS);
  }
  const own = policies[0] as Policy;
  return { algorithm, policyNames: policies.map((p) => p.name), quota: own.limit, outcomes, totals, series };
}

/** A whole simulation: the view and one run per algorithm that could be built. */
export interface Simulation {
  scenario: Scenario;
  view: View;
  runs: Partial<Record<AlgorithmId, AlgorithmRun>>;
}

/** Builds the scenario of the settings and runs every algorithm (or those named) over its trace. */
export async function simulate(settings: Settings, algorithms: readonly AlgorithmId[] = ALGORITHMS): Promise<Simulation> {
  const scenario = buildScenario(settings);
  const view = viewFor(scenario.trace);
  const runs: Simulation["runs"] = {};
  if (scenario.errors.traffic === undefined) {
    for (const algorithm of algorithms) {
      const policies = scenario.policies[algorithm];
      if (policies !== undefined) runs[algorithm] = await runAlgorithm(algorithm, policies, scenario.trace, view);
    }
  }
  return { scenario, view, runs };
}
