/**
 * The Bun and Deno quick starts, each from the packed tarballs in a new project outside the
 * repository: Bun installs with `bun add`; Deno runs from the node_modules pnpm installs (Deno reads
 * package.json; `deno add npm:@sluice/…` cannot work while the packages are not on the registry).
 * The binaries are the ones the root package.json pins.
 */
import { freePort } from "@sluice/testing/redis-server";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { expectHonoQuickStart } from "../src/expectations.js";
import { type Workspace, createProject, createWorkspace, startServer } from "../src/harness.js";

let workspace: Workspace;
beforeAll(() => {
  workspace = createWorkspace(inject("sluiceTarballs"));
});
afterAll(() => workspace?.remove());

describe("bun: Hono on Bun.serve", () => {
  it("bun add from the tarballs, bun run server.ts prints its URL and answers ten times before the 429", async () => {
    const project = await createProject(workspace, "bun", ["bun"]);
    const port = await freePort();
    const server = await startServer(project, "bun", { ...workspace.env, PORT: String(port) }, {
      ready: (output) => (output.includes(`Listening on http://localhost:${port}/api/hello`) ? `http://127.0.0.1:${port}` : undefined),
    });
    try {
      await expectHonoQuickStart(server.base);
    } finally {
      const stopped = await server.stop();
      expect(stopped.output.trim()).toBe(`Listening on http://localhost:${port}/api/hello`);
    }
  });
});

describe("deno: Hono on Deno.serve", () => {
  it("pnpm installs from the tarballs, deno run main.ts answers ten times before the 429", async () => {
    const project = await createProject(workspace, "deno", ["deno"]);
    const port = await freePort();
    // a Deno cache of its own: nothing is fetched, the packages come from node_modules
    const env = { ...workspace.env, PORT: String(port), DENO_DIR: `${workspace.dir}/deno-dir`, DENO_NO_UPDATE_CHECK: "1" };
    const server = await startServer(project, "deno", env, {
      ready: (output) => (output.includes(`Listening on http://0.0.0.0:${port}/`) ? `http://127.0.0.1:${port}` : undefined),
    });
    try {
      await expectHonoQuickStart(server.base);
    } finally {
      const stopped = await server.stop();
      expect(stopped.output).toContain(`Listening on http://0.0.0.0:${port}/`);
    }
  });
});
