/**
 * The playground page: a form for the traffic and each algorithm's configuration, kept in the URL's
 * query string, and one column per algorithm with its counts and plots. Every decision comes from
 * the real `@sluice/core` (see `simulation.ts`); the plots are `plot.ts`'s SVG.
 *
 * Stable hooks for tests: `#preset`, `#run`, `#status` (`data-state` = running | done | error,
 * `data-run` = the number of the last finished run), inputs `#<setting key with "." as "-">`
 * (`#fixedWindow-limit`, `#edge-perSide`, `#trace-text`), and per algorithm
 * `[data-testid=allowed-<algorithm>]`, `denied-`, `delayed-`, `retry-max-`, `error-`, `plot-`.
 *
 * @module
 */
import { COLORS, formatDuration, renderPanelSvg, scalesFor } from "./plot.js";
import {
  ALGORITHMS,
  ALGORITHM_TITLES,
  type AlgorithmId,
  type AlgorithmRun,
  FIELDS,
  type Field,
  PRESETS,
  type PlaygroundState,
  type PresetId,
  SHAPES,
  SHAPE_TITLES,
  type Settings,
  buildScenario,
  formatTrace,
  generateTrace,
  isPresetId,
  presetSettings,
  runAlgorithm,
  stateFromQuery,
  stateToQuery,
  viewFor,
} from "./simulation.js";

type Child = Node | string;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`#${id} is missing`);
  return element as T;
}

/** The input id of a setting: its key with "." as "-". */
function inputId(key: string): string {
  return key.replace(/\./g, "-");
}

let state: PlaygroundState = stateFromQuery(location.search);

function fieldInput(field: Field): HTMLElement {
  const id = inputId(field.key);
  const value = state.settings[field.key] ?? "";
  if (field.kind === "shape") {
    const select = h("select", { id, name: field.key, "data-testid": id });
    for (const shape of SHAPES) select.append(h("option", { value: shape }, SHAPE_TITLES[shape]));
    select.value = value;
    return select;
  }
  if (field.kind === "text") {
    const area = h("textarea", { id, name: field.key, rows: "8", spellcheck: "false", "data-testid": id });
    area.value = value;
    return area;
  }
  const input = h("input", {
    id,
    name: field.key,
    type: "text",
    inputmode: field.kind === "duration" ? "text" : field.kind === "rate" ? "decimal" : "numeric",
    autocomplete: "off",
    "data-testid": id,
  });
  input.value = value;
  return input;
}

function labelled(field: Field): HTMLElement {
  const id = inputId(field.key);
  const attrs: Record<string, string> = { class: `field field-${field.kind}` };
  if (field.shape !== undefined) attrs["data-shape"] = field.shape;
  const label = h("label", attrs, h("span", {}, field.label), fieldInput(field));
  if (field.hint !== undefined) label.append(h("small", {}, field.hint));
  label.htmlFor = id;
  return label;
}

