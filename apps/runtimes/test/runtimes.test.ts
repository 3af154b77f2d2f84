/**
 * `pnpm test` runs the runtime smoke suite under Bun and Deno from here: one private redis-server
 * with the Upstash bridge for both, then `bun test` and `deno test` on the suite, each of which
 * must exit 0 having passed every case of src/suite.ts by name (none failed, skipped or missing).
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backends, RUNTIMES, ROOT_DIR, parseReport, pinnedVersion, runSuite, runtimeBinary, runtimeEnv, startBackends } from "../src/harness.js";
import { smokeCases } from "../src/suite.js";

const BUILT = ["core", "hono", "redis", "client"].map((pkg) => join(ROOT_DIR, "packages", pkg, "dist", "index.js"));

let backends: Backends;

beforeAll(async () => {
  backends = await startBackends();
});

afterAll(async () => {
  await backends?.close();
});

describe.each(RUNTIMES)("%s", (runtime) => {
  it(`is installed from the root devDependencies at the pinned version`, () => {
    const bin = runtimeBinary(runtime); // throws how to get it when missing
    const printed = execFileSync(bin, ["--version"], { encoding: "utf8", env: runtimeEnv({}) });
    expect(printed).toContain(pinnedVersion(runtime));
  });

  it("passes every case of the smoke suite against the built packages", async () => {
    for (const file of BUILT) {
      expect(existsSync(file), `${file} is missing: run \`pnpm run build\` first (\`pnpm test\` does)`).toBe(true);
    }
    const names = smokeCases({ name: runtime, serve: () => Promise.reject(new Error("not served")), env: () => undefined }).map((c) => c.name);
    expect(new Set(names).size, "case names are unique").toBe(names.length);

    const result = await runSuite(runtime, { env: backends.env });
    const context = `${result.command}\nexit ${result.code}${result.signal === null ? "" : ` (${result.signal})`}${result.timedOut ? ", timed out" : ""}\n${result.output}`;
    const report = parseReport(runtime, result.output);
    console.log(
      `[runtimes] ${runtime} ${pinnedVersion(runtime)}: ${report.passed} passed, ${report.failed} failed, ` +
        `${report.skipped} skipped in ${(result.durationMs / 1000).toFixed(2)} s`,
    );

    expect(result.code, context).toBe(0);
    expect({ passed: report.passed, failed: report.failed, skipped: report.skipped }, context).toEqual({
      passed: names.length,
      failed: 0,
      skipped: 0,
    });
    expect(Object.fromEntries(report.tests), context).toEqual(Object.fromEntries(names.map((name) => [name, "pass"])));
  });
});
