import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { base64, sha256 } from "./sha256.js";

describe("sha256 and base64 (pure JavaScript, for the pk parameter)", () => {
  it("matches node:crypto on the FIPS examples and on the block-boundary lengths", () => {
    for (const text of ["", "abc", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"]) {
      expect(Buffer.from(sha256(new TextEncoder().encode(text))).toString("hex")).toBe(createHash("sha256").update(text).digest("hex"));
    }
    for (let n = 50; n <= 130; n++) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 31 + n) & 255);
      expect(Buffer.from(sha256(bytes)).toString("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));
    }
  });

  it("matches node:crypto and Buffer's base64 on random inputs", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(Buffer.from(sha256(bytes)).toString("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));
        expect(base64(bytes)).toBe(Buffer.from(bytes).toString("base64"));
      }),
      { numRuns: 300 },
    );
  });
});
