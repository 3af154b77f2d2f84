import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ClientIpOptions, SluiceConfigError, clientIp, normalizeIp } from "./index.js";
import { validateClientIpOptions } from "./client-ip.js";

function request(headers: Record<string, string> | [string, string][]): Request {
  return new Request("https://api.test/", { headers });
}

const ALL_HEADERS = {
  "cf-connecting-ip": "203.0.113.7",
  "x-vercel-forwarded-for": "203.0.113.8",
  "x-real-ip": "203.0.113.9",
  "x-forwarded-for": "198.51.100.1, 203.0.113.10",
};

describe("trust", () => {
  it("believes no header unless trust names the platform", () => {
    expect(clientIp(request(ALL_HEADERS))).toBeUndefined();
    expect(clientIp(request(ALL_HEADERS), {})).toBeUndefined();
    expect(clientIp(request(ALL_HEADERS), { ipv6Subnet: 48 })).toBeUndefined();
  });

  it('"cloudflare" reads CF-Connecting-IP only', () => {
    expect(clientIp(request(ALL_HEADERS), { trust: "cloudflare" })).toBe("203.0.113.7");
    expect(clientIp(request({ "CF-Connecting-IP": "2001:db8:1:2:3:4:5:6" }), { trust: "cloudflare" })).toBe("2001:db8:1:2::/64");
    const { "cf-connecting-ip": _, ...others } = ALL_HEADERS;
    expect(clientIp(request(others), { trust: "cloudflare" })).toBeUndefined();
  });

  it('"vercel" reads x-vercel-forwarded-for, else x-real-ip', () => {
    expect(clientIp(request(ALL_HEADERS), { trust: "vercel" })).toBe("203.0.113.8");
    expect(clientIp(request({ "x-real-ip": "203.0.113.9", "x-forwarded-for": "198.51.100.1" }), { trust: "vercel" })).toBe(
      "203.0.113.9",
    );
    expect(clientIp(request({ "x-vercel-forwarded-for": "203.0.113.8, 10.0.0.1" }), { trust: "vercel" })).toBe("203.0.113.8");
    expect(clientIp(request({ "cf-connecting-ip": "203.0.113.7", "x-forwarded-for": "198.51.100.1" }), { trust: "vercel" })).toBeUndefined();
    // a present but unusable x-vercel-forwarded-for is not replaced by x-real-ip
    expect(clientIp(request({ "x-vercel-forwarded-for": "unknown", "x-real-ip": "203.0.113.9" }), { trust: "vercel" })).toBeUndefined();
  });

  it("a number N takes the N-th address from the right of X-Forwarded-For", () => {
    const r = request({ "x-forwarded-for": "198.51.100.1, 203.0.113.7, 10.0.0.1", "cf-connecting-ip": "203.0.113.99" });
    expect(clientIp(r, { trust: 1 })).toBe("10.0.0.1");
    expect(clientIp(r, { trust: 2 })).toBe("203.0.113.7");
    expect(clientIp(r, { trust: 3 })).toBe("198.51.100.1");
    expect(clientIp(r, { trust: 4 })).toBeUndefined();
    expect(clientIp(r, { trust: 100 })).toBeUndefined();
    expect(clientIp(request({ "cf-connecting-ip": "203.0.113.99" }), { trust: 1 })).toBeUndefined();
  });

  it("tolerates spaces in the X-Forwarded-For list and joins repeated headers", () => {
    const r = request({ "x-forwarded-for": "   198.51.100.1 ,203.0.113.7,\t10.0.0.1  " });
    expect(clientIp(r, { trust: 1 })).toBe("10.0.0.1");
    expect(clientIp(r, { trust: 2 })).toBe("203.0.113.7");
    expect(clientIp(r, { trust: 3 })).toBe("198.51.100.1");
    const repeated = request([
      ["x-forwarded-for", "198.51.100.1"],
      ["x-forwarded-for", "203.0.113.7, 10.0.0.1"],
    ]);
    expect(clientIp(repeated, { trust: 3 })).toBe("198.51.100.1");
  });

  it("does not skip an unusable hop: the N-th entry is the answer or nothing", () => {
    const r = request({ "x-forwarded-for": "198.51.100.1, unknown, 10.0.0.1" });
    expect(clientIp(r, { trust: 2 })).toBeUndefined();
    expect(clientIp(request({ "x-forwarded-for": "198.51.100.1,,10.0.0.1" }), { trust: 2 })).toBeUndefined();
  });
});

