/**
 * The OpenTelemetry SDK with in-memory exporters, for tests: a `MeterProvider` whose metrics are
 * read on demand (a periodic reader that never fires by itself, flushed by `metrics()`), and a
 * `BasicTracerProvider` that exports each span as it ends.
 */
import { AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

/** A counter's data point: its attributes and its value. */
export interface CounterPoint {
  attributes: Record<string, unknown>;
  value: number;
}

/** A histogram's data point: its attributes, count, the bucket boundaries. */
export interface HistogramPoint {
  attributes: Record<string, unknown>;
  count: number;
  sum: number;
  boundaries: number[];
}

/** A finished span as plain data. */
export interface SpanData {
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
  events: string[];
  scope: string;
  parentSpanId: string | undefined;
  spanId: string;
}

const byAttributes = <T extends { attributes: Record<string, unknown> }>(a: T, b: T) =>
  JSON.stringify(a.attributes).localeCompare(JSON.stringify(b.attributes));

export function startTestSdk() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });

  /** Every metric collected now, by name. */
  async function collect() {
    metricExporter.reset();
    await reader.forceFlush();
    const exported = metricExporter.getMetrics();
    const latest = exported[exported.length - 1];
    return (latest?.scopeMetrics ?? []).flatMap((scope) => scope.metrics.map((metric) => ({ scope: scope.scope, metric })));
  }

  return {
    meterProvider,
    tracerProvider,
    /** The data points of a counter, sorted by attributes (none if it recorded nothing). */
    async counter(name: string): Promise<CounterPoint[]> {
      const found = (await collect()).filter(({ metric }) => metric.descriptor.name === name);
      return found
        .flatMap(({ metric }) => (metric.dataPointType === DataPointType.SUM ? metric.dataPoints : []))
        .map((p) => ({ attributes: { ...p.attributes }, value: p.value }))
        .sort(byAttributes);
    },
    /** The data points of a histogram, sorted by attributes. */
    async histogram(name: string): Promise<HistogramPoint[]> {
      const found = (await collect()).filter(({ metric }) => metric.descriptor.name === name);
      return found
        .flatMap(({ metric }) => (metric.dataPointType === DataPointType.HISTOGRAM ? metric.dataPoints : []))
        .map((p) => ({ attributes: { ...p.attributes }, count: p.value.count, sum: p.value.sum ?? 0, boundaries: [...p.value.buckets.boundaries] }))
        .sort(byAttributes);
    },
    /** Every metric's descriptor (name, unit, description) and scope. */
    async descriptors() {
      return (await collect()).map(({ scope, metric }) => ({
        scope: scope.name,
        version: scope.version,
        name: metric.descriptor.name,
        unit: metric.descriptor.unit,
        description: metric.descriptor.description,
        type: metric.dataPointType,
      }));
    },
    /** The spans finished so far, in the order they ended. */
    spans(): SpanData[] {
      return spanExporter.getFinishedSpans().map((s) => ({
        name: s.name,
        kind: s.kind,
        attributes: { ...s.attributes },
        status: s.status.message === undefined ? { code: s.status.code } : { code: s.status.code, message: s.status.message },
        events: s.events.map((e) => e.name),
        scope: s.instrumentationScope.name,
        parentSpanId: s.parentSpanContext?.spanId,
        spanId: s.spanContext().spanId,
      }));
    },
    /** Forgets the spans finished so far (metrics are cumulative: compare before and after). */
    clearSpans(): void {
      spanExporter.reset();
    },
    async shutdown(): Promise<void> {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}

export type TestSdk = ReturnType<typeof startTestSdk>;
