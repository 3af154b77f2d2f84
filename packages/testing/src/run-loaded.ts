/**
 * Runs Vitest projects on a loaded machine on purpose: two busy-loop processes (one per core of a
 * 2-core machine) beside `vitest run --project <name>…`, repeated `--times N` in a row, stopping at
 * the first failing run. A test that passes only when the machine is idle (a race against the
 * wall clock, a production timeout in a test) fails here.
 *
 * Usage (from the repository root):
 *
 * ```sh
 * pnpm test:loaded cloudflare next-app redis demo          # once
 * pnpm test:loaded --times 3 --loops 2 redis               # three runs in a row
 * ```
 *
 * Prints one line per run (exit code and wall time) and exits with the first failing run's code.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { startBusyLoops } from "./busy-loops.js";

interface Args {
  projects: string[];
  times: number;
  loops: number;
}

function parse(argv: readonly string[]): Args {
  const args: Args = { projects: [], times: 1, loops: 2 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--times" || arg === "--loops") {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value < (arg === "--times" ? 1 : 0)) throw new Error(`${arg} needs a whole number; got ${argv[i]}`);
      if (arg === "--times") args.times = value;
      else args.loops = value;
    } else if (arg === "--") {
      continue;
    } else {
      args.projects.push(arg);
    }
  }
  if (args.projects.length === 0) {
    throw new Error("name at least one Vitest project, e.g. `pnpm test:loaded redis demo` (see vitest.workspace.ts for the names)");
  }
  return args;
}

function vitest(projects: readonly string[]): Promise<number> {
  const args = ["vitest", "run", ...projects.flatMap((name) => ["--project", name])];
  return new Promise((resolve, reject) => {
    const child = spawn("pnpm", args, { stdio: "inherit" });
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

async function main(): Promise<number> {
  const { projects, times, loops } = parse(process.argv.slice(2));
  const results: string[] = [];
  let failed = 0;
  for (let run = 1; run <= times && failed === 0; run++) {
    const busy = await startBusyLoops(loops);
    const started = performance.now();
    let code: number;
    try {
      code = await vitest(projects);
    } finally {
      await busy.stop();
    }
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    results.push(`run ${run}/${times}: ${code === 0 ? "passed" : `FAILED (exit ${code})`} in ${seconds} s`);
    if (code !== 0) failed = code;
  }
  console.log(`\n[sluice] vitest run --project ${projects.join(" --project ")} beside ${loops} busy loop(s):\n${results.join("\n")}`);
  return failed;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`[sluice] test:loaded: ${(error as Error).message ?? String(error)}`);
    process.exit(2);
  },
);