describe("values that are not IP addresses", () => {
  it.each([
    "example.com",
    "unknown",
    "1.2.3.256",
    "01.2.3.4",
    "1.2.3.04",
    "1.2.3",
    "1.2.3.4.5",
    "1.2.3.",
    "-1.2.3.4",
    "0x1.2.3.4",
    "1.2.3.4:8080",
    "1.2.3.4/24",
    "fe80::1%eth0",
    "fe80::1%25eth0",
    "[fe80::1%eth0]",
    "[::1]:8080",
    "",
    "   ",
    "2001:db8::g",
    "2001:db8:::1",
    "1::2::3",
    ":::",
    "12345::",
    ":1:2:3:4:5:6:7",
    "1:2:3:4:5:6:7:",
    "1:2:3:4:5:6:7",
    "1:2:3:4:5:6:7:8:9",
    "1:2:3:4:5:6:7::8",
    "1:2:3:4:5:6:7:1.2.3.4",
    "1.2.3.4::",
    "1.2.3.4::1",
    "::1.2.3.4:1",
    "::ffff:1.2.3.256",
    "::ffff:1.2.3",
    "'; DROP TABLE users; --",
  ])("%j → undefined", (value) => {
    expect(normalizeIp(value)).toBeUndefined();
    expect(clientIp(request({ "cf-connecting-ip": value }), { trust: "cloudflare" })).toBeUndefined();
  });

  it("non-ASCII digits → undefined (normalizeIp only: a header cannot carry them)", () => {
    expect(normalizeIp("\u0661.\u0662.\u0663.\u0664")).toBeUndefined(); // Arabic-Indic digits
    expect(normalizeIp("\uff11.2.3.4")).toBeUndefined(); // fullwidth 1
    expect(normalizeIp("2001:db8::\uff11")).toBeUndefined();
  });
});

describe("IPv4", () => {
  it("is keyed as written, whatever ipv6Subnet says", () => {
    expect(normalizeIp("203.0.113.7")).toBe("203.0.113.7");
    expect(normalizeIp("0.0.0.0")).toBe("0.0.0.0");
    expect(normalizeIp("255.255.255.255", { ipv6Subnet: 128 })).toBe("255.255.255.255");
    expect(normalizeIp("  10.0.0.1\t")).toBe("10.0.0.1");
  });

  it("IPv4-mapped IPv6 is keyed by its IPv4 address, dotted or in hex", () => {
    for (const mapped of ["::ffff:1.2.3.4", "::ffff:102:304", "::FFFF:0102:0304", "0:0:0:0:0:ffff:1.2.3.4", "0000:0000:0000:0000:0000:FFFF:0102:0304", "[::ffff:1.2.3.4]"]) {
      expect(normalizeIp(mapped), mapped).toBe("1.2.3.4");
      expect(normalizeIp(mapped, { ipv6Subnet: 48 }), mapped).toBe("1.2.3.4");
    }
    expect(normalizeIp("::ffff:c0a8:101")).toBe("192.168.1.1");
    expect(clientIp(request({ "x-forwarded-for": "::ffff:203.0.113.7" }), { trust: 1 })).toBe("203.0.113.7");
  });
});

