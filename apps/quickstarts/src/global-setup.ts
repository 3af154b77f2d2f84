/**
 * A Vitest `globalSetup`: packs the public packages once per run (`scripts/pack-all.mjs
 * --no-build`) into a temporary directory, handed to the test files as `inject("sluiceTarballs")`.
 *
 * @module
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packTarballs } from "./tarballs.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The directory of the packed `sluice-*.tgz` (what `SLUICE_TARBALLS` names in the quick starts). */
    sluiceTarballs: string;
  }
}

export default function setup(project: { provide(key: "sluiceTarballs", value: string): void }): () => void {
  const dir = mkdtempSync(join(tmpdir(), "sluice-tarballs-"));
  project.provide("sluiceTarballs", packTarballs(dir));
  return () => rmSync(dir, { recursive: true, force: true });
}
