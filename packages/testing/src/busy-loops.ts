/**
 * Busy-loop processes that keep CPU cores busy, to run a test (or a measurement) on a loaded
 * machine on purpose: each is a Node process spinning in `for (;;) {}` at normal priority, killed
 * by {@link BusyLoops.stop} (or when the calling process exits).
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";

/** Running busy loops. */
export interface BusyLoops {
  /** The process ids. */
  readonly pids: readonly number[];
  /** Kills every loop (SIGKILL) and waits until each has exited. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/**
 * Starts `count` busy-loop processes and resolves once each is running (it has written its first
 * byte, so it is past Node's start-up and spinning).
 *
 * @example
 * ```ts
 * const loops = await startBusyLoops(2);
 * try {
 *   await coldBurst();
 * } finally {
 *   await loops.stop();
 * }
 * ```
 */
export async function startBusyLoops(count = 2): Promise<BusyLoops> {
  if (!Number.isInteger(count) || count < 0 || count > 64) {
    throw new Error(`[sluice] [testing] count must be an integer in 0..64, got ${String(count)}`);
  }
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const child of live) child.kill("SIGKILL");
    });
  }
  const children = Array.from({ length: count }, () => {
    const child = spawn(process.execPath, ["-e", 'process.stdout.write("."); for (;;) {}'], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    live.add(child);
    return child;
  });
  const exited = children.map(
    (child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else child.once("exit", () => resolve());
      }),
  );
  const stopAll = async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
    await Promise.all(exited);
    for (const child of children) live.delete(child);
  };
  try {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve, reject) => {
            child.once("error", reject);
            child.once("exit", (code, signal) => reject(new Error(`[sluice] [testing] a busy loop exited at start (${code ?? signal})`)));
            child.stdout?.once("data", () => resolve());
          }),
      ),
    );
  } catch (error) {
    await stopAll();
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    pids: children.map((child) => child.pid as number),
    stop: () => (stopped ??= stopAll()),
  };
}
