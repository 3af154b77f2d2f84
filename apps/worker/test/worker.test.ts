/**
 * The Worker app in workerd (Miniflare, `cf: false`), configured from its wrangler.toml and
 * bundled from its sources like wrangler would. Two Worker instances — the app, and a second
 * deployment of the same code whose `SLUICE` binding names the first one's class (`script_name`)
 * — share one Durable Object namespace, as every instance of a deployed Worker does; requests go to
 * each over real HTTP (its own socket).
 */
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleWorker, storageDir } from "@sluice/testing/miniflare";
import { Miniflare } from "miniflare";
import { parse } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

interface WranglerConfig {
  name: string;
  main: string;
  compatibility_date: string;
  durable_objects: { bindings: { name: string; class_name: string }[] };
  migrations: { tag: string; new_sqlite_classes?: string[]; new_classes?: string[] }[];
  vars?: Record<string, string>;
}

const appDir = fileURLToPath(new URL("..", import.meta.url));
const config = parse(readFileSync(join(appDir, "wrangler.toml"), "utf8")) as unknown as WranglerConfig;

let mf: Miniflare;
let dir: string;
let urlA: string;
let urlB: string;

beforeAll(async () => {
  const script = await bundleWorker(join(appDir, config.main));
  const sqliteClasses = new Set(config.migrations.flatMap((m) => m.new_sqlite_classes ?? []));
  const bindings = config.durable_objects.bindings;
  dir = await storageDir("sluice-worker-app-");
  const worker = { modules: true, script, compatibilityDate: config.compatibility_date, bindings: config.vars ?? {} };
  mf = new Miniflare({
    cf: false,
    durableObjectsPersist: dir,
    workers: [
      {
        ...worker,
        name: config.name,
        durableObjects: Object.fromEntries(bindings.map((b) => [b.name, { className: b.class_name, useSQLite: sqliteClasses.has(b.class_name) }])),
        unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      },
      {
        ...worker,
        name: `${config.name}-b`,
        durableObjects: Object.fromEntries(
          bindings.map((b) => [b.name, { className: b.class_name, scriptName: config.name, useSQLite: sqliteClasses.has(b.class_name) }]),
        ),
        unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      },
    ],
  });
  await mf.ready;
  urlA = (await mf.unsafeGetDirectURL(config.name)).toString();
  urlB = (await mf.unsafeGetDirectURL(`${config.name}-b`)).toString();
});

afterAll(async () => {
  await mf?.dispose();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const POLICY = '"burst";q=3;w=30, "per-minute";q=5;w=60';

function get(base: string, path: string, ip: string): Promise<Response> {
  return fetch(new URL(path, base), { headers: { "cf-connecting-ip": ip } });
}

describe("wrangler.toml", () => {
  it("binds SLUICE to the SQLite-backed SluiceLimiter class that the main module exports", () => {
    expect(config.durable_objects.bindings).toEqual([{ name: "SLUICE", class_name: "SluiceLimiter" }]);
    expect(config.migrations).toEqual([{ tag: "v1", new_sqlite_classes: ["SluiceLimiter"] }]);
    expect(config.vars?.SLUICE_ALLOW_TEST_CLOCK).toBeUndefined();
  });
});

describe("the Worker app in workerd", () => {
  it("serves / without limiting it", async () => {
    for (let i = 0; i < 8; i++) {
      const response = await get(urlA, "/", "198.51.100.1");
      expect(response.status).toBe(200);
      expect(response.headers.get("ratelimit")).toBeNull();
      expect(await response.text()).toBe("Sluice on Cloudflare Workers: try /api/hello");
    }
  });

  it("holds one limit across requests and across two Worker instances sharing the namespace", async () => {
    const ip = "198.51.100.7";
    const seen: unknown[] = [];
    for (const [base, expected] of [
      [urlA, { burst: 2, perMinute: 4 }],
      [urlB, { burst: 1, perMinute: 3 }],
      [urlA, { burst: 0, perMinute: 2 }],
    ] as const) {
      const response = await get(base, "/api/hello", ip);
      expect(response.status).toBe(200);
      expect(response.headers.get("ratelimit-policy")).toBe(POLICY);
      // t is seconds until each policy is full again, by the object's clock
      expect(response.headers.get("ratelimit")).toMatch(
        new RegExp(`^"burst";r=${expected.burst};t=\\d+, "per-minute";r=${expected.perMinute};t=(59|60)$`),
      );
      expect(response.headers.get("x-ratelimit-limit")).toBe("3");
      expect(response.headers.get("x-ratelimit-remaining")).toBe(String(expected.burst));
      seen.push(await response.json());
    }
    expect(seen).toEqual([
      { hello: "world", remaining: 2, policy: "burst" },
      { hello: "world", remaining: 1, policy: "burst" },
      { hello: "world", remaining: 0, policy: "burst" },
    ]);

    for (const base of [urlB, urlA]) {
      const denied = await get(base, "/api/hello", ip);
      expect(denied.status).toBe(429);
      expect(denied.headers.get("content-type")).toBe("application/problem+json");
      const retryAfter = Number(denied.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(10);
      expect(await denied.json()).toEqual({
        type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
        title: "Request cannot be satisfied as assigned quota has been exceeded",
        status: 429,
        detail: `Quota of policy "burst" exceeded; retry after ${retryAfter} seconds.`,
        retryAfter,
        "violated-policies": ["burst"],
      });
    }
    // another client has its own limit, on either instance
    const other = await get(urlB, "/api/hello", "198.51.100.8");
    expect(await other.json()).toEqual({ hello: "world", remaining: 2, policy: "burst" });
  });

  it("admits exactly the burst when 20 requests from one client hit both instances at once", async () => {
    const ip = "2001:db8:7:7::1";
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 === 0 ? urlA : urlB, "/api/hello", ip)));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(17);
    // the IPv6 client is keyed by its /64: a neighbour address shares the limit
    expect((await get(urlA, "/api/hello", "2001:db8:7:7::2")).status).toBe(429);
  });
});
