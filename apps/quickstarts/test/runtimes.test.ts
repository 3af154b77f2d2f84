/**
 * The Bun and Deno quick starts, each from the packed tarballs in a new project outside the
 * repository: Bun installs with `bun add`; Deno runs from the node_modules pnpm installs (Deno reads
 * package.json; `deno add npm:@sluice/…` cannot work while the packages are not on the registry).
 * The binaries are the ones the root package.json pins.
 */
import { describe, expect, it } from "vitest";
import { runHonoQuickStart } from "../src/expectations.js";
import { useWorkspace } from "../src/harness.js";

const workspace = useWorkspace();

describe("bun: Hono on Bun.serve", () => {
  it("bun add from the tarballs, bun run server.ts prints its URL and answers ten times before the 429", async () => {
    let url = "";
    const output = await runHonoQuickStart(workspace(), "bun", (port) => (url = `Listening on http://localhost:${port}/api/hello`));
    expect(output.trim()).toBe(url);
  });
});

describe("deno: Hono on Deno.serve", () => {
  it("pnpm installs from the tarballs, deno run main.ts answers ten times before the 429", async () => {
    // a Deno cache of its own: nothing is fetched, the packages come from node_modules
    const env = { DENO_DIR: `${workspace().dir}/deno-dir`, DENO_NO_UPDATE_CHECK: "1" };
    const output = await runHonoQuickStart(workspace(), "deno", (port) => `Listening on http://0.0.0.0:${port}/`, env);
    expect(output.trim()).toMatch(/^Listening on http:\/\/0\.0\.0\.0:(\d+)\/ \(http:\/\/localhost:\1\/\)$/);
  });
});
