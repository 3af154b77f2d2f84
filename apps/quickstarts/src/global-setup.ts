/**
 * A Vitest `globalSetup`: the public packages packed as `pnpm pack:all --no-build` packs them
 * (`@sluice/testing/tarballs`: packed once for these very builds, shared with the package checks),
 * their directory handed to the test files as `inject("sluiceTarballs")`.
 *
 * @module
 */
import { packedTarballs } from "@sluice/testing/tarballs";

declare module "vitest" {
  export interface ProvidedContext {
    /** The directory of the packed `sluice-*.tgz` (what `SLUICE_TARBALLS` names in the quick starts). */
    sluiceTarballs: string;
  }
}

export default function setup(project: { provide(key: "sluiceTarballs", value: string): void }): void {
  project.provide("sluiceTarballs", packedTarballs().dir);
}