describe("IPv6", () => {
  it("is keyed by its /64 in canonical RFC 5952 form, however it is written", () => {
    for (const form of [
      "2001:db8:1:2:3:4:5:6",
      "2001:DB8:1:2:3:4:5:6",
      "2001:0db8:0001:0002:0003:0004:0005:0006",
      "2001:db8:1:2::5:6",
      "2001:db8:1:2:3:4:1.2.3.4",
      "2001:db8:1:2::1.2.3.4",
      "[2001:db8:1:2:3:4:5:6]",
      " 2001:db8:1:2:ffff:ffff:ffff:ffff ",
    ]) {
      expect(normalizeIp(form), form).toBe("2001:db8:1:2::/64");
    }
    expect(normalizeIp("2001:db8::1")).toBe("2001:db8::/64");
    expect(normalizeIp("::1")).toBe("::/64");
    expect(normalizeIp("::")).toBe("::/64");
    // the longest zero run is compressed, not the first
    expect(normalizeIp("2001:0:0:1:a:b:c:d")).toBe("2001:0:0:1::/64");
    // a single zero group is not compressed
    expect(normalizeIp("2001:db8:0:1:a:b:c:d")).toBe("2001:db8:0:1::/64");
    expect(clientIp(request({ "x-vercel-forwarded-for": "2001:DB8:0:0:1::" }), { trust: "vercel" })).toBe("2001:db8::/64");
  });

  it("honours ipv6Subnet 48, 128 and any length in between", () => {
    const address = "2001:db8:1:2ab:3:4:5:6";
    expect(normalizeIp(address, { ipv6Subnet: 48 })).toBe("2001:db8:1::/48");
    expect(normalizeIp(address, { ipv6Subnet: 56 })).toBe("2001:db8:1:200::/56");
    expect(normalizeIp(address, { ipv6Subnet: 60 })).toBe("2001:db8:1:2a0::/60");
    expect(normalizeIp(address, { ipv6Subnet: 64 })).toBe("2001:db8:1:2ab::/64");
    expect(normalizeIp(address, { ipv6Subnet: 128 })).toBe("2001:db8:1:2ab:3:4:5:6/128");
    expect(normalizeIp(address, { ipv6Subnet: 17 })).toBe("2001::/17");
    expect(normalizeIp(address, { ipv6Subnet: 1 })).toBe("::/1");
    // RFC 5952 at /128: the first of two equally long zero runs is compressed
    expect(normalizeIp("2001:db8:0:0:1:0:0:1", { ipv6Subnet: 128 })).toBe("2001:db8::1:0:0:1/128");
    expect(normalizeIp("2001:db8:0:1:1:1:1:1", { ipv6Subnet: 128 })).toBe("2001:db8:0:1:1:1:1:1/128");
    expect(clientIp(request({ "cf-connecting-ip": address }), { trust: "cloudflare", ipv6Subnet: 48 })).toBe("2001:db8:1::/48");
  });

  it("property: every spelling of an address maps to the canonical prefix", () => {
    const group = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
    const spelling = fc.record({
      groups: fc.array(group, { minLength: 8, maxLength: 8 }),
      pad: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 8, maxLength: 8 }),
      upper: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
      compress: fc.nat(), // which zero run (and how much of it) becomes "::", if any
      dotted: fc.boolean(), // the last 32 bits as dotted IPv4
      subnet: fc.integer({ min: 1, max: 128 }),
    });
    fc.assert(
      fc.property(spelling, ({ groups, pad, upper, compress, dotted, subnet }) => {
        // IPv4-mapped addresses have their own key (tested above)
        fc.pre(!(groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff));
        const parts = groups.map((g, i) => {
          const hex = g.toString(16).padStart(Math.min(4, g.toString(16).length + (pad[i] as number)), "0");
          return upper[i] ? hex.toUpperCase() : hex;
        });
        // every run [start, end) of zero groups is a candidate for "::"; choice 0 compresses nothing
        const runs: [number, number][] = [];
        for (let s = 0; s < 8; s++) for (let e = s + 1; e <= 8 && groups[e - 1] === 0; e++) runs.push([s, e]);
        const run = compress % (runs.length + 1) === 0 ? undefined : runs[(compress % (runs.length + 1)) - 1];
        const useDotted = dotted && (run === undefined || run[1] <= 6);
        const g6 = groups[6] as number;
        const g7 = groups[7] as number;
        const items: string[] = useDotted ? [...parts.slice(0, 6), `${g6 >> 8}.${g6 & 255}.${g7 >> 8}.${g7 & 255}`] : parts;
        let text: string;
        if (run === undefined) text = items.join(":");
        else {
          const tailItems = useDotted ? [...parts.slice(run[1], 6), items[6] as string] : parts.slice(run[1]);
          text = `${parts.slice(0, run[0]).join(":")}::${tailItems.join(":")}`;
        }
        // reference: mask as a 128-bit integer, let the WHATWG URL serializer (RFC 5952) write it
        let value = 0n;
        for (const g of groups) value = (value << 16n) | BigInt(g);
        const masked = value & (((1n << BigInt(subnet)) - 1n) << BigInt(128 - subnet));
        const hextets = Array.from({ length: 8 }, (_, i) => ((masked >> BigInt(112 - 16 * i)) & 0xffffn).toString(16));
        const canonical = new URL(`http://[${hextets.join(":")}]/`).hostname.slice(1, -1);
        expect(normalizeIp(text, { ipv6Subnet: subnet }), text).toBe(`${canonical}/${subnet}`);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("option validation", () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "aws", "Cloudflare", true, null])(
    "trust %j → SluiceConfigError naming trust",
    (trust) => {
      const call = () => clientIp(request(ALL_HEADERS), { trust } as unknown as ClientIpOptions);
      expect(call).toThrow(SluiceConfigError);
      expect(call).toThrow(/^\[sluice\] trust must be "cloudflare", "vercel" or a positive integer count of trusted proxies; got /);
    },
  );

  it("names the bad trust value", () => {
    expect(() => clientIp(request({}), { trust: "aws" } as unknown as ClientIpOptions)).toThrow(/got "aws"$/);
    expect(() => clientIp(request({}), { trust: 0 })).toThrow(/got 0$/);
  });

  it.each([0, 129, 64.5, -64, Number.NaN, "64", null])("ipv6Subnet %j → SluiceConfigError naming ipv6Subnet", (ipv6Subnet) => {
    const options = { trust: "cloudflare", ipv6Subnet } as unknown as ClientIpOptions;
    expect(() => clientIp(request(ALL_HEADERS), options)).toThrow(SluiceConfigError);
    expect(() => clientIp(request(ALL_HEADERS), options)).toThrow(/^\[sluice\] ipv6Subnet must be an integer from 1 to 128; got /);
    expect(() => normalizeIp("2001:db8::1", options)).toThrow(/^\[sluice\] ipv6Subnet must be an integer from 1 to 128; got /);
    // even when the address is IPv4 and the option would not matter
    expect(() => normalizeIp("1.2.3.4", options)).toThrow(SluiceConfigError);
  });

  it("rejects options that are not an object", () => {
    expect(() => clientIp(request({}), null as unknown as ClientIpOptions)).toThrow(
      "[sluice] options must be an object like { trust, ipv6Subnet }; got null",
    );
    expect(() => validateClientIpOptions("cloudflare" as unknown as ClientIpOptions)).toThrow(
      '[sluice] options must be an object like { trust, ipv6Subnet }; got "cloudflare"',
    );
    expect(() => validateClientIpOptions({ trust: 2, ipv6Subnet: 56 })).not.toThrow();
    expect(() => validateClientIpOptions(undefined)).not.toThrow();
  });
});
