/**
 * The smoke suite under Deno's own test runner (`deno test` with explicit permissions, npm
 * packages from the installed node_modules; the harness passes the flags and the Upstash bridge's
 * address: see ../README.md). Every case of ../src/suite.ts, plus serving through `Deno.serve`.
 */
import { type Served, smokeCases } from "../src/suite.ts";

async function serve(fetch: (request: Request) => Response | Promise<Response>): Promise<Served> {
  const { promise: listening, resolve } = Promise.withResolvers<number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: ({ port }) => resolve(port) }, (request) => fetch(request));
  const port = await listening;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => server.shutdown(),
  };
}

for (const c of smokeCases({ name: "deno", serve, env: (name) => Deno.env.get(name) })) {
  Deno.test(c.name, () => c.run());
}
