/**
 * `pnpm --filter @sluice/bench profile:do [keys] [decisions]`: where a Durable Object decision
 * spends its CPU in workerd. Runs the Durable Object benchmark's Worker (`worker/do-worker.ts`) in
 * Miniflare with the inspector on, and profiles the Worker's isolate — the caller and the objects
 * run in it, so the profile holds both ends of every RPC call — while it makes `decisions` (default
 * 20,000) decisions with 50 in flight over `keys` keys (default 1: one hot object), once through the
 * trivial counter object (the benchmark's ceiling) and once through Sluice's `DurableObjectStore`,
 * twice each, alternating. Prints, per contender, the isolate's busy time per decision and the
 * functions with the most self time in µs per decision; the `.cpuprofile` files stay in
 * `apps/bench/.build/profiles/` for Chrome DevTools or speedscope. The sampling profiler slows
 * every call down: read the figures as shares of one contender's time, and compare the contenders
 * only roughly.
 *
 * Node 20 needs `--experimental-websocket` (the package script passes it) for the inspector's
 * WebSocket.
 *
 * @module
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createServer } from "node:net";
import { fileURLToPath, pathToFileURL } from "node:url";
import { benchMiniflare, storageDir } from "./durable-object.js";
import { BUILD_DIR } from "./lib/bundle.js";
import { type CpuProfile, selfTimes, topLines } from "./lib/cpu-profile.js";

const CONTENDERS = { ceiling: "ceiling: counter object", sluice: "Sluice DurableObjectStore" } as const;

/** A free TCP port on 127.0.0.1 (for the inspector). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A minimal Chrome DevTools Protocol session over the inspector's WebSocket. */
async function inspect(url: string): Promise<{ send(method: string, params?: object): Promise<Record<string, unknown>>; close(): void }> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve, { once: true });
    ws.addEventListener("error", () => reject(new Error(`cannot reach the inspector at ${url}`)), { once: true });
  });
  let next = 0;
  const pending = new Map<number, (result: Record<string, unknown>) => void>();
  ws.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: Record<string, unknown> };
    if (message.id === undefined) return; // an event, not an answer
    pending.get(message.id)?.(message.result ?? {});
    pending.delete(message.id);
  });
  return {
    send(method, params = {}) {
      const id = ++next;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    close: () => ws.close(),
  };
}

/** The tool's arguments, `[keys] [decisions]` (defaults 1 and 20,000); throws, naming the argument, on anything but positive integers. */
export function profileArgs(argv: readonly string[]): { keys: number; decisions: number } {
  const [keysText = "1", decisionsText = "20000"] = argv.filter((a) => a !== "--");
  const keys = Number(keysText);
  const decisions = Number(decisionsText);
  if (!Number.isSafeInteger(keys) || keys < 1) throw new Error(`keys must be a positive integer; got ${JSON.stringify(keysText)}`);
  if (!Number.isSafeInteger(decisions) || decisions < 1) throw new Error(`decisions must be a positive integer; got ${JSON.stringify(decisionsText)}`);
  return { keys, decisions };
}

async function main(): Promise<void> {
  const { keys, decisions } = profileArgs(process.argv.slice(2));
  const dir = fileURLToPath(new URL("profiles/", BUILD_DIR));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const inspectorPort = await freePort();
  const persist = await storageDir();
  const mf = await benchMiniflare(persist, inspectorPort);
  try {
    const base = (await mf.ready).toString();
    const run = async (contender: string, ops: number): Promise<number> => {
      const started = performance.now();
      const response = await mf.dispatchFetch(`${base}run?contender=${contender}&ops=${ops}&inFlight=50&keys=${keys}&shards=0`);
      const body = (await response.json()) as { allowed?: number; error?: string };
      if (body.allowed !== ops) throw new Error(`${contender}: ${body.error ?? `${body.allowed} of ${ops} allowed`}`);
      return performance.now() - started;
    };
    const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { title: string; webSocketDebuggerUrl: string }[];
    const target = targets.find((t) => t.title.endsWith(":sluice-bench"));
    if (target === undefined) throw new Error(`no inspector target for the Worker; have ${targets.map((t) => t.title).join(", ")}`);
    const session = await inspect(target.webSocketDebuggerUrl);
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    const totals = new Map<string, { self: Map<string, number>; wallMs: number; ops: number }>();
    for (const contender of Object.keys(CONTENDERS)) await run(contender, decisions / 2); // warm-up
    for (const pass of [1, 2]) {
      for (const contender of Object.keys(CONTENDERS)) {
        await session.send("Profiler.start");
        const wallMs = await run(contender, decisions);
        const { profile } = (await session.send("Profiler.stop")) as { profile: CpuProfile };
        writeFileSync(`${dir}${contender}-${pass}.cpuprofile`, JSON.stringify(profile));
        const total = totals.get(contender) ?? { self: new Map(), wallMs: 0, ops: 0 };
        for (const [fn, us] of selfTimes(profile)) total.self.set(fn, (total.self.get(fn) ?? 0) + us);
        total.wallMs += wallMs;
        total.ops += decisions;
        totals.set(contender, total);
      }
    }
    session.close();
    const where = keys === 1 ? "one hot object" : `${keys.toLocaleString("en-US")} keys, one object per key`;
    console.log(`${where}, 50 in flight, ${decisions.toLocaleString("en-US")} decisions per contender and pass, 2 passes; profiles in ${dir}`);
    for (const [contender, total] of totals) {
      const busyUs = [...total.self.values()].reduce((a, b) => a + b, 0);
      console.log(
        `\n${CONTENDERS[contender as keyof typeof CONTENDERS]}: ${((total.wallMs * 1000) / total.ops).toFixed(1)} µs per decision under the profiler, ` +
          `the isolate busy ${(busyUs / total.ops).toFixed(1)} µs of it; self time, µs per decision, top 15:`,
      );
      for (const line of topLines(total.self, total.ops, 15)) console.log(line);
    }
  } finally {
    await mf.dispose();
    await rm(persist, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
