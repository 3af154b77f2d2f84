/**
 * The real demo process, as `pnpm start` runs it (`node --conditions=@sluice/source --import tsx
 * src/main.ts`), on a port the OS picks (`PORT=0`): the demo prints the URL it listens on. Resolves
 * once the whole banner is printed.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const demoDir = fileURLToPath(new URL("..", import.meta.url));

export interface DemoProcess {
  /** `http://127.0.0.1:<port>`, as the banner prints it. */
  base: string;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Starts the demo; `env` adds to the environment (e.g. `{ SLUICE_OTEL: "console" }`). */
export function startDemo(env: Record<string, string> = {}): Promise<DemoProcess> {
  const child = spawn(process.execPath, ["--conditions=@sluice/source", "--import", "tsx", "src/main.ts"], {
    cwd: demoDir,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    return exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`the demo did not start within 15 s; output:\n${output}`));
    }, 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      // the whole banner, down to its last line
      if (match && output.includes("Press Ctrl+C to stop.")) {
        clearTimeout(timer);
        resolve({ base: match[1] as string, output: () => output, stop });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the demo exited early (code ${code}, signal ${signal}); output:\n${output}`));
    });
  });
}
