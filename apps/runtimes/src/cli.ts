/**
 * `pnpm --filter @sluice/runtimes smoke [bun|deno ...]`: starts a private redis-server and the
 * Upstash bridge, runs the smoke suite under each runtime named (both by default) with the
 * runner's own output, and exits non-zero if any run failed.
 */
import { RUNTIMES, type RuntimeName, parseReport, runSuite, startBackends } from "./harness.js";

const requested = process.argv.slice(2);
for (const name of requested) {
  if (!(RUNTIMES as readonly string[]).includes(name)) {
    console.error(`unknown runtime ${JSON.stringify(name)}: expected ${RUNTIMES.join(" or ")}`);
    process.exit(2);
  }
}
const runtimes = (requested.length > 0 ? requested : RUNTIMES) as RuntimeName[];

const backends = await startBackends();
let failed = false;
try {
  for (const runtime of runtimes) {
    console.log(`\n=== ${runtime} ===`);
    const result = await runSuite(runtime, { env: backends.env, echo: process.stdout });
    const report = parseReport(runtime, result.output);
    const ok = result.code === 0 && report.failed === 0 && report.skipped === 0 && report.passed > 0;
    console.log(`=== ${runtime}: exit ${result.code}, ${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped, ${(result.durationMs / 1000).toFixed(1)} s`);
    if (!ok) failed = true;
  }
} finally {
  await backends.close();
}
process.exit(failed ? 1 : 0);
