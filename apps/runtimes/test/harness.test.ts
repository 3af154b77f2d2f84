/** The harness's own checks: a missing binary says how to get it; both runners' reports are read right. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseReport, runtimeBinary } from "../src/harness.js";

describe("runtimeBinary", () => {
  it.each(["bun", "deno"] as const)("fails with how to get %s when it is not installed", (runtime) => {
    const empty = mkdtempSync(join(tmpdir(), "sluice-no-runtimes-"));
    try {
      expect(() => runtimeBinary(runtime, empty)).toThrowError(
        new RegExp(`${runtime} not found at .*Run \`pnpm install\` at the repository root.*onlyBuiltDependencies.*pnpm rebuild ${runtime}`),
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

// Outputs as bun 1.4.4 and deno 2.9.6 print them (NO_COLOR), trimmed.
const BUN_MIXED = `bun test v1.4.4 (38afee6c8)

a.test.ts:
(pass) one [0.03ms]
(skip) two
(todo) three
error: x
(fail) four [0.46ms]

 1 pass
 1 skip
 1 todo
 1 fail
Ran 4 tests across 1 file. [5.00ms]
`;

const DENO_MIXED = `running 4 tests from ./b_test.ts
one ... ok (1ms)
two ... ignored (0ms)
four ... FAILED (1ms)
five ...
  s ... ok (0ms)
five ... ok (869µs)

 ERRORS

four => ./b_test.ts:3:6
error: Error: x

 FAILURES

four => ./b_test.ts:3:6

FAILED | 2 passed (1 step) | 1 failed | 1 ignored (14ms)

error: Test failed
`;

describe("parseReport", () => {
  it("reads bun test's totals and each test's outcome", () => {
    const report = parseReport("bun", BUN_MIXED);
    expect([report.passed, report.failed, report.skipped]).toEqual([1, 1, 2]);
    expect(Object.fromEntries(report.tests)).toEqual({ one: "pass", two: "skip", three: "skip", four: "fail" });
  });

  it("reads deno test's totals and each test's outcome", () => {
    const report = parseReport("deno", DENO_MIXED);
    expect([report.passed, report.failed, report.skipped]).toEqual([2, 1, 1]);
    expect(Object.fromEntries(report.tests)).toEqual({ one: "pass", two: "skip", four: "fail", five: "pass" });
  });

  it("reads a clean run with colours", () => {
    const bun = parseReport("bun", "\u001b[32m(pass)\u001b[0m a b [0.1ms]\n\u001b[32m 1 pass\u001b[0m\n\u001b[2m 0 fail\u001b[0m\n");
    expect([bun.passed, bun.failed, bun.skipped, bun.tests.get("a b")]).toEqual([1, 0, 0, "pass"]);
    const deno = parseReport("deno", "a b ... \u001b[32mok\u001b[0m (1ms)\n\n\u001b[32mok\u001b[0m | 1 passed | 0 failed (5ms)\n");
    expect([deno.passed, deno.failed, deno.skipped, deno.tests.get("a b")]).toEqual([1, 0, 0, "pass"]);
  });

  it("throws when a runner printed no totals (it crashed before reporting)", () => {
    expect(() => parseReport("bun", "error: Cannot find module '@sluice/core'\n")).toThrowError(/bun printed no test totals/);
    expect(() => parseReport("deno", "error: Module not found\n")).toThrowError(/deno printed no test totals/);
  });
});
