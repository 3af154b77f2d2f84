/**
 * `SLUICE_OTEL=console`: the real demo process prints each store call's span as it ends and, at
 * the interval and when it stops, the metrics — `sluice.decisions` by policy, allowed, reason and
 * tier, `sluice.store.duration` — through the OpenTelemetry SDK's console exporters. Without the
 * variable it prints none of it; a wrong value stops it at once with a message naming the variable.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startDemo } from "./demo-process.js";

const demoDir = fileURLToPath(new URL("..", import.meta.url));

/** Polls until `output()` matches, for at most 10 s. */
async function until(output: () => string, pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!pattern.test(output())) {
    if (Date.now() > deadline) throw new Error(`${pattern} not printed within 10 s; output:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the demo's OpenTelemetry switch", () => {
  it("SLUICE_OTEL=console prints spans and the two metrics, the last export on SIGTERM", async () => {
    const demo = await startDemo({ SLUICE_OTEL: "console", SLUICE_OTEL_INTERVAL_MS: "60000" });
    try {
      expect(demo.output()).toContain("OpenTelemetry: console exporters (SLUICE_OTEL=console)");
      const statuses = [];
      for (let i = 0; i < 11; i++) statuses.push((await fetch(`${demo.base}/api/quote`, { headers: { "x-api-key": "free-demo-key" } })).status);
      expect(statuses).toEqual([...Array(10).fill(200), 429]); // the free plan's burst is 10
      // one span per store call, printed as it ends, with the outcome
      await until(demo.output, /'sluice\.allowed': false/);
      const spans = demo.output().match(/name: 'sluice\.store consume'/g) ?? [];
      expect(spans).toHaveLength(11);
      expect(demo.output()).toMatch(/'sluice\.store': 'MemoryStore',\s+'sluice\.tier': 'free',\s+'sluice\.prefix': 'demo-api',\s+'sluice\.operation': 'consume',\s+'sluice\.cost': 1,\s+'sluice\.allowed': true,\s+'sluice\.policy': 'burst'/);
      expect(demo.output()).not.toContain("name: 'sluice.decisions'"); // metrics: at the interval or on stop
    } finally {
      expect(await demo.stop()).toBe(0);
    }
    const output = demo.output();
    // the last export, on the way out
    expect(output).toContain("name: 'sluice.decisions'");
    expect(output).toContain("unit: '{decision}'");
    expect(output).toMatch(/'sluice\.policy': 'burst',\s+'sluice\.allowed': true,\s+'sluice\.reason': 'ok',\s+'sluice\.tier': 'free'\s+},[^}]*value: 10\b/);
    expect(output).toMatch(/'sluice\.policy': 'burst',\s+'sluice\.allowed': false,\s+'sluice\.reason': 'limit',\s+'sluice\.tier': 'free'\s+},[^}]*value: 1\b/);
    expect(output).toContain("name: 'sluice.store.duration'");
    expect(output).toMatch(/count: 11\b/);
  });

  it("without SLUICE_OTEL nothing is exported", async () => {
    const demo = await startDemo({ SLUICE_OTEL: "" });
    await fetch(`${demo.base}/api/quote`, { headers: { "x-api-key": "pro-demo-key" } });
    expect(await demo.stop()).toBe(0);
    expect(demo.output()).not.toContain("OpenTelemetry");
    expect(demo.output()).not.toContain("sluice.store consume");
    expect(demo.output()).not.toContain("sluice.decisions");
  });

  it("an unknown SLUICE_OTEL value stops the demo with a message", () => {
    const run = spawnSync(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", "src/main.ts"], {
      cwd: demoDir,
      env: { ...process.env, PORT: "0", SLUICE_OTEL: "otlp" },
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('SLUICE_OTEL must be "console" (or unset for no telemetry); got "otlp"');
  });
});
