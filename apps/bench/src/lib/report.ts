/**
 * Targets, ratios and the printed tables shared by every benchmark file.
 *
 * @module
 */
import { fileURLToPath, pathToFileURL } from "node:url";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";

/** A target checked against a measured ratio or figure. PASS/MISS is reported, never enforced. */
export interface Target {
  /** What is compared, e.g. `"vs rate-limiter-flexible"`. */
  readonly against: string;
  /** `">="` for speed ratios, `"<="` for bytes, `">"`/`"<"` for strictly ahead/below, `"="` for an exact figure. */
  readonly op: TargetOp;
  readonly bound: number;
  /** The measured value compared with `bound`. */
  readonly value: number;
  readonly pass: boolean;
}

/** How a measured value is compared with its bound. */
export type TargetOp = ">=" | "<=" | ">" | "<" | "=";

const OP_SYMBOL: Readonly<Record<TargetOp, string>> = { ">=": "≥", "<=": "≤", ">": ">", "<": "<", "=": "=" };

/** Builds a {@link Target}. */
export function target(against: string, op: TargetOp, bound: number, value: number): Target {
  const pass =
    op === ">=" ? value >= bound : op === "<=" ? value <= bound : op === ">" ? value > bound : op === "<" ? value < bound : value === bound;
  return { against, op, bound, value, pass };
}

/** `"PASS"` or `"MISS"`, with the bound: `"PASS (≥ 1.3x)"`. */
export function verdict(t: Target, unit = "x"): string {
  return `${t.pass ? "PASS" : "MISS"} (${OP_SYMBOL[t.op]} ${t.bound}${unit})`;
}

/** Decisions per second as `"1.23 M/s"`, `"456 k/s"`, `"42.3 k/s"` or `"190 /s"`. */
export function formatRate(opsPerSec: number): string {
  if (opsPerSec >= 1e6) return `${(opsPerSec / 1e6).toFixed(2)} M/s`;
  if (opsPerSec >= 1e5) return `${(opsPerSec / 1e3).toFixed(0)} k/s`;
  if (opsPerSec >= 1e3) return `${(opsPerSec / 1e3).toFixed(1)} k/s`;
  return `${opsPerSec.toFixed(0)} /s`;
}

/** A ratio as `"2.35x"`. */
export function formatRatio(ratio: number): string {
  return `${ratio.toFixed(2)}x`;
}

/** A markdown table with right-aligned numeric columns (by `align`). */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[], align: readonly ("l" | "r")[] = []): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const pad = (cell: string, i: number) => (align[i] === "r" ? cell.padStart(widths[i] as number) : cell.padEnd(widths[i] as number));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => pad(c, i)).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (align[i] === "r" ? `${"-".repeat(w + 1)}:` : `${"-".repeat(w + 2)}`)).join("|")}|`;
  return [line(header), rule, ...rows.map((r) => line(r))].join("\n");
}

/** The machine a run happened on, recorded next to its figures. */
export interface MachineInfo {
  readonly node: string;
  readonly cpu: string;
  readonly cores: number;
  /** 1-minute load average when the run started and ended (other processes competing for the cores). */
  readonly loadAvgStart: number;
  readonly loadAvgEnd?: number;
}

/** Describes this machine now. */
export function machineInfo(): MachineInfo {
  const cpu = cpus();
  return { node: process.version, cpu: cpu[0]?.model.trim() ?? "unknown", cores: cpu.length, loadAvgStart: round2(loadavg()[0] ?? 0) };
}

/** The current 1-minute load average, to two decimals. */
export function loadAvgNow(): number {
  return round2(loadavg()[0] ?? 0);
}

export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

/** Writes `data` as pretty JSON to `file` (a URL or path), creating its directory. */
export function writeJson(file: URL, data: unknown): void {
  mkdirSync(new URL(".", file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
}

/** The closing lines of a report: the PASS/MISS count and every miss. */
export function summaryLines(summary: { readonly pass: number; readonly miss: number; readonly misses: readonly string[] }): string[] {
  return [
    `Targets: ${summary.pass} PASS, ${summary.miss} MISS (a miss is reported, never fatal).`,
    ...summary.misses.map((miss) => `- MISS ${miss}`),
  ];
}

/**
 * Runs a bench file's `main` when the file is the process's entry point: runs the bench (progress
 * on stderr), prints its report, and writes its figures to `file`.
 */
export async function runIfMain<R>(
  moduleUrl: string,
  file: URL,
  run: (log: (line: string) => void) => Promise<R>,
  format: (report: R) => string,
): Promise<void> {
  if (process.argv[1] === undefined || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  const report = await run((line) => process.stderr.write(`${line}\n`));
  console.log(format(report));
  writeJson(file, report);
  console.log(`\nFigures written to ${fileURLToPath(file)}`);
}
