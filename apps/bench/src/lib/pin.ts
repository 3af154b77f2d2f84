/**
 * Pinning processes to cores with `taskset` (util-linux), so that on a 2-core machine a server and
 * the client that loads it each keep a core of their own and never preempt each other. Used by the
 * in-Redis section (redis-server on core 0, the clients on core 1) and, with `pin: true`, the HTTP
 * section (the app servers on core 0, autocannon on core 1).
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";

/** Whether `taskset` can be run. */
export function hasTaskset(): boolean {
  const r = spawnSync("taskset", ["--version"], { stdio: "ignore" });
  return r.error === undefined && r.status === 0;
}

/** Pins every thread of `pid` to `cores` (`"0"`, `"1"`, `"0,1"`); undefined on success, else why not. */
export function pin(pid: number, cores: number | string): string | undefined {
  const r = spawnSync("taskset", ["-a", "-cp", String(cores), String(pid)], { encoding: "utf8" });
  if (r.error !== undefined) return r.error.message;
  return r.status === 0 ? undefined : (r.stderr || `exit ${r.status}`).trim();
}

/** Why processes cannot be pinned here (fewer than two cores, no `taskset`), or undefined when they can. */
export function cannotPin(): string | undefined {
  if (cpus().length < 2) return `this machine has ${cpus().length} core`;
  if (!hasTaskset()) return "taskset is not installed (util-linux)";
  return undefined;
}

/** Every core of the machine, as `taskset` writes a list (`"0-1"`): what a pinned process is given back. */
export function allCores(): string {
  return `0-${cpus().length - 1}`;
}
