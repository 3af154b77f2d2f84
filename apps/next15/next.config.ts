import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import type { NextConfig } from "next";

/** This app's directory. */
const appDir = dirname(fileURLToPath(import.meta.url));

const nextConfig: NextConfig = {
  // @sluice/* resolve to their built dist (exports "import"): run `pnpm run build` at the root first.
  // Output file tracing (the files a deployment bundle copies) is kept to this directory: the app
  // is only built and started in place by its tests, and Next.js 15 spends ~10 s of a build tracing
  // the monorepo's node_modules otherwise. A deployment from a monorepo sets it to the root instead.
  outputFileTracingRoot: appDir,
  poweredByHeader: false,
};

export default nextConfig;
