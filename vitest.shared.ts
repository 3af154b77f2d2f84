/**
 * Shared Vitest settings: workspace packages resolve to their TypeScript sources through the
 * `@sluice/source` export condition, so tests run without a build.
 */
export const sourceConditions = {
  resolve: { conditions: ["@sluice/source", "module", "browser", "development|production"] },
  ssr: { resolve: { conditions: ["@sluice/source", "module", "node", "development|production"] } },
};
