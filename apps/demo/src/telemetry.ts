/**
 * OpenTelemetry for the demo, behind the `SLUICE_OTEL` environment variable:
 *
 * - unset or empty: no SDK. The app is instrumented all the same (`@sluice/otel` on the
 *   `@opentelemetry/api` alone), so everything it records goes to the API's no-op.
 * - `console`: the SDK with its console exporters, registered as the global providers: each store
 *   call's span (`sluice.store consume` …) is printed as it ends, and the metrics
 *   (`sluice.decisions`, `sluice.store.duration`) every `SLUICE_OTEL_INTERVAL_MS` (default 10 000)
 *   and once more when the server stops.
 *
 * @module
 */
import { metrics, trace } from "@opentelemetry/api";
import { ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

/** A started SDK. */
export interface Telemetry {
  /** What the banner says about it. */
  description: string;
  /** Exports what is left and stops the SDK. */
  shutdown(): Promise<void>;
}

/**
 * Starts the SDK `mode` asks for (`SLUICE_OTEL`), or nothing. Throws on an unknown mode or a bad
 * interval, with a message naming the variable.
 */
export function startTelemetry(mode: string | undefined, intervalMs: string | undefined): Telemetry | undefined {
  if (mode === undefined || mode === "") return undefined;
  if (mode !== "console") throw new Error(`SLUICE_OTEL must be "console" (or unset for no telemetry); got ${JSON.stringify(mode)}`);
  const interval = intervalMs === undefined || intervalMs === "" ? 10_000 : Number(intervalMs);
  if (!Number.isInteger(interval) || interval < 100) {
    throw new Error(`SLUICE_OTEL_INTERVAL_MS must be an integer of at least 100 (milliseconds); got ${JSON.stringify(intervalMs)}`);
  }
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: interval, exportTimeoutMillis: Math.min(interval, 30_000) })],
  });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] });
  metrics.setGlobalMeterProvider(meterProvider);
  trace.setGlobalTracerProvider(tracerProvider);
  return {
    description: `OpenTelemetry: console exporters (SLUICE_OTEL=console): spans as they end, metrics every ${interval / 1000} s`,
    async shutdown() {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}
