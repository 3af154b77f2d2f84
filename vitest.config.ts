/**
 * The root Vitest config. The projects are those of `vitest.workspace.ts`; this file decides how a
 * run spends the machine: the order in which it starts its test files, and a lane of its own for
 * the unit tests.
 *
 * `pnpm test` runs a few files for minutes (the type-check, the READMEs' code, the docs site, the
 * Next.js builds and quick starts) and a hundred for seconds. On two cores the run ends when its
 * last long file does, so the long ones start first, longest first, and the short ones fill the
 * gaps: Vitest's own order (failed files first, then the last run's durations, and file sizes
 * where there are none, as on a fresh clone) can leave a two-minute file for the end. The
 * durations below are seconds measured in a whole `pnpm test`; a file not listed weighs its last
 * run's duration from Vitest's cache (or nothing), and files of the same weight go larger first.
 */
import { statSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** Seconds each long file took in a whole run (`<project>:<path from the root>`), a few seconds or more. */
export const LONG_FILES: Readonly<Record<string, number>> = {
  "quickstarts:apps/quickstarts/test/next.test.ts": 90,
  "docs:apps/docs/test/site.test.ts": 87,
  "repo-checks:apps/repo-checks/test/readme-snippets.test.ts": 71,
  "next15-app:apps/next15/test/next15.test.ts": 59,
  "next-app:apps/next/test/next.test.ts": 51,
  "quickstarts:apps/quickstarts/test/node.test.ts": 45,
  "cloudflare:packages/cloudflare/test/conformance.test.ts": 38,
  "repo-checks:apps/repo-checks/test/typecheck.test.ts": 35,
  "redis:packages/redis/src/conformance.test.ts": 32,
  "redis:packages/redis/src/state-loss.test.ts": 30,
  "repo-checks:apps/repo-checks/test/check-packages.test.ts": 25,
  "redis:packages/redis/src/outage.test.ts": 21,
  "redis:packages/redis/src/admission.test.ts": 20,
  "bench:apps/bench/src/http.test.ts": 17,
  "cloudflare:packages/cloudflare/test/conformance-sharded.test.ts": 15,
  "redis:packages/redis/src/client-clock-conformance.test.ts": 15,
  "bench:apps/bench/src/app-cost.test.ts": 13,
  "quickstarts:apps/quickstarts/test/workers.test.ts": 13,
  "core:packages/core/src/memory-store.test.ts": 13,
  "cloudflare:packages/cloudflare/test/durable-object.test.ts": 12,
  "playground:apps/playground/test/browser.test.ts": 11,
  "cloudflare:packages/cloudflare/test/protection.test.ts": 10,
  "redis:packages/redis/src/cold-start.test.ts": 10,
  "cloudflare:packages/cloudflare/test/overrides.test.ts": 9,
  "worker-app:apps/worker/test/wrangler-dev.test.ts": 9,
  "redis:packages/redis/src/overrides.test.ts": 9,
  "redis:packages/redis/src/client-majors.test.ts": 9,
  "quickstarts:apps/quickstarts/test/upstash-local.test.ts": 9,
};

/** Longest first: the table above, else the last run's duration; then the larger file. */
export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const weigh = (spec: TestSpecification) => {
      const path = spec.moduleId.startsWith(`${root}/`) ? spec.moduleId.slice(root.length + 1) : spec.moduleId;
      const key = `${spec.project.name}:${path}`;
      const listed = LONG_FILES[key];
      const seconds = listed ?? (this.ctx.cache.getFileTestResults(key)?.duration ?? 0) / 1000;
      let size = 0;
      try {
        size = statSync(spec.moduleId).size;
      } catch {
        // gone: weighs nothing
      }
      return { spec, seconds, size };
    };
    return files
      .map(weigh)
      .sort((a, b) => b.seconds - a.seconds || b.size - a.size)
      .map((w) => w.spec);
  }
}

/**
 * The unit-test lane. The projects whose files are many and short and start no service of their own
 * (core, hono, next, client, otel: `pool: "threads"` in their configs) run in one worker thread,
 * beside the forks that run everything else (`--maxWorkers`), and their files share the modules
 * they import, project by project: a fresh process per file costed them more than their tests
 * (about 90 s of CPU for five projects, 54 s in this lane). Each file still gets its own test
 * state (hooks, mocks, fake timers are per file); what it must not do is rely on a module being
 * evaluated afresh for it.
 */
const UNIT_LANE = { isolate: false, maxThreads: 1, minThreads: 1 };

export default defineConfig({
  test: {
    sequence: { sequencer: LongestFirstSequencer },
    poolOptions: { threads: UNIT_LANE },
  },
});
