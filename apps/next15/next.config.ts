import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { NextConfig } from "next";

/** The monorepo root: the workspace packages (@sluice/*) are linked from there. */
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

const nextConfig: NextConfig = {
  // @sluice/* resolve to their built dist (exports "import"): run `pnpm run build` at the root first
  outputFileTracingRoot: root,
  poweredByHeader: false,
};

export default nextConfig;