function buildPage(root: HTMLElement): void {
  const presetSelect = h("select", { id: "preset", "data-testid": "preset" });
  for (const preset of PRESETS) presetSelect.append(h("option", { value: preset.id }, preset.label));
  presetSelect.value = state.preset;

  const traffic = h("fieldset", { class: "traffic" }, h("legend", {}, "Traffic (one client)"));
  for (const field of FIELDS.filter((f) => f.group === "traffic")) traffic.append(labelled(field));
  traffic.append(
    h(
      "div",
      { class: "traffic-actions" },
      h("button", { type: "button", id: "use-as-trace", title: "Copy the current traffic into the trace box to edit it by hand" }, "Edit as a trace"),
      h("span", { id: "traffic-summary", "data-testid": "traffic-summary", class: "summary" }),
    ),
    h("p", { class: "error", id: "error-traffic", "data-testid": "error-traffic", role: "alert" }),
  );

  const plan = h("fieldset", { class: "plan" }, h("legend", {}, "Every column"));
  for (const field of FIELDS.filter((f) => f.group === "plan")) plan.append(labelled(field));
  plan.append(h("p", { class: "error", id: "error-plan", "data-testid": "error-plan", role: "alert" }));

  const legend = h("ul", { class: "legend" });
  for (const [label, color] of [
    ["allowed", COLORS.allowed],
    ["delayed (leaky-bucket queue)", COLORS.delayed],
    ["denied", COLORS.denied],
    ["remaining quota (least in the bin)", COLORS.remaining],
    ["Retry-After, s (most told in the bin)", COLORS.retryAfter],
  ] as const) {
    legend.append(h("li", {}, h("i", { style: `background:${color}` }), label));
  }
  legend.append(h("li", {}, h("i", { class: "dash" }), "fixed-window edge"));

  const columns = h("div", { class: "columns", id: "columns" });
  for (const algorithm of ALGORITHMS) {
    const config = h("div", { class: "config" });
    for (const field of FIELDS.filter((f) => f.group === algorithm)) config.append(labelled(field));
    const count = (kind: string) => h("strong", { id: `${kind}-${algorithm}`, "data-testid": `${kind}-${algorithm}` }, "–");
    columns.append(
      h(
        "section",
        { class: "column", id: `column-${algorithm}`, "data-testid": `column-${algorithm}` },
        h("h2", {}, ALGORITHM_TITLES[algorithm], " ", h("code", {}, `${algorithm}()`)),
        config,
        h("p", { class: "policy", id: `policy-${algorithm}`, "data-testid": `policy-${algorithm}` }),
        h(
          "p",
          { class: "counts" },
          h("span", { class: "allowed" }, "allowed ", count("allowed")),
          h("span", { class: "denied" }, "denied ", count("denied")),
          h("span", { class: "delayed" }, "delayed ", count("delayed")),
          h("span", { class: "retry" }, "max Retry-After ", count("retry-max"), " s"),
        ),
        h("p", { class: "error", id: `error-${algorithm}`, "data-testid": `error-${algorithm}`, role: "alert" }),
        h("div", { class: "plot", id: `plot-${algorithm}`, "data-testid": `plot-${algorithm}` }),
      ),
    );
  }

  root.append(
    h(
      "section",
      { class: "controls" },
      h(
        "div",
        { class: "preset-row" },
        h("label", { class: "field", for: "preset" }, h("span", {}, "Preset"), presetSelect),
        h("button", { type: "button", id: "run", "data-testid": "run" }, "Run"),
        h("span", { id: "status", "data-testid": "status", "data-state": "idle", "data-run": "0", role: "status" }),
      ),
      h("p", { id: "preset-description", class: "description" }),
      h("div", { class: "groups" }, traffic, plan),
    ),
    legend,
    columns,
  );

  presetSelect.addEventListener("change", () => {
    const preset = presetSelect.value;
    if (!isPresetId(preset)) return;
    state = { preset, settings: presetSettings(preset) };
    syncInputs();
    writeUrl(true);
    void run();
  });
  byId("run").addEventListener("click", () => void run());
  byId("use-as-trace").addEventListener("click", () => {
    try {
      const trace = generateTrace(state.settings);
      state.settings = { ...state.settings, shape: "trace", "trace.text": formatTrace(trace) };
      syncInputs();
      writeUrl(false);
      void run();
    } catch (error) {
      byId("error-traffic").textContent = error instanceof Error ? error.message : String(error);
    }
  });
  for (const field of FIELDS) {
    const input = byId<HTMLInputElement>(inputId(field.key));
    const onEdit = () => {
      state.settings = { ...state.settings, [field.key]: input.value };
      if (field.kind === "shape") showShapeFields();
      writeUrl(false);
      scheduleRun();
    };
    input.addEventListener(field.kind === "shape" ? "change" : "input", onEdit);
  }
  window.addEventListener("popstate", () => {
    state = stateFromQuery(location.search);
    syncInputs();
    void run();
  });
}

/** Puts the state's values into the inputs. */
function syncInputs(): void {
  byId<HTMLSelectElement>("preset").value = state.preset;
  for (const field of FIELDS) {
    const input = byId<HTMLInputElement>(inputId(field.key));
    const value = state.settings[field.key] ?? "";
    if (input.value !== value) input.value = value;
  }
  showShapeFields();
}

