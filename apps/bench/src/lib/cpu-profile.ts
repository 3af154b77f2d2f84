/**
 * Reading a V8 CPU profile (the `.cpuprofile` of `node --cpu-prof`, or what the inspector's
 * `Profiler.stop` answers): self time per function, for the profiling scripts.
 *
 * @module
 */

/** The parts of a V8 CPU profile read here. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * Self time per function (µs), summed over a profile's samples; idle time left out. A function is
 * named with the last two parts of its script's URL and its line (1-based); native code has no URL.
 */
export function selfTimes(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i] as number);
    if (node === undefined || node.callFrame.functionName === "(idle)") continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url === "" ? "" : ` ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
    const name = `${functionName || "(anonymous)"}${where}`;
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  return self;
}

/** The top `count` functions by self time, as lines of µs per operation, share of all busy time, and name. */
export function topLines(self: ReadonlyMap<string, number>, operations: number, count: number): string[] {
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([fn, us]) => `${(us / operations).toFixed(2).padStart(8)}  ${((us / total) * 100).toFixed(1).padStart(5)}%  ${fn}`);
}
