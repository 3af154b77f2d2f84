/**
 * One Node.js requirement everywhere: every package.json of the repository (the root's,
 * packages/*'s and apps/*'s) says `"engines": { "node": ">=20.9.0" }` — Next.js 16 needs 20.9, and
 * wrangler 4.86.0 20.3 — the README says the same, and the Node.js running the tests satisfies it.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const rootDir = fileURLToPath(new URL("../../..", import.meta.url));
const NODE_RANGE = ">=20.9.0";

function manifests(): string[] {
  const found = ["package.json"];
  for (const group of ["packages", "apps"]) {
    for (const entry of readdirSync(join(rootDir, group), { withFileTypes: true })) {
      const path = join(group, entry.name, "package.json");
      if (entry.isDirectory() && readdirSync(join(rootDir, group, entry.name)).includes("package.json")) found.push(path);
    }
  }
  return found.sort();
}

describe(`engines.node is ${NODE_RANGE}`, () => {
  it("in every package.json", () => {
    const all = manifests();
    expect(all.length).toBeGreaterThan(10);
    const ranges = Object.fromEntries(
      all.map((path) => [path, (JSON.parse(readFileSync(join(rootDir, path), "utf8")) as { engines?: { node?: string } }).engines?.node]),
    );
    expect(ranges).toEqual(Object.fromEntries(all.map((path) => [path, NODE_RANGE])));
  });

  it("in the README", () => {
    const readme = readFileSync(join(rootDir, "README.md"), "utf8");
    expect(readme).toContain(`Node.js 20.9 or later (\`engines.node\`: \`${NODE_RANGE}\` in every package)`);
  });

  it(`and this Node.js (${process.version}) satisfies it`, () => {
    const [, ...minimum] = /^>=(\d+)\.(\d+)\.(\d+)$/.exec(NODE_RANGE) ?? [];
    const [, ...running] = /^v(\d+)\.(\d+)\.(\d+)/.exec(process.version) ?? [];
    expect(minimum).toHaveLength(3);
    expect(running).toHaveLength(3);
    // the first part that differs decides: major, then minor, then patch
    const order = running.map((part, i) => Number(part) - Number(minimum[i])).find((d) => d !== 0) ?? 0;
    expect(order, `Node.js ${process.version} is older than ${NODE_RANGE}`).toBeGreaterThanOrEqual(0);
  });
});