function showShapeFields(): void {
  const shape = state.settings.shape;
  for (const element of document.querySelectorAll<HTMLElement>("[data-shape]")) element.hidden = element.dataset.shape !== shape;
  const preset = PRESETS.find((p) => p.id === state.preset);
  byId("preset-description").textContent = preset?.description ?? "";
}

function writeUrl(push: boolean): void {
  const url = `${location.pathname}?${stateToQuery(state)}${location.hash}`;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

let timer: ReturnType<typeof setTimeout> | undefined;
function scheduleRun(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = setTimeout(() => {
    timer = undefined;
    void run();
  }, 250);
}

let runNumber = 0;
const breathe = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

function showRun(algorithm: AlgorithmId, run: AlgorithmRun | undefined, error: string | undefined): void {
  const t = run?.totals;
  byId(`allowed-${algorithm}`).textContent = t === undefined ? "–" : String(t.allowed);
  byId(`denied-${algorithm}`).textContent = t === undefined ? "–" : String(t.denied);
  byId(`delayed-${algorithm}`).textContent = t === undefined ? "–" : String(t.delayed);
  byId(`retry-max-${algorithm}`).textContent = t === undefined ? "–" : String(t.maxRetryAfterS);
  byId(`policy-${algorithm}`).textContent = run === undefined ? "" : `policies: ${run.policyNames.join(" + ")}`;
  byId(`error-${algorithm}`).textContent = error ?? "";
  byId(`column-${algorithm}`).classList.toggle("has-error", error !== undefined);
}

/** Runs the simulation of the current settings and shows it; a newer run supersedes an older one. */
async function run(): Promise<void> {
  const id = ++runNumber;
  const status = byId("status");
  status.dataset.state = "running";
  status.textContent = "Running…";
  const settings: Settings = state.settings;
  const started = performance.now();
  const scenario = buildScenario(settings);
  byId("error-traffic").textContent = scenario.errors.traffic ?? "";
  byId("error-plan").textContent = scenario.errors.plan ?? "";
  const trace = scenario.trace;
  const units = trace.reduce((sum, e) => sum + e.cost, 0);
  const spanMs = trace.length === 0 ? 0 : (trace[trace.length - 1]?.timeMs ?? 0) - (trace[0]?.timeMs ?? 0);
  byId("traffic-summary").textContent =
    scenario.errors.traffic === undefined ? `${trace.length} requests (${units} units) over ${formatDuration(spanMs)}` : "";

  const view = viewFor(trace);
  const runs: Partial<Record<AlgorithmId, AlgorithmRun>> = {};
  if (scenario.errors.traffic === undefined) {
    for (const algorithm of ALGORITHMS) {
      const policies = scenario.policies[algorithm];
      if (policies === undefined) continue;
      try {
        runs[algorithm] = await runAlgorithm(algorithm, policies, trace, view);
      } catch (error) {
        scenario.errors[algorithm] = error instanceof Error ? error.message : String(error);
      }
      await breathe();
      if (id !== runNumber) return;
    }
  }
  if (id !== runNumber) return;

  const scales = scalesFor(Object.values(runs));
  for (const algorithm of ALGORITHMS) {
    const result = runs[algorithm];
    showRun(algorithm, result, scenario.errors[algorithm]);
    byId(`plot-${algorithm}`).innerHTML =
      result === undefined ? "" : renderPanelSvg(result, view, scales, { fixedWindowMs: scenario.fixedWindowMs });
  }
  const failed = scenario.errors.traffic !== undefined || scenario.errors.plan !== undefined;
  status.dataset.state = failed ? "error" : "done";
  status.dataset.run = String(id);
  const elapsed = Math.round(performance.now() - started);
  status.textContent = failed
    ? "Fix the settings above to run."
    : `${trace.length} requests through ${Object.keys(runs).length} limiters in ${elapsed} ms`;
}

buildPage(byId("app"));
syncInputs();
void run();

/** For the console: the current state, and its URL. */
(globalThis as { playground?: unknown }).playground = {
  get state(): PlaygroundState {
    return state;
  },
  presets: PRESETS.map((p): PresetId => p.id),
};
