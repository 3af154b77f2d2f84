import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SCRIPTS } from "./scripts.js";

describe("SCRIPTS", () => {
  for (const [name, { script, sha }] of Object.entries(SCRIPTS)) {
    it(`${name}: the stored sha is the SHA-1 of the script`, () => {
      expect(sha).toBe(createHash("sha1").update(script).digest("hex"));
    });

    it(`${name}: runs on stock Redis (no shebang flags) and creates no globals`, () => {
      expect(script.startsWith("#!")).toBe(false);
      expect(script).not.toMatch(/^#!lua/m);
      // every assignment at column 0 must be a local declaration (Redis forbids globals)
      const globals = script.split("\n").filter((line) => /^[A-Za-z_][\w.]*\s*=/.test(line));
      expect(globals).toEqual([]);
    });
  }
});
