/**
 * Child entry point of {@link runInChild}: `run-child.ts <module url> <export> <JSON args>`.
 * Prints the result as one JSON line and exits (some contenders hold unref'd timers).
 *
 * @module
 */
export {};

const [moduleUrl, name, argsJson] = process.argv.slice(2);
if (moduleUrl === undefined || name === undefined || argsJson === undefined) {
  console.error("usage: run-child.ts <module url> <export> <JSON args>");
  process.exit(2);
}
const mod = (await import(moduleUrl)) as Record<string, unknown>;
const fn = mod[name];
if (typeof fn !== "function") {
  console.error(`${moduleUrl} has no exported function ${JSON.stringify(name)}`);
  process.exit(2);
}
const result: unknown = await (fn as (...args: unknown[]) => Promise<unknown>)(...(JSON.parse(argsJson) as unknown[]));
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
